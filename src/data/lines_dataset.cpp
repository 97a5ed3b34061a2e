#include "data/lines_dataset.h"

#include <algorithm>
#include <numeric>

#include "base/error.h"

namespace atto {

int64_t LinesDataset::val_size_for(int64_t n_lines, int64_t min_lines) { return holdout_size(n_lines, min_lines); }

LinesDataset::LinesDataset(const TextFile& file, const GptTokenizer& tok, const DataOptions& opts) : path_(file.path) {
  ATTO_CHECK(tok.has_boundary(),
             "lines mode needs a tokenizer with a boundary token (<eos>, <|endoftext|>); this one has none (it "
             "was built for stream mode): train a new run with --mode lines");
  eos_ = tok.boundary_id();
  data_detail::check_known_chars(tok, file, /*newline_separates=*/true);

  std::vector<Line> lines;
  for (const Line& line : split_lines(file.text)) {
    if (!line.text.empty()) lines.push_back(line);
  }
  const auto n = static_cast<int64_t>(lines.size());
  ATTO_CHECK(n >= 2,
             "lines mode needs at least 2 non-empty lines in data file '{}' (one for "
             "validation), found {}; add samples, one per line, or use --mode stream",
             path_, n);

  // Seeded Fisher-Yates shuffle of the line indices; the first n_val are validation.
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  Rng rng(opts.split_seed);
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i + 1)));
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
  }
  const int64_t n_val = holdout_size(n, opts.min_holdout);
  std::vector<char> is_val(static_cast<size_t>(n), 0);
  for (int64_t k = 0; k < n_val; ++k) is_val[static_cast<size_t>(perm[static_cast<size_t>(k)])] = 1;

  for (int64_t i = 0; i < n; ++i) {  // file order within each split
    const Line& line = lines[static_cast<size_t>(i)];
    Part& p = is_val[static_cast<size_t>(i)] ? val_ : train_;
    p.text.emplace_back(line.text);
    p.number.push_back(line.number);
    p.ids.push_back(tok.encode(line.text));
    max_length_ = std::max(max_length_, static_cast<int64_t>(p.ids.back().size()));
    (is_val[static_cast<size_t>(i)] ? val_set_ : train_set_).emplace(line.text);
  }
  if (n_val == 0) {  // too few lines to hold any out: validation scores the training lines
    val_ = train_;
    val_is_train_ = true;
  }
}

void LinesDataset::check_block_size(int64_t T) const {
  ATTO_CHECK(T >= 1, "block size must be at least 1, got {}", T);
  if (max_length_ + 1 <= T) return;
  // Name the first line (in file order) that does not fit, and the longest one.
  int64_t first = INT64_MAX, first_len = 0, longest = 0, too_long = 0;
  for (const Part* p : {&train_, &val_}) {
    if (p == &val_ && val_is_train_) break;  // the same lines again
    for (size_t i = 0; i < p->ids.size(); ++i) {
      const auto len = static_cast<int64_t>(p->ids[i].size());
      if (len + 1 <= T) continue;
      ++too_long;
      if (p->number[i] < first) first = p->number[i], first_len = len;
      if (len == max_length_ && (longest == 0 || p->number[i] < longest)) longest = p->number[i];
    }
  }
  fail(
      "lines mode: line {} of '{}' has {} characters, but block size {} fits lines of at most {} "
      "characters (a sample is <eos> + the line, and its targets end with <eos>); {} line(s) are "
      "too long, the longest is line {} with {} characters. Raise --block-size to at least {}, "
      "or use --mode stream",
      first, path_, first_len, T, T - 1, too_long, longest, max_length_, max_length_ + 1);
}

void LinesDataset::fill_row(const std::vector<int32_t>& ids, int64_t T, int32_t* x, int32_t* y) const {
  const auto n = static_cast<int64_t>(ids.size());  // n + 1 <= T (checked by the caller)
  x[0] = eos_;
  for (int64_t t = 0; t < n; ++t) {
    x[t + 1] = ids[static_cast<size_t>(t)];
    y[t] = ids[static_cast<size_t>(t)];
  }
  y[n] = eos_;
  for (int64_t t = n + 1; t < T; ++t) {
    x[t] = eos_;
    y[t] = kIgnoreIndex;
  }
}

Batch LinesDataset::sample_batch(Rng& rng, int64_t B, int64_t T, Split split) const {
  data_detail::check_batch_args(B, T);
  check_block_size(T);
  const Part& p = part(split);
  Batch batch{std::vector<int32_t>(static_cast<size_t>(B * T)), std::vector<int32_t>(static_cast<size_t>(B * T)), B, T};
  for (int64_t b = 0; b < B; ++b) {
    const uint64_t i = rng.below(p.ids.size());
    fill_row(p.ids[i], T, &batch.x[static_cast<size_t>(b * T)], &batch.y[static_cast<size_t>(b * T)]);
  }
  return batch;
}

int64_t LinesDataset::num_eval_batches(Split split, int64_t B, int64_t T) const {
  data_detail::check_batch_args(B, T);
  return (size(split) + B - 1) / B;
}

Batch LinesDataset::eval_batch(Split split, int64_t index, int64_t B, int64_t T) const {
  data_detail::check_batch_args(B, T);
  check_block_size(T);
  const int64_t n = size(split);
  ATTO_CHECK(index >= 0 && index * B < n,
             "evaluation batch {} is out of range: the {} split has "
             "{} batches of {} lines",
             index, to_string(split), (n + B - 1) / B, B);
  const int64_t rows = std::min(B, n - index * B);
  const Part& p = part(split);
  Batch batch{std::vector<int32_t>(static_cast<size_t>(rows * T)), std::vector<int32_t>(static_cast<size_t>(rows * T)),
              rows, T};
  for (int64_t b = 0; b < rows; ++b) {
    fill_row(p.ids[static_cast<size_t>(index * B + b)], T, &batch.x[static_cast<size_t>(b * T)],
             &batch.y[static_cast<size_t>(b * T)]);
  }
  return batch;
}

int64_t LinesDataset::num_tokens(Split split) const {
  int64_t n = 0;
  for (const auto& ids : part(split).ids) n += static_cast<int64_t>(ids.size()) + 1;  // + <eos>
  return n;
}

LinesDataset::Novelty LinesDataset::novelty(std::string_view sample) const {
  if (train_set_.find(sample) != train_set_.end()) return Novelty::Train;
  if (val_set_.find(sample) != val_set_.end()) return Novelty::Val;
  return Novelty::New;
}

}  // namespace atto
