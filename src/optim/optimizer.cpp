#include "optim/optimizer.h"

#include <cmath>
#include <map>
#include <set>

#include "base/error.h"
#include "kernels/kernels.h"

namespace atto::optim {

namespace {

constexpr int64_t kCountBase = int64_t{1} << 24;  // float32 holds every integer below 2^24

void check_group(const ParamGroup& g, size_t gi) {
  ATTO_CHECK(std::isfinite(g.weight_decay) && g.weight_decay >= 0.0f,
             "optimizer: parameter group {} has weight_decay {}; it must be finite and >= 0", gi, g.weight_decay);
  ATTO_CHECK(std::isfinite(g.lr_scale) && g.lr_scale >= 0.0f,
             "optimizer: parameter group {} has lr_scale {}; it must be finite and >= 0", gi, g.lr_scale);
}

// Every parameter defined, contiguous, uniquely named, and in only one place.
void check_params(const std::vector<ParamGroup>& groups) {
  std::vector<const NamedParameter*> all;
  std::set<std::string> names;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    check_group(groups[gi], gi);
    for (const NamedParameter& p : groups[gi].params) {
      ATTO_CHECK(p.tensor.defined(), "optimizer: parameter '{}' is an undefined tensor", p.name);
      ATTO_CHECK(p.tensor.is_contiguous(), "optimizer: parameter '{}' {} is not contiguous; pass contiguous parameters",
                 p.name, shape_str(p.tensor.shape()));
      ATTO_CHECK(!p.name.empty(),
                 "optimizer: a parameter {} has an empty name (names key the "
                 "state dict)",
                 shape_str(p.tensor.shape()));
      ATTO_CHECK(names.insert(p.name).second, "optimizer: two parameters are named '{}'; names must be unique", p.name);
      for (const NamedParameter* q : all)
        ATTO_CHECK(!q->tensor.same(p.tensor),
                   "optimizer: parameters '{}' and '{}' are the same tensor (tied); list it "
                   "once (default_param_groups and unique_parameters do)",
                   q->name, p.name);
      all.push_back(&p);
    }
  }
}

}  // namespace

const char* to_string(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::AdamW: return "adamw";
    case OptimizerKind::Adam: return "adam";
    case OptimizerKind::SGD: return "sgd";
  }
  return "?";
}

OptimizerKind optimizer_kind_from_string(std::string_view name) {
  for (OptimizerKind k : {OptimizerKind::AdamW, OptimizerKind::Adam, OptimizerKind::SGD})
    if (name == to_string(k)) return k;
  fail("--optimizer must be adamw, adam or sgd, got '{}'", name);
}

Tensor encode_count(int64_t count) {
  ATTO_CHECK(count >= 0 && count < kCountBase * kCountBase, "step count {} out of range", count);
  return Tensor::from_vector({2}, {static_cast<float>(count / kCountBase), static_cast<float>(count % kCountBase)});
}

int64_t decode_count(const Tensor& t, const std::string& what) {
  ATTO_CHECK(t.defined() && t.shape() == Shape{2}, "state '{}': a step count must be a tensor of shape [2], got {}",
             what, t.defined() ? shape_str(t.shape()) : "an undefined tensor");
  const std::vector<float> v = t.to_vector();
  for (float x : v)
    ATTO_CHECK(std::isfinite(x) && x >= 0.0f && x < static_cast<float>(kCountBase) && x == std::floor(x),
               "state '{}': step count part {} is not an integer in [0, 2^24)", what, x);
  return static_cast<int64_t>(v[0]) * kCountBase + static_cast<int64_t>(v[1]);
}

// ============================================================================================
// Optimizer
// ============================================================================================
Optimizer::Optimizer(std::vector<ParamGroup> groups, std::vector<std::string> slot_names)
    : groups_(std::move(groups)), slot_names_(std::move(slot_names)) {
  check_params(groups_);
  state_.resize(groups_.size());
  for (size_t gi = 0; gi < groups_.size(); ++gi) state_[gi].resize(groups_[gi].params.size());
}

