#include "metrics/bleu.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "base/error.h"
#include "metrics/corpus.h"
#include "metrics/text_ops.h"
#include "metrics/tokenizer_13a.h"

namespace atto::metrics {

namespace {

// n-gram (words joined by single spaces; words hold no whitespace, so this is unambiguous)
// -> count, one map per order.
using NgramCounts = std::vector<std::unordered_map<std::string, int64_t>>;

void check_bleu_options(const BleuOptions& o) {
  ATTO_CHECK(o.tokenize == "13a" || o.tokenize == "none",
             "BLEU: unknown tokenizer '{}'; use 13a (sacreBLEU's default) or none", o.tokenize);
  ATTO_CHECK(o.smooth == "exp" || o.smooth == "floor" || o.smooth == "add-k" || o.smooth == "none",
             "BLEU: unknown smoothing '{}'; use exp, floor, add-k or none", o.smooth);
  ATTO_CHECK(o.max_order >= 1, "BLEU: max_order must be at least 1, got {}", o.max_order);
  ATTO_CHECK(!o.smooth_value || (o.smooth != "exp" && o.smooth != "none"),
             "BLEU: smoothing '{}' takes no value (got {})", o.smooth, o.smooth_value.value_or(0));
}

double smooth_value(const BleuOptions& o) {
  if (o.smooth_value) return *o.smooth_value;
  return o.smooth == "floor" ? 0.1 : o.smooth == "add-k" ? 1.0 : 0.0;
}

// sacreBLEU's _preprocess_segment: lowercase, rstrip, tokenize.
std::string bleu_preprocess(std::string_view sent, const BleuOptions& o) {
  std::string s = o.lowercase ? text::lower(sent) : std::string(sent);
  std::string_view stripped = text::rstrip(s);
  return o.tokenize == "13a" ? tokenize_13a(stripped) : std::string(stripped);
}

// All n-grams of orders 1..max_order of a preprocessed segment, and its length in words.
NgramCounts bleu_ngrams(std::string_view line, int max_order, int64_t& length) {
  const std::vector<std::string_view> words = text::split(line);
  length = static_cast<int64_t>(words.size());
  NgramCounts c(static_cast<size_t>(max_order));
  for (size_t n = 1; n <= static_cast<size_t>(max_order); ++n) {
    for (size_t i = 0; i + n <= words.size(); ++i) {
      std::string key(words[i]);
      for (size_t j = i + 1; j < i + n; ++j) (key += ' ') += words[j];
      ++c[n - 1][key];
    }
  }
  return c;
}

// sacreBLEU's _get_closest_ref_len: the closest length, the shorter one on ties.
int64_t closest_ref_len(int64_t hyp_len, const std::vector<int64_t>& ref_lens) {
  int64_t best_diff = -1, best = -1;
  for (int64_t len : ref_lens) {
    const int64_t diff = std::abs(hyp_len - len);
    if (best_diff == -1 || diff < best_diff) {
      best_diff = diff;
      best = len;
    } else if (diff == best_diff && len < best) {
      best = len;
    }
  }
  return best;
}

struct Stats {
  std::vector<int64_t> counts, totals;
  int64_t sys_len = 0, ref_len = 0;
};

void add_segment(Stats& s, std::string_view hyp, const std::vector<std::string_view>& refs, const BleuOptions& o) {
  NgramCounts ref_max(static_cast<size_t>(o.max_order));
  std::vector<int64_t> ref_lens;
  for (std::string_view ref : refs) {
    int64_t len = 0;
    NgramCounts c = bleu_ngrams(bleu_preprocess(ref, o), o.max_order, len);
    ref_lens.push_back(len);
    for (size_t n = 0; n < c.size(); ++n) {
      for (auto& [gram, count] : c[n]) {
        int64_t& m = ref_max[n][gram];
        m = std::max(m, count);
      }
    }
  }
  int64_t hyp_len = 0;
  const NgramCounts h = bleu_ngrams(bleu_preprocess(hyp, o), o.max_order, hyp_len);
  for (size_t n = 0; n < h.size(); ++n) {
    for (const auto& [gram, count] : h[n]) {
      s.totals[n] += count;
      auto it = ref_max[n].find(gram);
      if (it != ref_max[n].end()) s.counts[n] += std::min(count, it->second);
    }
  }
  s.sys_len += hyp_len;
  s.ref_len += closest_ref_len(hyp_len, ref_lens);
}

// sacreBLEU's my_log: log(0) is -9999999999.
double floored_log(double x) { return x == 0.0 ? -9999999999.0 : std::log(x); }

}  // namespace

BleuResult compute_bleu(const std::vector<int64_t>& counts, const std::vector<int64_t>& totals, int64_t sys_len,
                        int64_t ref_len, const BleuOptions& opts) {
  check_bleu_options(opts);
  const auto N = static_cast<size_t>(opts.max_order);
  ATTO_CHECK(counts.size() == N && totals.size() == N,
             "BLEU: statistics need {} counts and "
             "totals (max_order), got {} and {}",
             N, counts.size(), totals.size());
  BleuResult r;
  r.counts = counts;
  r.totals = totals;
  r.sys_len = sys_len;
  r.ref_len = ref_len;
  r.options = opts;
  r.precisions.assign(N, 0.0);
  if (sys_len < ref_len) {
    r.bp = sys_len > 0 ? std::exp(1.0 - static_cast<double>(ref_len) / static_cast<double>(sys_len)) : 0.0;
  } else {
    r.bp = 1.0;
  }
  if (std::all_of(counts.begin(), counts.end(), [](int64_t c) { return c == 0; })) return r;

  const double value = smooth_value(opts);
  double smooth_mteval = 1.0;
  size_t eff_order = N;
  for (size_t n = 1; n <= N; ++n) {
    auto correct = static_cast<double>(counts[n - 1]);
    auto total = static_cast<double>(totals[n - 1]);
    if (opts.smooth == "add-k" && n > 1) {
      correct += value;
      total += value;
    }
    if (total == 0) break;
    if (opts.effective_order) eff_order = n;
    double& p = r.precisions[n - 1];
    if (correct == 0) {
      if (opts.smooth == "exp") {
        smooth_mteval *= 2;
        p = 100.0 / (smooth_mteval * total);
      } else if (opts.smooth == "floor") {
        p = 100.0 * value / total;
      }
    } else {
      p = 100.0 * correct / total;
    }
  }
  double sum = 0;
  for (size_t n = 0; n < eff_order; ++n) sum += floored_log(r.precisions[n]);
  r.score = r.bp * std::exp(sum / static_cast<double>(eff_order));
  return r;
}

BleuResult corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs,
                       const BleuOptions& opts) {
  check_bleu_options(opts);
  const detail::References segs = detail::gather_references(hyps, refs, "BLEU");
  Stats s;
  s.counts.assign(static_cast<size_t>(opts.max_order), 0);
  s.totals.assign(static_cast<size_t>(opts.max_order), 0);
  for (size_t i = 0; i < hyps.size(); ++i) add_segment(s, hyps[i], segs.per_segment[i], opts);
  BleuResult r = compute_bleu(s.counts, s.totals, s.sys_len, s.ref_len, opts);
  r.nrefs = segs.nrefs;
  return r;
}

std::string BleuResult::signature() const {
  std::string smooth = options.smooth;
  if (smooth == "floor" || smooth == "add-k") {
    smooth += fmt::format("[{:.2f}]", smooth_value(options));
  }
  return fmt::format("nrefs:{}|case:{}|eff:{}|tok:{}|smooth:{}|version:{}", detail::nrefs_field(nrefs),
                     options.lowercase ? "lc" : "mixed", options.effective_order ? "yes" : "no", options.tokenize,
                     smooth, kSignatureVersion);
}

std::string BleuResult::format(int width, bool with_signature) const {
  std::string prec;
  for (size_t n = 0; n < precisions.size(); ++n) {
    prec += fmt::format("{}{:.1f}", n ? "/" : "", precisions[n]);
  }
  const double ratio = ref_len ? static_cast<double>(sys_len) / static_cast<double>(ref_len) : 0.0;
  const std::string name = with_signature ? "BLEU|" + signature() : "BLEU";
  return fmt::format("{} = {:.{}f} {} (BP = {:.3f} ratio = {:.3f} hyp_len = {} ref_len = {})", name, score, width, prec,
                     bp, ratio, sys_len, ref_len);
}

}  // namespace atto::metrics
