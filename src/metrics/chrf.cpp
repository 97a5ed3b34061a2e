#include "metrics/chrf.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "base/error.h"
#include "metrics/corpus.h"
#include "metrics/text_ops.h"

namespace atto::metrics {

namespace {

using Counter = std::unordered_map<std::string, int64_t>;

void check_options(const ChrfOptions& o) {
  ATTO_CHECK(o.char_order >= 0 && o.word_order >= 0 && o.char_order + o.word_order >= 1,
             "chrF: char_order ({}) and word_order ({}) must be >= 0 and not both 0", o.char_order, o.word_order);
  ATTO_CHECK(o.beta >= 0, "chrF: beta must be >= 0, got {}", o.beta);
}

bool is_ascii_punct(std::string_view ch) {  // Python's string.punctuation
  static constexpr std::string_view kPuncts = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
  return ch.size() == 1 && kPuncts.find(ch[0]) != std::string_view::npos;
}

// sacreBLEU's CHRF._remove_punctuation.
std::vector<std::string> split_words(std::string_view sent) {
  std::vector<std::string> out;
  for (std::string_view w : text::split(sent)) {
    const std::vector<size_t> b = text::code_point_offsets(w);
    const size_t n = b.size() - 1;  // code points
    if (n == 1) {
      out.emplace_back(w);
    } else if (is_ascii_punct(w.substr(b[n - 1]))) {
      out.emplace_back(w.substr(0, b[n - 1]));
      out.emplace_back(w.substr(b[n - 1]));
    } else if (is_ascii_punct(w.substr(0, b[1]))) {
      out.emplace_back(w.substr(0, b[1]));
      out.emplace_back(w.substr(b[1]));
    } else {
      out.emplace_back(w);
    }
  }
  return out;
}

// Counters for character orders 1..char_order, then word orders 1..word_order.
std::vector<Counter> extract_ngrams(std::string_view segment, const ChrfOptions& o) {
  std::vector<Counter> all;
  const std::string chars = o.whitespace ? std::string(segment) : text::remove_whitespace(segment);
  const std::vector<size_t> b = text::code_point_offsets(chars);
  const size_t len = b.size() - 1;
  for (size_t n = 1; n <= static_cast<size_t>(o.char_order); ++n) {
    Counter& c = all.emplace_back();
    for (size_t i = 0; i + n <= len; ++i) ++c[chars.substr(b[i], b[i + n] - b[i])];
  }
  if (o.word_order > 0) {
    const std::vector<std::string> words = split_words(segment);
    for (size_t n = 1; n <= static_cast<size_t>(o.word_order); ++n) {
      Counter& c = all.emplace_back();
      for (size_t i = 0; i + n <= words.size(); ++i) {
        std::string key = words[i];
        for (size_t j = i + 1; j < i + n; ++j) (key += ' ') += words[j];
        ++c[key];
      }
    }
  }
  return all;
}

// sacreBLEU's CHRF._get_match_statistics, appended to `stats`.
void match_statistics(const Counter& hyp, const Counter& ref, std::vector<int64_t>& stats) {
  int64_t hyp_count = 0, match = 0, ref_count = 0;
  for (const auto& [gram, count] : hyp) {
    hyp_count += count;
    auto it = ref.find(gram);
    if (it != ref.end()) match += std::min(count, it->second);
  }
  for (const auto& [gram, count] : ref) ref_count += count;
  stats.push_back(ref.empty() ? 0 : hyp_count);
  stats.push_back(ref_count);
  stats.push_back(match);
}

// a * b rounded to a double on its own. GCC fuses a * b + c into one FMA by default in C++
// (-ffp-contract=fast), which changes the last bits against Python's separate roundings when
// beta^2 * P is inexact (beta = 3); the volatile keeps the two operations apart.
double product(double a, double b) {
  volatile double p = a * b;
  return p;
}

std::string preprocess(std::string_view s, const ChrfOptions& o) {
  return o.lowercase ? text::lower(s) : std::string(s);
}

}  // namespace

double chrf_score(const std::vector<int64_t>& stats, const ChrfOptions& o) {
  const size_t order = static_cast<size_t>(o.char_order + o.word_order);
  ATTO_CHECK(stats.size() == 3 * order, "chrF: statistics need 3 * {} entries, got {}", order, stats.size());
  constexpr double eps = 1e-16;
  const double factor = static_cast<double>(o.beta) * o.beta;
  double score = 0, avg_prec = 0, avg_rec = 0;
  int effective_order = 0;
  for (size_t i = 0; i < order; ++i) {
    const auto n_hyp = static_cast<double>(stats[3 * i]);
    const auto n_ref = static_cast<double>(stats[3 * i + 1]);
    const auto n_match = static_cast<double>(stats[3 * i + 2]);
    const double prec = n_hyp > 0 ? n_match / n_hyp : eps;
    const double rec = n_ref > 0 ? n_match / n_ref : eps;
    const double denom = product(factor, prec) + rec;
    score += denom > 0 ? (1 + factor) * prec * rec / denom : eps;
    if (n_hyp > 0 && n_ref > 0) {
      avg_prec += prec;
      avg_rec += rec;
      ++effective_order;
    }
  }
  if (o.eps_smoothing) return 100 * score / static_cast<double>(order);
  if (effective_order == 0) return 0.0;
  avg_prec /= effective_order;
  avg_rec /= effective_order;
  if (avg_prec + avg_rec == 0) return 0.0;
  double f = (1 + factor) * avg_prec * avg_rec;
  f /= product(factor, avg_prec) + avg_rec;
  return 100 * f;
}

ChrfResult corpus_chrf(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs,
                       const ChrfOptions& opts) {
  check_options(opts);
  const detail::References segs = detail::gather_references(hyps, refs, "chrF");
  const size_t order = static_cast<size_t>(opts.char_order + opts.word_order);
  ChrfResult r;
  r.options = opts;
  r.nrefs = segs.nrefs;
  r.stats.assign(3 * order, 0);
  for (size_t i = 0; i < hyps.size(); ++i) {
    const std::vector<Counter> h = extract_ngrams(preprocess(hyps[i], opts), opts);
    std::vector<int64_t> best;
    double best_f = -1.0;
    for (std::string_view ref : segs.per_segment[i]) {
      const std::vector<Counter> rc = extract_ngrams(preprocess(ref, opts), opts);
      std::vector<int64_t> stats;
      stats.reserve(3 * order);
      for (size_t n = 0; n < order; ++n) match_statistics(h[n], rc[n], stats);
      const double f = chrf_score(stats, opts);
      if (f > best_f) {
        best_f = f;
        best = std::move(stats);
      }
    }
    for (size_t j = 0; j < best.size(); ++j) r.stats[j] += best[j];
  }
  r.score = chrf_score(r.stats, opts);
  return r;
}

std::string ChrfResult::name() const {
  return fmt::format("chrF{}{}", options.beta, std::string(static_cast<size_t>(options.word_order), '+'));
}

std::string ChrfResult::signature() const {
  return fmt::format("nrefs:{}|case:{}|eff:{}|nc:{}|nw:{}|space:{}|version:{}", detail::nrefs_field(nrefs),
                     options.lowercase ? "lc" : "mixed", options.eps_smoothing ? "no" : "yes", options.char_order,
                     options.word_order, options.whitespace ? "yes" : "no", kSignatureVersion);
}

std::string ChrfResult::format(int width, bool with_signature) const {
  const std::string label = with_signature ? name() + "|" + signature() : name();
  return fmt::format("{} = {:.{}f}", label, score, width);
}

}  // namespace atto::metrics
