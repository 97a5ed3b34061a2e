// atto/data/lines_dataset.h: one sample per line, framed by <eos> (makemore's way).
//
//   atto::LinesDataset data(file, tok, {.split_seed = 1337});   // tok.has_boundary() required
//   atto::Batch b = data.sample_batch(rng, 32, 16);
//   data.novelty("emmy");   // Train, Val or New: is a generated sample copied from the data?
//
// Layout, for a line of n characters c1..cn (ids) and block size T (needs T >= n + 1):
//   x[b] = [<eos>, c1, ..., cn, <eos>, ..., <eos>]    inputs; padding holds <eos> (any id works)
//   y[b] = [c1,    ..., cn, <eos>, -1, ...,   -1]    targets; -1 = ignored by the loss
// so the model learns to start a line after <eos> and to end it with <eos>.
//
// Policies (docs/data.md)
// - Empty lines are skipped (they carry no sample); line numbers stay those of the file.
// - A line longer than T - 1 characters is an error naming the line, its length and the
//   --block-size needed (lines are never cropped silently).
// - Split: the non-empty lines are shuffled with Rng(split_seed) (Fisher-Yates); the first
//   val_size_for(n) = max(1, min(1000, n / 10)) of the shuffle are validation, the rest training
//   (makemore's rule). Each split keeps its lines in file order. At least 2 lines are needed.
//   Below 50 lines nothing is held out: the Val split is the training lines (val_is_train()).
// - Training batches draw B lines uniformly with replacement (one rng.below(n_train) each).
// - Evaluation walks the split's lines in file order, B per batch; the last batch may be short.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "data/dataset.h"

namespace atto {

class LinesDataset : public TextDataset {
 public:
  LinesDataset(const TextFile& file, const GptTokenizer& tok, const DataOptions& opts = {});

  DataMode mode() const override { return DataMode::Lines; }
  int64_t size(Split split) const override { return static_cast<int64_t>(part(split).text.size()); }
  void check_block_size(int64_t T) const override;
  int64_t min_block_size() const override { return max_length_ + 1; }
  int64_t max_block_size() const override { return INT64_MAX; }

  Batch sample_batch(Rng& rng, int64_t B, int64_t T, Split split = Split::Train) const override;
  int64_t num_eval_batches(Split split, int64_t B, int64_t T) const override;
  Batch eval_batch(Split split, int64_t index, int64_t B, int64_t T) const override;

  // The lines of a split (file order) and their 1-based line numbers in the file.
  const std::vector<std::string>& lines(Split split) const { return part(split).text; }
  const std::vector<int64_t>& line_numbers(Split split) const { return part(split).number; }

  enum class Novelty { Train, Val, New };
  // Train if the text is a training line, else Val if it is a validation line, else New.
  Novelty novelty(std::string_view sample) const;

  static int64_t val_size_for(int64_t n_lines, int64_t min_lines = kMinSamplesForHoldout);  // holdout_size
  bool val_is_train() const override { return val_is_train_; }
  int64_t num_tokens(Split split) const override;

 private:
  struct Part {
    std::vector<std::string> text;
    std::vector<int64_t> number;
    std::vector<std::vector<int32_t>> ids;  // token ids of each line, without <eos>
  };
  const Part& part(Split split) const { return split == Split::Train ? train_ : val_; }
  // Writes one row: x[0..T), y[0..T) from a line's ids.
  void fill_row(const std::vector<int32_t>& ids, int64_t T, int32_t* x, int32_t* y) const;

  std::string path_;
  int32_t eos_ = 0;
  int64_t max_length_ = 0;
  bool val_is_train_ = false;
  Part train_, val_;
  std::set<std::string, std::less<>> train_set_, val_set_;
};

}  // namespace atto
