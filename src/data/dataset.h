// atto/data/dataset.h: batches of token ids for a decoder-only language model.
//
//   atto::TextFile file = atto::read_text_file(path);
//   atto::DataMode mode = atto::resolve_mode(file, atto::DataMode::Auto);
//   atto::CharTokenizer tok = atto::build_tokenizer(file, mode);     // saved as tokenizer.json
//   auto data = atto::make_dataset(file, tok, mode, {.split_seed = 1337});
//   data->check_block_size(T);                        // fail early with a helpful message
//   atto::Batch b = data->sample_batch(rng, B, T);    // training: random samples
//   for (int64_t i = 0; i < data->num_eval_batches(atto::Split::Val, B, T); ++i) {
//     atto::Batch e = data->eval_batch(atto::Split::Val, i, B, T);   // every target once
//   }
//
// Conventions
// - Batch::x and Batch::y are [B, T] row-major token ids; y[b, t] is the token that should
//   follow x[b, 0..t]; y == -1 marks a position the loss ignores (padding, or a target that an
//   earlier evaluation window already scored).
// - Datasets are immutable after construction: a batch is a pure function of (data, split
//   seed, the Rng state passed in, B, T). sample_batch() only draws from the Rng you pass, so
//   saving and restoring that Rng's state resumes the exact batch sequence.
// - The split is fixed by the data and the split seed (lines) or by the data alone (stream);
//   it does not depend on B, T or the training Rng.
// - See lines_dataset.h and stream_dataset.h for the layouts, docs/data.md for the policies.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "data/split.h"
#include "data/text_file.h"
#include "tensor/rng.h"
#include "tokenize/char_tokenizer.h"
#include "tokenize/tokenizer.h"

namespace atto {

inline constexpr int32_t kIgnoreIndex = -1;  // target id the loss skips

struct Batch {
  std::vector<int32_t> x, y;  // [B, T] inputs and targets (kIgnoreIndex = ignore)
  int64_t B = 0, T = 0;

  // Targets that count in the loss (y != kIgnoreIndex). Weight per-batch mean losses by this
  // to get the exact mean over a split.
  int64_t num_targets() const;
};

enum class Split { Train, Val };
const char* to_string(Split split);

struct DataOptions {
  uint64_t split_seed = 1337;                         // seeds the lines-mode train/val shuffle (stream ignores it)
  int64_t min_holdout = kMinSamplesForHoldout;        // lines: fewer lines, nothing held out
  int64_t min_holdout_tokens = kMinTokensForHoldout;  // stream: fewer tokens, nothing held out
};

class TextDataset {
 public:
  virtual ~TextDataset() = default;

  virtual DataMode mode() const = 0;
  // Samples (lines mode) or tokens (stream mode) in a split.
  virtual int64_t size(Split split) const = 0;
  // Throws atto::Error explaining the limit when block size T cannot be used with this data.
  virtual void check_block_size(int64_t T) const = 0;
  // Smallest usable block size: longest line + 1 (lines); 1 (stream).
  virtual int64_t min_block_size() const = 0;
  // Largest usable block size: unlimited (lines: INT64_MAX); shortest split - 1 (stream).
  virtual int64_t max_block_size() const = 0;

  // B random samples from a split, drawn with rng (with replacement).
  virtual Batch sample_batch(Rng& rng, int64_t B, int64_t T, Split split = Split::Train) const = 0;
  // Deterministic evaluation: batches 0..num_eval_batches-1 together score every target of
  // the split exactly once. All batches have B rows except possibly the last one.
  virtual int64_t num_eval_batches(Split split, int64_t B, int64_t T) const = 0;
  virtual Batch eval_batch(Split split, int64_t index, int64_t B, int64_t T) const = 0;
  // Tokens a split holds: its characters, plus one end token per line in lines mode.
  virtual int64_t num_tokens(Split split) const = 0;
  // True when the corpus was too small to hold anything out: the Val split is the training set.
  virtual bool val_is_train() const = 0;
};

// The tokenizer options for a (resolved) mode: lines -> <eos> and no newline; stream -> no
// special tokens, newline kept.
CharTokenizerOptions tokenizer_options(DataMode mode);
// A character vocabulary built from the whole file (train and val splits alike, as makemore
// and nanoGPT do), so that evaluation never meets an unknown character.
CharTokenizer build_tokenizer(const TextFile& file, DataMode mode);
// A GPT's tokenizer for the file: characters (build_tokenizer), SentencePiece with byte fallback
// (vocab_size pieces, 0 = 8000; lines mode: </s> the boundary), or byte-level BPE learned on the
// whole file with vocab_size tokens (0 = 2000); in lines mode its <|endoftext|> is the boundary
// (stream mode has none, as a char tokenizer has no <eos> there).
std::unique_ptr<GptTokenizer> build_gpt_tokenizer(const TextFile& file, DataMode mode, TokenizerKind kind,
                                                  int64_t vocab_size);
// Bytes of text each token stands for (the boundary: 1, the newline it replaces in lines mode):
// bits per byte = nats per token * tokens / (bytes * ln 2), comparable across tokenizers.
std::vector<int32_t> token_byte_lengths(const GptTokenizer& tok);

// A LinesDataset or StreamDataset. `mode` must be resolved (not Auto). The tokenizer may be a
// freshly built one or one loaded from a run directory; characters of the file missing from it
// are reported with their line and column.
std::unique_ptr<TextDataset> make_dataset(const TextFile& file, const GptTokenizer& tok, DataMode mode,
                                          const DataOptions& opts = {});

namespace data_detail {
// Throws atto::Error when the file has characters the tokenizer lacks, listing each one with
// its line:column (up to a limit). '\n' is exempt when newline_separates (lines mode).
// (Nothing to check for a tokenizer with an open vocabulary: byte-level BPE encodes anything.)
void check_known_chars(const GptTokenizer& tok, const TextFile& file, bool newline_separates);
void check_batch_args(int64_t B, int64_t T);
}  // namespace data_detail

}  // namespace atto
