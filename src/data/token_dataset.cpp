#include "data/token_dataset.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/json.h"
#include "base/files.h"
#include "base/error.h"
#include "data/stream_dataset.h"

namespace atto {

namespace {

nlohmann::json read_json_file(const std::string& path) {
  return json_util::parse(files::read(path, files::kJsonCap, "prepared corpus file"), path);
}

std::string in_dir(const std::string& dir, const char* name) { return (std::filesystem::path(dir) / name).string(); }

}  // namespace

bool is_prepared_corpus(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) && std::filesystem::is_regular_file(in_dir(path, "meta.json"), ec);
}

std::unique_ptr<GptTokenizer> load_prepared_tokenizer(const std::string& dir) {
  const std::string p = in_dir(dir, "tokenizer.json");
  return load_gpt_tokenizer(read_json_file(p), p, dir);
}

std::string prepared_fingerprint(const std::string& dir) {
  const std::string p = in_dir(dir, "meta.json");
  const nlohmann::json j = read_json_file(p);
  ATTO_CHECK(j.is_object() && j.contains("fingerprint") && j["fingerprint"].is_string(),
             "{}: no \"fingerprint\" (not written by `atto data prepare`?)", p);
  return j["fingerprint"].get<std::string>();
}

TokenFileDataset::TokenFileDataset(const std::string& dir, const GptTokenizer& tok) : dir_(dir) {
  train_ = std::make_unique<TokenFileReader>(in_dir(dir, "train.bin"));
  auto val = std::make_unique<TokenFileReader>(in_dir(dir, "val.bin"));
  for (const TokenFileReader* m : {train_.get(), val.get()})
    ATTO_CHECK(m->vocab_size() == tok.vocab_size(),
               "{}: its tokens are of a vocabulary of {}, but {} has {} tokens (prepare the corpus again with "
               "this tokenizer)",
               m->path(), m->vocab_size(), in_dir(dir, "tokenizer.json"), tok.vocab_size());
  ATTO_CHECK(train_->size() >= 2, "{}: {} tokens; a corpus to train on needs more", train_->path(), train_->size());
  if (val->size() > 0) val_ = std::move(val);
}

void TokenFileDataset::check_block_size(int64_t T) const {
  ATTO_CHECK(T >= 1, "block size must be at least 1, got {}", T);
  ATTO_CHECK(T <= max_block_size(),
             "block size {} needs at least {} tokens in each split; the prepared corpus {} has {} (train) and {} "
             "(val): use --block-size {} or less",
             T, T + 1, dir_, size(Split::Train), size(Split::Val), max_block_size());
}

Batch TokenFileDataset::sample_batch(Rng& rng, int64_t B, int64_t T, Split split) const {
  data_detail::check_batch_args(B, T);
  check_block_size(T);
  const TokenFileReader& m = part(split);
  return data_detail::stream_sample([&](int64_t i, int64_t n, int32_t* out) { m.read(i, n, out); }, m.size(), rng, B,
                                    T);
}

int64_t TokenFileDataset::num_eval_batches(Split split, int64_t B, int64_t T) const {
  data_detail::check_batch_args(B, T);
  check_block_size(T);
  return (data_detail::stream_windows(size(split), T) + B - 1) / B;
}

Batch TokenFileDataset::eval_batch(Split split, int64_t index, int64_t B, int64_t T) const {
  data_detail::check_batch_args(B, T);
  check_block_size(T);
  const TokenFileReader& m = part(split);
  return data_detail::stream_eval([&](int64_t i, int64_t n, int32_t* out) { m.read(i, n, out); }, m.size(), index, B, T,
                                  split);
}

}  // namespace atto
