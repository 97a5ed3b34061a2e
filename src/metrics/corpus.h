// atto/metrics/corpus.h: checks and reshapes the (hypotheses, reference streams) input that
// corpus_bleu() and corpus_chrf() share, as sacreBLEU's Metric base class does.
//
//   auto refs = atto::metrics::detail::gather_references(hyps, streams, "BLEU");
//   refs.per_segment[i];   // the non-empty references of hypothesis i, in stream order
//   refs.nrefs;            // references per segment, or -1 when it varies ("var")
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace atto::metrics {

// The "version" field of the signatures atto emits. The fields before it follow sacreBLEU
// 2.x's format; "atto" says the numbers come from atto's implementation of sacreBLEU 2.x.
inline constexpr const char* kSignatureVersion = "atto";

}  // namespace atto::metrics

namespace atto::metrics::detail {

struct References {
  std::vector<std::vector<std::string_view>> per_segment;  // views into the input streams
  int nrefs = 0;
};

// Throws atto::Error when there is no stream, a stream's length differs from the number of
// hypotheses, a segment has only empty references, or any text is not valid UTF-8 (the
// message names the metric, the stream and the 1-based line).
References gather_references(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& streams,
                             const char* metric);

// "1", "2", ... or "var" for nrefs == -1.
std::string nrefs_field(int nrefs);

}  // namespace atto::metrics::detail
