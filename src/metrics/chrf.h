// atto/metrics/chrf.h: corpus chrF and chrF++ exactly as sacreBLEU 2.x computes them.
//
//   atto::metrics::ChrfResult r = atto::metrics::corpus_chrf(hyps, refs);   // refs[k][i]
//   r.score;        // 0..100; 59.73 on sacreBLEU's README example (see bleu.h)
//   r.format();     // "chrF2 = 59.73"
//   r.signature();  // "nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:atto"
//   corpus_chrf(hyps, refs, {.word_order = 2});   // chrF++ ("chrF2++")
//
// What is computed (sacrebleu/metrics/chrf.py and helpers.py; see docs/metrics.md):
// - Each segment is lowercased if asked. Character n-grams (n = 1..char_order) are taken over
//   code points after removing all whitespace (Python's "".join(s.split())), or over the text
//   as is with whitespace = true. Word n-grams (n = 1..word_order, chrF++) are taken over the
//   whitespace-split words, where a word of 2+ characters ending in ASCII punctuation
//   (Python's string.punctuation) is split into word + mark, else one starting with it into
//   mark + word.
// - Statistics per order: [hyp n-grams, ref n-grams, matches], matches = sum over n-grams of
//   min(hyp count, ref count); hyp n-grams count 0 when the reference has none of that order.
//   With several references, a segment takes the statistics of the reference with the best
//   sentence-level score (the first on ties). Statistics are summed over the corpus.
// - Score (default, "eff:yes", sacreBLEU >= 2.0 without eps smoothing): over the orders
//   where both hyp and ref have n-grams, average precision P and recall R;
//   chrF = 100 * (1 + beta^2) P R / (beta^2 P + R), 0 when P + R = 0.
//   With eps_smoothing ("eff:no", chrF++.py / NLTK / Moses): per order
//   P = matches / hyp or 1e-16 if hyp = 0, R likewise, F = (1 + beta^2) P R / (beta^2 P + R)
//   or 1e-16 if the denominator is 0; chrF = 100 * sum(F) / (char_order + word_order).
// - Empty references are left out as in BLEU (nrefs "var" if the count varies).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "metrics/corpus.h"  // kSignatureVersion

namespace atto::metrics {

struct ChrfOptions {
  int char_order = 6;          // character n-gram orders 1..char_order
  int word_order = 0;          // word n-gram orders 1..word_order (2: chrF++)
  int beta = 2;                // recall is beta times as important as precision
  bool lowercase = false;      // case-insensitive
  bool whitespace = false;     // keep whitespace inside character n-grams
  bool eps_smoothing = false;  // chrF++.py-style smoothing instead of effective order
};

struct ChrfResult {
  double score = 0;              // 0..100
  std::vector<int64_t> stats{};  // [3 * (char_order + word_order)]: hyp, ref, match per order,
                                 // character orders first, then word orders
  int nrefs = 0;                 // references per segment; -1 when it varies ("var")
  ChrfOptions options{};

  std::string name() const;  // "chrF2", "chrF2++" (one '+' per word order), "chrF3", ...
  // "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:atto" (sacreBLEU's field order).
  std::string signature() const;
  // "chrF2 = 59.73"; with_signature gives "chrF2|nrefs:2|... = 59.73".
  std::string format(int width = 2, bool with_signature = false) const;
};

// hyps[i] is scored against refs[k][i] for every reference stream k.
ChrfResult corpus_chrf(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs,
                       const ChrfOptions& opts = {});

// The score (0..100) of summed statistics laid out as ChrfResult::stats.
double chrf_score(const std::vector<int64_t>& stats, const ChrfOptions& opts);

}  // namespace atto::metrics
