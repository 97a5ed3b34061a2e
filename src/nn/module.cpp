#include "nn/module.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace atto::nn {

void Module::register_parameter(const std::string& name, Tensor& t, ParamKind kind) {
  ATTO_CHECK(t.defined(), "register_parameter: '{}' is undefined", name);
  t.set_requires_grad(true);
  params_.push_back(Param{name, &t, kind});
}

void Module::register_module(const std::string& name, Module& m) { children_.emplace_back(name, &m); }

void Module::collect(const std::string& prefix, std::vector<std::tuple<std::string, Tensor*, ParamKind>>& out) const {
  for (const Param& p : params_) out.emplace_back(prefix + p.name, p.tensor, p.kind);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

NamedParameters Module::named_parameters() const {
  std::vector<std::tuple<std::string, Tensor*, ParamKind>> all;
  collect("", all);
  NamedParameters out;
  for (auto& [name, t, kind] : all) {
    bool seen = false;
    for (const auto& p : out) seen = seen || p.tensor.same(*t);
    if (!seen) out.push_back(NamedParameter{name, *t, kind});
  }
  return out;
}

NamedParameters Module::trainable_parameters() const {
  NamedParameters out = named_parameters();
  std::erase_if(out, [](const NamedParameter& p) { return !p.tensor.requires_grad(); });
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::state_dict(Which which) const {
  std::vector<std::tuple<std::string, Tensor*, ParamKind>> all;
  collect("", all);
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [name, t, kind] : all)
    if (which == Which::All || t->requires_grad() == (which == Which::Trainable)) out.emplace_back(name, *t);
  return out;
}

void Module::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& tensors, const std::string& source,
                             Which which) {
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : tensors) by_name[name] = &t;
  const auto own = state_dict(which);
  for (const auto& [name, t] : tensors) {
    bool known = false;
    for (const auto& o : own) known = known || o.first == name;
    ATTO_CHECK(known, "{}: unexpected tensor '{}' (shape {}) that the model does not have", source, name,
               shape_str(t.shape()));
  }
  for (auto& [name, t] : own) {
    auto it = by_name.find(name);
    ATTO_CHECK(it != by_name.end(), "{}: tensor '{}' is missing (expected shape {})", source, name,
               shape_str(t.shape()));
    ATTO_CHECK(it->second->shape() == t.shape(), "{}: tensor '{}' has shape {}, but the model expects {}", source, name,
               shape_str(it->second->shape()), shape_str(t.shape()));
    Tensor dst = t;
    if (it->second->quantized())
      dst.adopt_quantized(*it->second);  // the parameter becomes the quantized rows (inference)
    else
      dst.copy_from(*it->second);
  }
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : named_parameters()) n += p.tensor.numel();
  return n;
}

int64_t Module::num_trainable_parameters() const {
  int64_t n = 0;
  for (const auto& p : trainable_parameters()) n += p.tensor.numel();
  return n;
}

void Module::train(bool on) {
  // Written only when it changes: generation's eval() on a loaded model (already in eval mode)
  // then only reads, so contexts on other threads may run the same model at once.
  if (training_ != on) training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::set_rng(Rng* rng, int64_t first_row) {
  ATTO_CHECK(first_row >= 0, "set_rng: first_row = {} must be >= 0", first_row);
  rng_ = rng;
  first_row_ = first_row;
  for (auto& [name, child] : children_) child->set_rng(rng, first_row);
}

void Module::alias_parameters(const Module& src) {
  std::vector<std::tuple<std::string, Tensor*, ParamKind>> mine, theirs;
  collect("", mine);
  src.collect("", theirs);
  ATTO_CHECK(mine.size() == theirs.size(), "alias_parameters: this module has {} parameters, the source {}",
             mine.size(), theirs.size());
  std::vector<std::pair<Tensor, Tensor>> made;  // (source tensor, its alias): ties map to one alias
  for (size_t i = 0; i < mine.size(); ++i) {
    const auto& [name, dst, kind] = mine[i];
    const auto& [src_name, src_t, src_kind] = theirs[i];
    ATTO_CHECK(name == src_name && dst->shape() == src_t->shape(),
               "alias_parameters: parameter {} is '{}' {} here but '{}' {} in the source", i, name,
               shape_str(dst->shape()), src_name, shape_str(src_t->shape()));
    const Tensor& source = *src_t;  // a structured binding is not captured by clang 14's lambdas
    auto it = std::find_if(made.begin(), made.end(), [&](const auto& m) { return m.first.same(source); });
    if (it == made.end()) {
      Tensor alias = src_t->detach();
      alias.set_requires_grad(src_t->requires_grad());  // frozen stays frozen
      made.emplace_back(*src_t, alias);
      it = made.end() - 1;
    }
    *dst = it->second;
  }
}

void Module::zero_grad() {
  for (auto& p : named_parameters()) p.tensor.zero_grad();
}

}  // namespace atto::nn
