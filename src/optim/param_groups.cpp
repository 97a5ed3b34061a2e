#include "optim/param_groups.h"

namespace atto::optim {

NamedParameters unique_parameters(const NamedParameters& params) {
  NamedParameters out;
  out.reserve(params.size());
  for (const NamedParameter& p : params) {
    bool seen = false;
    for (const NamedParameter& q : out) seen = seen || q.tensor.same(p.tensor);
    if (!seen) out.push_back(p);
  }
  return out;
}

std::vector<ParamGroup> default_param_groups(const NamedParameters& params, float weight_decay) {
  std::vector<ParamGroup> groups(2);
  groups[0].weight_decay = weight_decay;
  groups[1].weight_decay = 0.0f;
  for (const NamedParameter& p : unique_parameters(params))
    groups[p.kind == ParamKind::Weight ? 0 : 1].params.push_back(p);
  return groups;
}

std::vector<ParamGroup> single_param_group(const NamedParameters& params, float weight_decay) {
  std::vector<ParamGroup> groups(1);
  groups[0].weight_decay = weight_decay;
  groups[0].params = unique_parameters(params);
  return groups;
}

}  // namespace atto::optim
