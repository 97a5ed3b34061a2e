// atto/data/stream_dataset.h: the whole file as one token stream (nanoGPT's way).
//
//   atto::StreamDataset data(file, tok);        // tok: stream vocabulary, '\n' included
//   atto::Batch b = data.sample_batch(rng, 12, 64);
//
// Layout, for a window starting at token i of a split s and block size T:
//   x[b] = s[i .. i+T)      y[b] = s[i+1 .. i+T+1)     (targets are the inputs shifted by one)
//
// Policies (docs/data.md)
// - Split by position: train = the first floor(0.9 * N) tokens, val = the rest (nanoGPT's
//   split; tinyshakespeare: 1,003,854 / 111,540). It does not depend on any seed.
// - Each split needs at least T + 1 tokens, else an error gives the sizes and the largest
//   usable --block-size.
// - Training windows: i = rng.below(n - T) for a split of n tokens (nanoGPT's torch.randint).
// - Evaluation: non-overlapping windows at 0, T, 2T, ... score targets s[1..]; when n - 1 is not
//   a multiple of T, one last window ends at the split's end, s[n-1-T .. n-1), and scores only
//   its targets not scored before (the others are -1), so every target s[1..n) counts exactly
//   once and the tail still gets a full window of context. s[0] is only ever an input.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace atto {

class StreamDataset : public TextDataset {
 public:
  StreamDataset(const TextFile& file, const GptTokenizer& tok, const DataOptions& opts = {});

  DataMode mode() const override { return DataMode::Stream; }
  int64_t size(Split split) const override { return static_cast<int64_t>(tokens(split).size()); }
  void check_block_size(int64_t T) const override;
  int64_t min_block_size() const override { return 1; }
  int64_t max_block_size() const override;

  Batch sample_batch(Rng& rng, int64_t B, int64_t T, Split split = Split::Train) const override;
  int64_t num_eval_batches(Split split, int64_t B, int64_t T) const override;
  Batch eval_batch(Split split, int64_t index, int64_t B, int64_t T) const override;

  std::span<const int32_t> tokens(Split split) const;
  const std::vector<int32_t>& all_tokens() const { return tokens_; }

  // All of a tiny stream (fewer than kMinTokensForHoldout tokens), else the first 90%.
  static int64_t train_size_for(int64_t n_tokens, int64_t min_tokens = kMinTokensForHoldout) {
    return n_tokens < min_tokens ? n_tokens : n_tokens * 9 / 10;
  }
  int64_t num_tokens(Split split) const override { return size(split); }
  bool val_is_train() const override { return n_train_ == static_cast<int64_t>(tokens_.size()); }

 private:
  std::string path_;
  std::vector<int32_t> tokens_;  // [N] the whole file
  int64_t n_train_ = 0;
};

namespace data_detail {
// The windows of stream data (the policies above) over any token storage: `read` copies the n
// tokens from position i of a split of n_split tokens (in memory, or a mapped token file).
using ReadTokens = std::function<void(int64_t i, int64_t n, int32_t* out)>;
Batch stream_sample(const ReadTokens& read, int64_t n_split, Rng& rng, int64_t B, int64_t T);
int64_t stream_windows(int64_t n_split, int64_t T);
Batch stream_eval(const ReadTokens& read, int64_t n_split, int64_t index, int64_t B, int64_t T, Split split);
}  // namespace data_detail

}  // namespace atto
