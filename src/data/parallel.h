// atto/data/parallel.h: reading a parallel corpus (sentence pairs) for seq2seq training.
//
//   atto::ParallelCorpus c = atto::read_parallel("data/train.de", "data/train.en");
//   // or: atto::read_parallel_tsv("data/train.tsv");          // source<TAB>target per line
//   std::cout << c.summary();     // "10000 sentence pairs from ... (2 with an empty side skipped)"
//   auto enc = atto::encode_pairs(c, *src_tok, *tgt_tok);
//   atto::LengthFilterReport r = atto::filter_by_length(enc, 100, 100);   // training only
//   atto::TrainValSplit s = atto::split_train_val(static_cast<int64_t>(enc.size()), 1337);
//   auto train = atto::select(enc, s.train), val = atto::select(enc, s.val);
//
// Policies (docs/seq2seq-data.md)
// - Files are read and validated like any atto data file (read_text_file's checks: exists,
//   not a directory, a regular file (no device or FIFO), not empty, valid UTF-8 with offset and
//   line of a bad byte, no NUL; a leading BOM is dropped and "\r\n" becomes "\n"). Lines are
//   numbered from 1.
// - Two files: line i of the source is the translation of line i of the target, so both must
//   have the same number of lines; otherwise an error gives both counts and both file names.
// - TSV: every non-empty line holds exactly one tab (source, tab, target); otherwise an error
//   names the file, the line and its number of tabs. A completely empty line is an empty pair.
// - A pair with an empty side (no character but whitespace) is skipped and counted in
//   skipped_empty, as Moses' clean-corpus-n.perl and Marian's corpus reader skip them. Text is
//   kept as is otherwise (no trimming). A corpus left with no pair is an error.
// - Length filter (training data only; never filter validation or test data, it would flatter
//   the scores): a pair whose source has more than max_src_len tokens or whose target has
//   more than max_tgt_len tokens is dropped and counted (0 = no limit). Lengths are as
//   encode() returns them, before the model adds <bos>/<eos>.
// - Validation split: the n pairs are shuffled with Rng(seed) (Fisher-Yates, as the lines
//   dataset does); the first holdout_size(n) = max(1, min(1000, n / 10)) are validation, the
//   rest training, each kept in file order. Needs n >= 2. Below 50 pairs nothing is held out:
//   train and val are every pair (data/dataset.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/split.h"
#include "tokenize/tokenizer.h"

namespace atto {

struct SentencePair {
  std::string src, tgt;
  int64_t line = 0;  // 1-based line number in the file(s)
};

struct ParallelCorpus {
  std::string src_path, tgt_path;   // for a TSV corpus both are the TSV path
  std::vector<SentencePair> pairs;  // in file order
  int64_t lines = 0;                // lines read (pairs + skipped)
  int64_t skipped_empty = 0;        // pairs with an empty side, left out

  // "10000 sentence pairs from 'a.de' and 'a.en' (2 pairs with an empty side skipped)".
  std::string summary() const;
  std::vector<std::string> sources() const;  // pairs[i].src, e.g. to train a tokenizer
  std::vector<std::string> targets() const;
};

ParallelCorpus read_parallel(const std::string& src_path, const std::string& tgt_path);
ParallelCorpus read_parallel_tsv(const std::string& path);

// The same from text already in memory; the names are used in messages only.
ParallelCorpus make_parallel(const std::string& src_name, std::string src_text, const std::string& tgt_name,
                             std::string tgt_text);
ParallelCorpus make_parallel_tsv(const std::string& name, std::string text);

struct EncodedPair {
  std::vector<int32_t> src, tgt;  // token ids without <bos>/<eos>
  int64_t line = 0;
};

std::vector<EncodedPair> encode_pairs(const ParallelCorpus& corpus, const Tokenizer& src_tok, const Tokenizer& tgt_tok);

struct LengthFilterReport {
  int64_t max_src_len = 0, max_tgt_len = 0;  // the limits applied (0 = none)
  int64_t kept = 0;
  int64_t dropped = 0;
  int64_t first_dropped_line = 0;  // 0 when nothing was dropped
  // "dropped 3 of 1000 sentence pairs longer than 100 source / 100 target tokens (first: line 17)"
  std::string summary() const;
};

// Removes (in place, keeping order) the pairs longer than the limits; 0 = no limit.
LengthFilterReport filter_by_length(std::vector<EncodedPair>& pairs, int64_t max_src_len, int64_t max_tgt_len);

struct TrainValSplit {
  std::vector<int64_t> train, val;  // indices into the corpus, ascending
  bool val_is_train = false;        // a tiny corpus (holdout_size 0): val = train, every pair
};

int64_t parallel_val_size(
    int64_t n, int64_t min_pairs = kMinSamplesForHoldout);  // holdout_size (data/dataset.h): 0 below min_pairs
TrainValSplit split_train_val(int64_t n, uint64_t seed, int64_t min_pairs = kMinSamplesForHoldout);

// items[idx[0]], items[idx[1]], ...
template <typename T>
std::vector<T> select(const std::vector<T>& items, const std::vector<int64_t>& idx) {
  std::vector<T> out;
  out.reserve(idx.size());
  for (int64_t i : idx) out.push_back(items.at(static_cast<size_t>(i)));
  return out;
}

}  // namespace atto
