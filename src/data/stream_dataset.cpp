#include "data/stream_dataset.h"

#include <algorithm>

#include "base/error.h"

namespace atto {

StreamDataset::StreamDataset(const TextFile& file, const GptTokenizer& tok, const DataOptions& opts)
    : path_(file.path) {
  data_detail::check_known_chars(tok, file, /*newline_separates=*/false);
  tokens_ = tok.encode(file.text);
  n_train_ = train_size_for(static_cast<int64_t>(tokens_.size()), opts.min_holdout_tokens);
}

std::span<const int32_t> StreamDataset::tokens(Split split) const {
  const std::span<const int32_t> all(tokens_);
  const auto n_train = static_cast<size_t>(n_train_);
  if (val_is_train()) return all;  // a tiny stream: validation scores the training tokens
  return split == Split::Train ? all.first(n_train) : all.subspan(n_train);
}

int64_t StreamDataset::max_block_size() const { return std::min(size(Split::Train), size(Split::Val)) - 1; }

void StreamDataset::check_block_size(int64_t T) const {
  ATTO_CHECK(T >= 1, "block size must be at least 1, got {}", T);
  const int64_t max_T = max_block_size();
  if (T <= max_T) return;
  const auto n = static_cast<int64_t>(tokens_.size());
  const std::string advice = max_T >= 1 ? fmt::format("use --block-size {} or less, or a longer file", max_T)
                                        : "the file is too short for stream mode: use a longer file (or --mode lines "
                                          "for a list of short samples)";
  if (val_is_train())
    fail(
        "stream mode: block size {} needs at least {} tokens, but data file '{}' has {} tokens (too few to "
        "hold any out for validation: all are trained on); {}",
        T, T + 1, path_, n, advice);
  fail(
      "stream mode: block size {} needs at least {} tokens in each split, but data file '{}' has "
      "{} tokens: {} for training (the first 90%) and {} for validation (the last 10%); {}",
      T, T + 1, path_, n, size(Split::Train), size(Split::Val), advice);
}

namespace data_detail {

Batch stream_sample(const ReadTokens& read, int64_t n, Rng& rng, int64_t B, int64_t T) {
  Batch batch{std::vector<int32_t>(static_cast<size_t>(B * T)), std::vector<int32_t>(static_cast<size_t>(B * T)), B, T};
  const auto starts = static_cast<uint64_t>(n - T);  // i in [0, n - T)
  std::vector<int32_t> w(static_cast<size_t>(T + 1));
  for (int64_t b = 0; b < B; ++b) {
    const auto i = static_cast<int64_t>(rng.below(starts));
    read(i, T + 1, w.data());
    std::copy_n(w.begin(), T, batch.x.begin() + b * T);
    std::copy_n(w.begin() + 1, T, batch.y.begin() + b * T);
  }
  return batch;
}

int64_t stream_windows(int64_t n, int64_t T) { return (n - 1 + T - 1) / T; }

Batch stream_eval(const ReadTokens& read, int64_t n, int64_t index, int64_t B, int64_t T, Split split) {
  const int64_t windows = stream_windows(n, T);
  ATTO_CHECK(index >= 0 && index * B < windows,
             "evaluation batch {} is out of range: the {} split "
             "has {} batches of {} windows",
             index, to_string(split), (windows + B - 1) / B, B);
  const int64_t full = (n - 1) / T;  // windows at 0, T, 2T, ... that end inside the split
  const int64_t rows = std::min(B, windows - index * B);
  Batch batch{std::vector<int32_t>(static_cast<size_t>(rows * T)), std::vector<int32_t>(static_cast<size_t>(rows * T)),
              rows, T};
  std::vector<int32_t> w(static_cast<size_t>(T + 1));
  for (int64_t b = 0; b < rows; ++b) {
    const int64_t k = index * B + b;
    // The tail window ends at the split's end; it overlaps window full-1, whose targets it skips.
    const int64_t start = k < full ? k * T : n - 1 - T;
    const int64_t skip = k < full ? 0 : full * T - start;
    read(start, T + 1, w.data());
    std::copy_n(w.begin(), T, batch.x.begin() + b * T);
    std::copy_n(w.begin() + 1, T, batch.y.begin() + b * T);
    std::fill_n(batch.y.begin() + b * T, skip, kIgnoreIndex);
  }
  return batch;
}

}  // namespace data_detail

Batch StreamDataset::sample_batch(Rng& rng, int64_t B, int64_t T, Split split) const {
  data_detail::check_batch_args(B, T);
  check_block_size(T);
  const std::span<const int32_t> s = tokens(split);
  return data_detail::stream_sample([&](int64_t i, int64_t n, int32_t* out) { std::copy_n(s.begin() + i, n, out); },
                                    size(split), rng, B, T);
}

int64_t StreamDataset::num_eval_batches(Split split, int64_t B, int64_t T) const {
  data_detail::check_batch_args(B, T);
  check_block_size(T);
  return (data_detail::stream_windows(size(split), T) + B - 1) / B;
}

Batch StreamDataset::eval_batch(Split split, int64_t index, int64_t B, int64_t T) const {
  data_detail::check_batch_args(B, T);
  check_block_size(T);
  const std::span<const int32_t> s = tokens(split);
  return data_detail::stream_eval([&](int64_t i, int64_t n, int32_t* out) { std::copy_n(s.begin() + i, n, out); },
                                  size(split), index, B, T, split);
}

}  // namespace atto
