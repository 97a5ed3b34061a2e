// atto/data/token_dataset.h: a prepared corpus (`atto data prepare`: DIR/train.bin, DIR/val.bin,
// DIR/tokenizer.json, DIR/meta.json) as stream data: training reads random windows (pread)
// without loading the files, so resident memory does not grow with the corpus.
//
//   auto tok = atto::load_prepared_tokenizer("data/owt");
//   atto::TokenFileDataset data("data/owt", *tok);
//   atto::Batch b = data.sample_batch(rng, 12, 256);
//
// Windows and evaluation follow stream_dataset.h, with the split given by the files (documents
// were assigned to train or val when the corpus was prepared). An empty val.bin makes validation
// score the training tokens (val_is_train).
#pragma once

#include <memory>
#include <string>

#include "data/dataset.h"
#include "data/token_file.h"

namespace atto {

// True when `path` is a folder holding a prepared corpus (its meta.json).
bool is_prepared_corpus(const std::string& path);
// DIR/tokenizer.json of a prepared corpus.
std::unique_ptr<GptTokenizer> load_prepared_tokenizer(const std::string& dir);
// The corpus's fingerprint from DIR/meta.json (written by prepare: its inputs' sizes, the token
// files' counts and the tokenizer), for --resume to check the data did not change.
std::string prepared_fingerprint(const std::string& dir);

class TokenFileDataset : public TextDataset {
 public:
  // atto::Error when the files do not fit the tokenizer (vocabulary) or each other.
  TokenFileDataset(const std::string& dir, const GptTokenizer& tok);

  DataMode mode() const override { return DataMode::Stream; }
  int64_t size(Split split) const override { return part(split).size(); }
  void check_block_size(int64_t T) const override;
  int64_t min_block_size() const override { return 1; }
  int64_t max_block_size() const override { return std::min(size(Split::Train), size(Split::Val)) - 1; }
  Batch sample_batch(Rng& rng, int64_t B, int64_t T, Split split = Split::Train) const override;
  int64_t num_eval_batches(Split split, int64_t B, int64_t T) const override;
  Batch eval_batch(Split split, int64_t index, int64_t B, int64_t T) const override;
  int64_t num_tokens(Split split) const override { return size(split); }
  bool val_is_train() const override { return val_ == nullptr; }

 private:
  const TokenFileReader& part(Split split) const { return split == Split::Val && val_ ? *val_ : *train_; }
  std::string dir_;
  std::unique_ptr<TokenFileReader> train_, val_;
};

}  // namespace atto
