#include "data/dataset.h"

#include "tokenize/bpe.h"
#include "tokenize/spm_tokenizer.h"

#include <algorithm>

#include "base/error.h"
#include "data/lines_dataset.h"
#include "data/stream_dataset.h"
#include "tokenize/utf8.h"

namespace atto {

int64_t Batch::num_targets() const {
  return static_cast<int64_t>(std::count_if(y.begin(), y.end(), [](int32_t t) { return t != kIgnoreIndex; }));
}

const char* to_string(Split split) { return split == Split::Train ? "train" : "val"; }

CharTokenizerOptions tokenizer_options(DataMode mode) {
  ATTO_CHECK(mode != DataMode::Auto, "tokenizer_options: resolve the data mode first");
  return mode == DataMode::Lines ? CharTokenizerOptions{.boundary = true, .include_newline = false}
                                 : CharTokenizerOptions{.boundary = false, .include_newline = true};
}

CharTokenizer build_tokenizer(const TextFile& file, DataMode mode) {
  return CharTokenizer::build(file.text, tokenizer_options(mode));
}

std::unique_ptr<GptTokenizer> build_gpt_tokenizer(const TextFile& file, DataMode mode, TokenizerKind kind,
                                                  int64_t vocab_size) {
  if (kind == TokenizerKind::Char) return std::make_unique<CharTokenizer>(build_tokenizer(file, mode));
  if (kind == TokenizerKind::Spm)
    return std::make_unique<SpmGptTokenizer>(
        SpmGptTokenizer::train(file.text, vocab_size > 0 ? vocab_size : 8000, mode == DataMode::Lines));
  ATTO_CHECK(kind == TokenizerKind::Bpe, "a GPT's tokenizer is char, bpe or spm, not {}", to_string(kind));
  const std::string_view texts[] = {file.text};
  return std::make_unique<BpeTokenizer>(BpeTokenizer::train(
      texts,
      {.vocab_size = vocab_size > 0 ? vocab_size : 2000, .min_frequency = 2, .end_of_text = mode == DataMode::Lines}));
}

std::vector<int32_t> token_byte_lengths(const GptTokenizer& tok) {
  std::vector<int32_t> out(static_cast<size_t>(tok.vocab_size()));
  for (int32_t id = 0; id < tok.vocab_size(); ++id)
    out[id] = id == tok.boundary_id() ? 1 : static_cast<int32_t>(tok.decode({id}).size());
  return out;
}

std::unique_ptr<TextDataset> make_dataset(const TextFile& file, const GptTokenizer& tok, DataMode mode,
                                          const DataOptions& opts) {
  ATTO_CHECK(mode != DataMode::Auto, "make_dataset: resolve the data mode first (resolve_mode)");
  if (mode == DataMode::Lines) return std::make_unique<LinesDataset>(file, tok, opts);
  return std::make_unique<StreamDataset>(file, tok, opts);
}

namespace data_detail {

namespace {

constexpr size_t kMaxListedChars = 20;
constexpr size_t kMaxListedPlaces = 5;

struct Missing {
  char32_t cp;
  int64_t count = 0;
  std::vector<std::pair<int64_t, int64_t>> places;  // (line, column), first few
};

std::string describe_missing(const Missing& m) {
  std::string s = utf8::describe(m.cp) + " at";
  for (size_t i = 0; i < m.places.size(); ++i) {
    s += fmt::format("{} line {} column {}", i ? "," : "", m.places[i].first, m.places[i].second);
  }
  if (m.count > static_cast<int64_t>(m.places.size())) s += fmt::format(" ({} times in all)", m.count);
  return s;
}

}  // namespace

void check_known_chars(const GptTokenizer& any, const TextFile& file, bool newline_separates) {
  if (any.open_vocabulary()) return;
  const auto& tok = dynamic_cast<const CharTokenizer&>(any);
  std::vector<Missing> missing;
  int64_t line = 1, column = 1;
  size_t pos = 0;
  while (pos < file.text.size()) {
    const char32_t cp = utf8::next(file.text, pos);
    const bool is_break = cp == U'\n' && newline_separates;
    if (!is_break && tok.id_of(cp) < 0) {
      auto it = std::find_if(missing.begin(), missing.end(), [&](const Missing& m) { return m.cp == cp; });
      if (it == missing.end()) it = missing.insert(missing.end(), Missing{cp, 0, {}});
      if (it->places.size() < kMaxListedPlaces) it->places.emplace_back(line, column);
      ++it->count;
    }
    if (cp == U'\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  if (missing.empty()) return;
  std::string list;
  for (size_t i = 0; i < missing.size() && i < kMaxListedChars; ++i) {
    list += (i ? "; " : "") + describe_missing(missing[i]);
  }
  if (missing.size() > kMaxListedChars) {
    list += fmt::format("; and {} more distinct characters", missing.size() - kMaxListedChars);
  }
  fail(
      "data file '{}' has {} character(s) missing from the tokenizer's vocabulary ({} tokens, "
      "built from the training data when the run started): {}; train a new run on this file, "
      "or remove these characters",
      file.path, missing.size(), tok.vocab_size(), list);
}

void check_batch_args(int64_t B, int64_t T) {
  ATTO_CHECK(B >= 1, "batch size must be at least 1, got {}", B);
  ATTO_CHECK(T >= 1, "block size must be at least 1, got {}", T);
  ATTO_CHECK(B <= (int64_t{1} << 40) / T, "batch size {} x block size {} is too large", B, T);
}

}  // namespace data_detail

}  // namespace atto
