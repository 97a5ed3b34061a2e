#include "data/parallel.h"

#include <algorithm>
#include <numeric>

#include "base/error.h"
#include "data/split.h"
#include "data/text_file.h"
#include "tensor/rng.h"

namespace atto {

namespace {

// Reads a corpus file (read_user_file's path checks: a device or a FIFO is refused); emptiness
// gets a corpus-specific message, the rest (UTF-8, NUL, normalisation) is make_text_file's.
TextFile read_corpus_file(const std::string& path, const char* role) {
  std::string bytes = read_user_file(path, role);  // exists, not a directory, a regular file
  ATTO_CHECK(!bytes.empty(),
             "{} file '{}' is empty; a parallel corpus needs one sentence per "
             "line",
             role, path);
  return make_text_file(path, std::move(bytes));
}

bool blank(std::string_view s) { return s.find_first_not_of(" \t\v\f\r") == std::string_view::npos; }

void add_pair(ParallelCorpus& c, std::string_view src, std::string_view tgt, int64_t line) {
  ++c.lines;
  if (blank(src) || blank(tgt)) {
    ++c.skipped_empty;
    return;
  }
  c.pairs.push_back(SentencePair{std::string(src), std::string(tgt), line});
}

void check_not_empty(const ParallelCorpus& c) {
  ATTO_CHECK(!c.pairs.empty(),
             "parallel corpus {}: none of its {} line(s) holds a sentence pair "
             "with text on both sides",
             c.src_path == c.tgt_path ? "'" + c.src_path + "'" : "'" + c.src_path + "' / '" + c.tgt_path + "'",
             c.lines);
}

ParallelCorpus pair_up(const TextFile& src, const TextFile& tgt) {
  const std::vector<Line> s = split_lines(src.text), t = split_lines(tgt.text);
  ATTO_CHECK(s.size() == t.size(),
             "parallel corpus: source file '{}' has {} lines but target "
             "file '{}' has {}; line i of one must be the translation of line i of the other",
             src.path, s.size(), tgt.path, t.size());
  ParallelCorpus c;
  c.src_path = src.path;
  c.tgt_path = tgt.path;
  for (size_t i = 0; i < s.size(); ++i) add_pair(c, s[i].text, t[i].text, s[i].number);
  check_not_empty(c);
  return c;
}

ParallelCorpus split_tsv(const TextFile& file) {
  ParallelCorpus c;
  c.src_path = c.tgt_path = file.path;
  for (const Line& line : split_lines(file.text)) {
    if (line.text.empty()) {
      add_pair(c, "", "", line.number);
      continue;
    }
    const auto tabs = std::count(line.text.begin(), line.text.end(), '\t');
    ATTO_CHECK(tabs == 1,
               "parallel corpus '{}', line {}: found {} tab(s); each line must be "
               "source<TAB>target with exactly one tab",
               file.path, line.number, tabs);
    const size_t tab = line.text.find('\t');
    add_pair(c, line.text.substr(0, tab), line.text.substr(tab + 1), line.number);
  }
  check_not_empty(c);
  return c;
}

}  // namespace

std::string ParallelCorpus::summary() const {
  const std::string from =
      src_path == tgt_path ? fmt::format("'{}'", src_path) : fmt::format("'{}' and '{}'", src_path, tgt_path);
  std::string s = fmt::format("{} sentence pairs from {}", pairs.size(), from);
  if (skipped_empty > 0) s += fmt::format(" ({} pairs with an empty side skipped)", skipped_empty);
  return s;
}

std::vector<std::string> ParallelCorpus::sources() const {
  std::vector<std::string> v;
  v.reserve(pairs.size());
  for (const auto& p : pairs) v.push_back(p.src);
  return v;
}

std::vector<std::string> ParallelCorpus::targets() const {
  std::vector<std::string> v;
  v.reserve(pairs.size());
  for (const auto& p : pairs) v.push_back(p.tgt);
  return v;
}

ParallelCorpus read_parallel(const std::string& src_path, const std::string& tgt_path) {
  return pair_up(read_corpus_file(src_path, "source"), read_corpus_file(tgt_path, "target"));
}

ParallelCorpus read_parallel_tsv(const std::string& path) {
  return split_tsv(read_corpus_file(path, "parallel corpus"));
}

ParallelCorpus make_parallel(const std::string& src_name, std::string src_text, const std::string& tgt_name,
                             std::string tgt_text) {
  return pair_up(make_text_file(src_name, std::move(src_text)), make_text_file(tgt_name, std::move(tgt_text)));
}

ParallelCorpus make_parallel_tsv(const std::string& name, std::string text) {
  return split_tsv(make_text_file(name, std::move(text)));
}

std::vector<EncodedPair> encode_pairs(const ParallelCorpus& corpus, const Tokenizer& src_tok,
                                      const Tokenizer& tgt_tok) {
  std::vector<EncodedPair> out;
  out.reserve(corpus.pairs.size());
  for (const SentencePair& p : corpus.pairs) {
    out.push_back(EncodedPair{src_tok.encode(p.src), tgt_tok.encode(p.tgt), p.line});
  }
  return out;
}

std::string LengthFilterReport::summary() const {
  auto limit = [](int64_t n) { return n > 0 ? std::to_string(n) : std::string("unlimited"); };
  std::string s = fmt::format(
      "dropped {} of {} sentence pairs longer than {} source / {} target "
      "tokens",
      dropped, kept + dropped, limit(max_src_len), limit(max_tgt_len));
  if (dropped > 0) s += fmt::format(" (first: line {})", first_dropped_line);
  return s;
}

LengthFilterReport filter_by_length(std::vector<EncodedPair>& pairs, int64_t max_src_len, int64_t max_tgt_len) {
  ATTO_CHECK(max_src_len >= 0 && max_tgt_len >= 0,
             "maximum lengths must be >= 0 (0 = no limit), "
             "got source {} and target {}",
             max_src_len, max_tgt_len);
  LengthFilterReport r{.max_src_len = max_src_len, .max_tgt_len = max_tgt_len};
  auto too_long = [&](const EncodedPair& p) {
    return (max_src_len > 0 && static_cast<int64_t>(p.src.size()) > max_src_len) ||
           (max_tgt_len > 0 && static_cast<int64_t>(p.tgt.size()) > max_tgt_len);
  };
  for (const EncodedPair& p : pairs) {
    if (too_long(p) && r.dropped++ == 0) r.first_dropped_line = p.line;
  }
  std::erase_if(pairs, too_long);
  r.kept = static_cast<int64_t>(pairs.size());
  return r;
}

int64_t parallel_val_size(int64_t n, int64_t min_pairs) { return holdout_size(n, min_pairs); }

TrainValSplit split_train_val(int64_t n, uint64_t seed, int64_t min_pairs) {
  ATTO_CHECK(n >= 2,
             "a train/validation split needs at least 2 sentence pairs (one for "
             "validation), got {}",
             n);
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  Rng rng(seed);
  for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates, as LinesDataset
    const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i + 1)));
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
  }
  const auto n_val = static_cast<size_t>(parallel_val_size(n, min_pairs));
  TrainValSplit s;
  if (n_val == 0) {  // a tiny corpus: train on every pair, validate on the training pairs
    s.train.resize(static_cast<size_t>(n));
    std::iota(s.train.begin(), s.train.end(), 0);
    s.val = s.train;
    s.val_is_train = true;
    return s;
  }
  s.val.assign(perm.begin(), perm.begin() + static_cast<std::ptrdiff_t>(n_val));
  s.train.assign(perm.begin() + static_cast<std::ptrdiff_t>(n_val), perm.end());
  std::sort(s.val.begin(), s.val.end());
  std::sort(s.train.begin(), s.train.end());
  return s;
}

}  // namespace atto