void Optimizer::step(float lr, const Updated& updated) {
  ATTO_CHECK(std::isfinite(lr) && lr >= 0.0f, "optimizer step: learning rate {} must be finite and >= 0", lr);
  updates_.clear();
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    ParamGroup& group = groups_[gi];
    const float group_lr = lr * group.lr_scale;
    for (size_t pi = 0; pi < group.params.size(); ++pi) {
      NamedParameter& p = group.params[pi];
      const Tensor grad = p.tensor.grad();
      if (!grad.defined()) continue;  // no gradient this step: skip, as PyTorch does
      ATTO_CHECK(grad.shape() == p.tensor.shape() && grad.is_contiguous(),
                 "optimizer step: gradient of '{}' is {}{}; expected a contiguous {}", p.name, shape_str(grad.shape()),
                 grad.is_contiguous() ? "" : " (not contiguous)", shape_str(p.tensor.shape()));
      ParamState& st = state_[gi][pi];
      if (st.slots.empty())
        for (size_t s = 0; s < slot_names_.size(); ++s) st.slots.push_back(Tensor::zeros(p.tensor.shape()));
      st.step += 1;
      updates_.push_back({&group, &st, p.tensor, grad, group_lr});
    }
  }
  apply(updates_, updated);
  updates_.clear();  // drop the references to this step's gradients
  steps_ += 1;
}

void step_and_refresh(Optimizer& opt, float lr, kernels::Bf16WeightCache& cache) {
  if (cache.empty()) {  // fp32: nothing to pack, one pass over all parameters
    opt.step(lr);
    return;
  }
  opt.step(lr, [&](const float* w, int64_t n) { cache.refresh(w, n); });
}

void Optimizer::zero_grad(bool set_to_none) {
  for (ParamGroup& g : groups_)
    for (NamedParameter& p : g.params) {
      if (set_to_none)
        p.tensor.clear_grad();
      else
        p.tensor.zero_grad();
    }
}

StateDict Optimizer::state_dict() const {
  StateDict out;
  out.emplace_back("step", encode_count(steps_));
  for (size_t gi = 0; gi < groups_.size(); ++gi)
    for (size_t pi = 0; pi < groups_[gi].params.size(); ++pi) {
      const ParamState& st = state_[gi][pi];
      if (st.step == 0) continue;
      const std::string& name = groups_[gi].params[pi].name;
      out.emplace_back(name + ".step", encode_count(st.step));
      for (size_t s = 0; s < slot_names_.size(); ++s)
        out.emplace_back(name + "." + slot_names_[s], st.slots[s].clone());
    }
  return out;
}

namespace {

using StateMap = std::map<std::string, Tensor>;

// Throws, listing them, if `byname` holds names that are not states of these parameters.
void check_known_names(const StateMap& byname, const std::vector<ParamGroup>& groups,
                       const std::vector<std::string>& slot_names) {
  std::set<std::string> known = {"step"};
  for (const ParamGroup& g : groups)
    for (const NamedParameter& p : g.params) {
      known.insert(p.name + ".step");
      for (const std::string& slot : slot_names) known.insert(p.name + "." + slot);
    }
  std::vector<std::string> unknown;
  for (const auto& kv : byname)
    if (!known.count(kv.first)) unknown.push_back(kv.first);
  ATTO_CHECK(unknown.empty(),
             "optimizer state: {} unknown entries ({}); it was saved by a different optimizer "
             "or model (per-parameter state here: step{}{})",
             unknown.size(), fmt::join(unknown, ", "), slot_names.empty() ? "" : ", ", fmt::join(slot_names, ", "));
}

Tensor find_state(const StateMap& byname, const std::string& key) {
  auto it = byname.find(key);
  return it == byname.end() ? Tensor() : it->second;
}

}  // namespace

// One parameter's state from `byname` (empty if it has none), validated.
Optimizer::ParamState Optimizer::load_param_state(const StateMap& byname, const NamedParameter& p) const {
  ParamState st;
  const Tensor count = find_state(byname, p.name + ".step");
  for (const std::string& slot : slot_names_) {
    const std::string key = p.name + "." + slot;
    const Tensor t = find_state(byname, key);
    ATTO_CHECK(t.defined() == count.defined(), "optimizer state: '{}' is {} but '{}' is {}", p.name + ".step",
               count.defined() ? "present" : "missing", key, t.defined() ? "present" : "missing");
    if (!t.defined()) continue;
    ATTO_CHECK(t.shape() == p.tensor.shape(), "optimizer state: '{}' has shape {} but parameter '{}' is {}", key,
               shape_str(t.shape()), p.name, shape_str(p.tensor.shape()));
    st.slots.push_back(t.clone());
  }
  if (count.defined()) st.step = decode_count(count, p.name + ".step");
  ATTO_CHECK(!count.defined() || st.step > 0, "optimizer state: '{}.step' is 0 but the entry exists", p.name);
  return st;
}

