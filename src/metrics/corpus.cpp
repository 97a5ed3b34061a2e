#include "metrics/corpus.h"

#include <set>

#include "base/error.h"
#include "tokenize/utf8.h"

namespace atto::metrics::detail {

References gather_references(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& streams,
                             const char* metric) {
  ATTO_CHECK(!streams.empty(),
             "{}: no reference stream given; pass at least one list of "
             "references, one per hypothesis",
             metric);
  for (size_t k = 0; k < streams.size(); ++k) {
    ATTO_CHECK(streams[k].size() == hyps.size(),
               "{}: reference stream {} has {} sentences but "
               "there are {} hypotheses; every stream needs one reference per hypothesis",
               metric, k + 1, streams[k].size(), hyps.size());
  }
  for (size_t i = 0; i < hyps.size(); ++i) {
    utf8::validate(hyps[i], fmt::format("{}: hypothesis {}", metric, i + 1));
  }
  References r;
  r.per_segment.resize(hyps.size());
  std::set<size_t> counts;
  for (size_t i = 0; i < hyps.size(); ++i) {
    for (size_t k = 0; k < streams.size(); ++k) {
      const std::string& ref = streams[k][i];
      if (ref.empty()) continue;  // sacreBLEU: no reference in this stream for this segment
      utf8::validate(ref, fmt::format("{}: reference stream {}, sentence {}", metric, k + 1, i + 1));
      r.per_segment[i].push_back(ref);
    }
    ATTO_CHECK(!r.per_segment[i].empty(),
               "{}: sentence {} has only empty references ({} "
               "stream(s)); every hypothesis needs at least one non-empty reference",
               metric, i + 1, streams.size());
    counts.insert(r.per_segment[i].size());
  }
  if (counts.size() == 1) {
    r.nrefs = static_cast<int>(*counts.begin());
  } else {
    r.nrefs = counts.empty() ? static_cast<int>(streams.size()) : -1;
  }
  return r;
}

std::string nrefs_field(int nrefs) { return nrefs < 0 ? "var" : std::to_string(nrefs); }

}  // namespace atto::metrics::detail
