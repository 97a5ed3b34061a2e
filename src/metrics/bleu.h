// atto/metrics/bleu.h: corpus BLEU exactly as sacreBLEU 2.x computes it.
//
//   std::vector<std::string> hyps = {"The dog bit the man.", "It wasn't surprising.",
//                                    "The man had just bitten him."};
//   std::vector<std::vector<std::string>> refs = {   // refs[k][i]: stream k, sentence i
//       {"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
//       {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."}};
//   atto::metrics::BleuResult r = atto::metrics::corpus_bleu(hyps, refs);
//   r.score;        // 48.530827... (sacreBLEU's README example, 13a tokenization)
//   r.format();     // "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)"
//   r.signature();  // "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:atto"
//
// What is computed (sacrebleu/metrics/bleu.py, helpers.py, base.py; see docs/metrics.md):
// - Each segment is lowercased (if asked), right-stripped and tokenized ("13a", see
//   tokenizer_13a.h, or "none": as is), then split on whitespace into words.
// - Per segment: hypothesis n-gram counts (n = 1..max_order) clipped by the maximum count of
//   that n-gram over the segment's references; hyp length; the reference length closest to
//   the hyp length (ties: the shorter). Summed over the corpus: counts[n], totals[n],
//   sys_len, ref_len.
// - BP = 1 if sys_len >= ref_len, else exp(1 - ref_len / sys_len) (0 if sys_len is 0).
//   precision[n] = 100 * counts[n] / totals[n]; score = BP * exp(mean_n log precision[n]),
//   with log(0) taken as -9999999999 (so any zero precision gives 0), and 0 when no n-gram
//   matches at all.
// - Smoothing "exp" (default, mteval-v13a): the k-th order with 0 matches gets precision
//   100 / (2^k * totals[n]). "floor": 100 * value / totals[n] (value 0.1 by default).
//   "add-k": counts and totals of orders n >= 2 get + value (1 by default). "none": nothing.
// - An empty reference ("") means "no reference in this stream for this segment": it is left
//   out; nrefs in the signature is then "var" if segments have different numbers of
//   references. Empty hypotheses count (they score nothing).
// - Scores are on a 0-100 scale, in double precision, with the same operation order as
//   sacreBLEU, so they agree with it to the last printed digit.
// Errors (atto::Error): no reference stream, streams of different lengths, a segment whose
// references are all empty, invalid UTF-8 (naming the stream and line), unknown options.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "metrics/corpus.h"  // kSignatureVersion

namespace atto::metrics {

struct BleuOptions {
  std::string tokenize = "13a";          // "13a" (mteval-v13a) or "none" (split on whitespace)
  bool lowercase = false;                // case-insensitive BLEU
  std::string smooth = "exp";            // "exp", "floor", "add-k" or "none"
  std::optional<double> smooth_value{};  // floor / add-k value; unset: 0.1 / 1
  int max_order = 4;                     // n-gram orders 1..max_order
  bool effective_order = false;          // stop at the first order with no n-grams (sentence BLEU)
};

struct BleuResult {
  double score = 0;                  // 0..100
  std::vector<int64_t> counts{};     // [max_order] clipped n-gram matches
  std::vector<int64_t> totals{};     // [max_order] hypothesis n-grams
  std::vector<double> precisions{};  // [max_order] percentages
  double bp = 0;                     // brevity penalty
  int64_t sys_len = 0, ref_len = 0;  // words
  int nrefs = 0;                     // references per segment; -1 when it varies ("var")
  BleuOptions options{};

  // "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:atto" (sacreBLEU's field order;
  // floor and add-k show their value: "smooth:floor[0.10]").
  std::string signature() const;
  // sacreBLEU's text line: "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944
  // hyp_len = 17 ref_len = 18)"; with_signature gives "BLEU|nrefs:2|... = 48.53 ...".
  std::string format(int width = 2, bool with_signature = false) const;
};

// hyps[i] is scored against refs[k][i] for every reference stream k.
BleuResult corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs,
                       const BleuOptions& opts = {});

// BLEU from sufficient statistics (sacreBLEU's BLEU.compute_bleu): counts and totals have
// opts.max_order entries. nrefs of the result is 0 (unknown).
BleuResult compute_bleu(const std::vector<int64_t>& counts, const std::vector<int64_t>& totals, int64_t sys_len,
                        int64_t ref_len, const BleuOptions& opts = {});

}  // namespace atto::metrics