void Optimizer::load_state_dict(const StateDict& state) {
  StateMap byname;
  for (const auto& [name, t] : state)
    ATTO_CHECK(byname.emplace(name, t).second, "optimizer state: entry '{}' appears twice", name);
  // Unknown names first: the likeliest mistake is a state from another optimizer or model.
  check_known_names(byname, groups_, slot_names_);
  const Tensor global = find_state(byname, "step");
  ATTO_CHECK(global.defined(), "optimizer state: no 'step' entry; is this an optimizer state?");
  const int64_t steps = decode_count(global, "step");
  // Build the new state completely before touching ours, so a failure changes nothing.
  std::vector<std::vector<ParamState>> fresh(groups_.size());
  for (size_t gi = 0; gi < groups_.size(); ++gi)
    for (const NamedParameter& p : groups_[gi].params) fresh[gi].push_back(load_param_state(byname, p));
  state_ = std::move(fresh);
  steps_ = steps;
}

// ============================================================================================
// SGD
// ============================================================================================
namespace {
std::vector<std::string> sgd_slots(const SgdOptions& o) {
  ATTO_CHECK(std::isfinite(o.momentum) && o.momentum >= 0.0f && o.momentum < 1.0f, "SGD: momentum {} must be in [0, 1)",
             o.momentum);
  ATTO_CHECK(!o.nesterov || o.momentum > 0.0f,
             "SGD: Nesterov momentum needs momentum > 0 "
             "(got {})",
             o.momentum);
  if (o.momentum == 0.0f) return {};
  return {"momentum_buffer"};
}
}  // namespace

SGD::SGD(std::vector<ParamGroup> groups, SgdOptions options)
    : Optimizer(std::move(groups), sgd_slots(options)), opt_(options) {}

void SGD::apply(std::vector<Update>& updates, const Updated& updated) {
  for (Update& u : updates) {
    float* buf = u.state->slots.empty() ? nullptr : u.state->slots[0].data();
    kernels::sgd_update(u.param.data(), buf, u.grad.data(), u.param.numel(), u.lr, opt_.momentum, u.group->weight_decay,
                        opt_.nesterov, u.state->step == 1);
    if (updated) updated(u.param.data(), u.param.numel());
  }
}

// ============================================================================================
// Adam / AdamW
// ============================================================================================
namespace {
std::vector<std::string> adam_slots(const AdamOptions& o, bool decoupled) {
  const char* who = decoupled ? "AdamW" : "Adam";
  ATTO_CHECK(std::isfinite(o.beta1) && o.beta1 >= 0.0f && o.beta1 < 1.0f, "{}: beta1 {} must be in [0, 1)", who,
             o.beta1);
  ATTO_CHECK(std::isfinite(o.beta2) && o.beta2 >= 0.0f && o.beta2 < 1.0f, "{}: beta2 {} must be in [0, 1)", who,
             o.beta2);
  ATTO_CHECK(std::isfinite(o.eps) && o.eps > 0.0f, "{}: eps {} must be finite and > 0", who, o.eps);
  return {"exp_avg", "exp_avg_sq"};
}
}  // namespace

AdamBase::AdamBase(std::vector<ParamGroup> groups, AdamOptions options, bool decoupled)
    : Optimizer(std::move(groups), adam_slots(options, decoupled)), opt_(options), decoupled_(decoupled) {}

// All parameters in one parallel pass (kernels::adam_update_many): the same bits as one
// adam_update per parameter, without a parallel region (or a serial pass on one thread) per
// bias and LayerNorm weight.
void AdamBase::apply(std::vector<Update>& updates, const Updated& updated) {
  tensors_.clear();
  for (Update& u : updates)
    tensors_.push_back({u.param.data(), u.state->slots[0].data(), u.state->slots[1].data(), u.grad.data(),
                        u.param.numel(), u.lr, u.group->weight_decay, u.state->step});
  if (!updated) {  // every parameter in one parallel pass
    kernels::adam_update_many(tensors_.data(), tensors_.size(), opt_.beta1, opt_.beta2, opt_.eps, decoupled_);
    return;
  }
  // Parameter by parameter (each element's update is the same arithmetic either way): `updated`
  // reads a parameter right after its pass, while it is still in cache, instead of after the
  // pass over all parameters, moments and gradients has pushed it out to memory.
  for (const kernels::AdamTensor& t : tensors_) {
    kernels::adam_update_many(&t, 1, opt_.beta1, opt_.beta2, opt_.eps, decoupled_);
    updated(t.param, t.n);
  }
}

}  // namespace atto::optim
