// PyTorch parity of the optimizers (reference: tests/parity/ref_optim.py, torch 1.13).
//
// Three steps of clip_grad_norm_(1.0) + AdamW / Adam (L2) / SGD (Nesterov momentum) on a weight
// [8, 5] (decayed), a bias [5], a norm weight [5] and an embedding [11, 5] (not decayed), with
// the embedding getting no gradient at step 1. atto builds its groups with
// default_param_groups from the ParamKinds and must reproduce, after every step, the clip norm
// and every parameter, and at the end the optimizer state and per-parameter step counts.
//
// Tolerances (both sides compute in float32 with the same operation order; the differences
// come from the norm, summed in double here and in float in PyTorch, and from scalar rounding):
//   parameters and state  max |diff| <= 1e-6   (parameters are O(1); measured: <= 1.2e-7)
//   clip norm             relative 1e-6
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "base/error.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "parity/harness.h"

namespace atto {
namespace {
namespace optim_parity {

constexpr float kTol = 1e-6f;

// ref_optim.py --case all, run once (one torch import, ~3 s).
const io::SafetensorsFile& reference() {
  static const io::SafetensorsFile ref = test::run_reference("ref_optim.py", "all");
  return ref;
}

// One case of the reference: its tensors and metadata are those prefixed "<name>.".
struct Case {
  std::string name;
  NamedParameters params;
  bool has(const std::string& key) const { return reference().contains(name + "." + key); }
  const Tensor& get(const std::string& key) const { return reference().get(name + "." + key); }
  std::string meta_str(const std::string& key) const {
    auto it = reference().metadata.find(name + "." + key);
    if (it == reference().metadata.end()) fail("ref_optim.py wrote no '{}.{}' metadata", name, key);
    return it->second;
  }
  float meta(const std::string& key) const { return std::stof(meta_str(key)); }
};

Case load_case(const std::string& name) {
  Case c{name, {}};
  const std::pair<const char*, ParamKind> kinds[] = {{"weight", ParamKind::Weight},
                                                     {"bias", ParamKind::Bias},
                                                     {"norm", ParamKind::Norm},
                                                     {"embedding", ParamKind::Embedding}};
  for (const auto& [pname, kind] : kinds) {
    NamedParameter p{pname, c.get(std::string("init.") + pname).clone(), kind};
    p.tensor.set_requires_grad(true);
    c.params.push_back(p);
  }
  return c;
}

// Runs the reference's steps with `opt` and checks norms and parameters after each step.
void run_and_compare(Case& c, optim::Optimizer& opt) {
  const int steps = static_cast<int>(c.meta("steps"));
  const float lr = c.meta("lr"), max_norm = c.meta("max_norm");
  for (int s = 0; s < steps; ++s) {
    const std::string tag = "step " + std::to_string(s);
    for (NamedParameter& p : c.params) {
      const std::string key = "grad." + std::to_string(s) + "." + p.name;
      if (c.has(key))
        p.tensor.set_grad(c.get(key).clone());
      else
        p.tensor.clear_grad();  // PyTorch's grad None
    }
    const float norm = optim::clip_grad_norm(opt.param_groups(), max_norm);
    const float want = c.get("norm." + std::to_string(s)).item();
    EXPECT_NEAR(norm, want, 1e-6f * want) << tag << ": clip norm";
    opt.step(lr);
    for (const NamedParameter& p : c.params)
      test::expect_close(p.tensor, c.get("param." + std::to_string(s) + "." + p.name), kTol, tag + ": " + p.name);
  }
}

// The final optimizer state against PyTorch's opt.state (which has per-parameter step counts
// for Adam only).
void compare_state(const Case& c, const optim::Optimizer& opt, bool torch_has_steps) {
  int compared = 0;
  for (const auto& [name, t] : opt.state_dict()) {
    if (name == "step" || (!torch_has_steps && name.ends_with(".step"))) continue;
    const std::string key = "state." + name;
    ASSERT_TRUE(c.has(key)) << "PyTorch has no state " << key;
    if (name.ends_with(".step")) {
      EXPECT_EQ(optim::decode_count(t, name), static_cast<int64_t>(c.get(key).item())) << name;
    } else {
      test::expect_close(t, c.get(key), kTol, key);
    }
    ++compared;
  }
  // every parameter's buffers (and step counts) were compared
  EXPECT_EQ(compared, 4 * static_cast<int>(opt.state_names().size() + torch_has_steps));
}

std::vector<optim::ParamGroup> groups_of(const Case& c) {
  return optim::default_param_groups(c.params, c.meta("weight_decay"));
}

optim::AdamOptions adam_options(const Case& c) {
  return {.beta1 = c.meta("beta1"), .beta2 = c.meta("beta2"), .eps = c.meta("eps")};
}

// One test for the three cases: ctest runs each TEST in its own process, and the torch import
// of the reference (~3 s) dominates, so one process serves all three.
TEST(OptimParity, AdamWAdamSgdWithClippingMatchPyTorch) {
  ATTO_REQUIRE_TORCH();
  {
    SCOPED_TRACE("AdamW, decoupled weight decay on the Weight group");
    Case c = load_case("adamw");
    optim::AdamW opt(groups_of(c), adam_options(c));
    run_and_compare(c, opt);
    compare_state(c, opt, true);
    EXPECT_EQ(opt.steps_taken(), 3);
  }
  {
    SCOPED_TRACE("Adam, L2 weight decay on the Weight group");
    Case c = load_case("adam");
    optim::Adam opt(groups_of(c), adam_options(c));
    run_and_compare(c, opt);
    compare_state(c, opt, true);
  }
  {
    SCOPED_TRACE("SGD, Nesterov momentum, L2 weight decay on the Weight group");
    Case c = load_case("sgd");
    ASSERT_EQ(c.meta_str("nesterov"), "True");
    optim::SGD opt(groups_of(c), {.momentum = c.meta("momentum"), .nesterov = true});
    run_and_compare(c, opt);
    compare_state(c, opt, false);
  }
}

}  // namespace optim_parity
}  // namespace
}  // namespace atto
