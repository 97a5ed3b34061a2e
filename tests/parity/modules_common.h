// tests/parity/modules_common.h: reading a module-parity reference file (ref_modules.py) and
// comparing atto's output and gradients with it.
//
//   test::ModuleRef ref = test::load_module_ref("mha_self");
//   nn::SelfAttention attn({.d_model = ref.meta_int("C"), .n_heads = ref.meta_int("n_heads")}, rng);
//   attn.load_state_dict(ref.params(), ref.source());      // the "param." tensors, prefix stripped
//   Inputs in{{"x", ref.input("x")}};                       // leaf tensors with requires_grad
//   Tensor y = attn.forward(in[0].second, {.causal = true, .key_mask = ref.mask("key_mask")});
//   backward(y, ref.file.get("in.dy"));
//   test::check_parity(ref, y, in, &attn, 1e-4f);
//
// File contract (see ref_modules.py): param.<name>, in.<name>, in.dy, out.y, grad.<input>,
// grad.param.<name>; the configuration in the metadata as strings.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "nn/module.h"
#include "parity/harness.h"
#include "tensor/error.h"
#include "tensor/tensor.h"

namespace atto::test {

using Inputs = std::vector<std::pair<std::string, Tensor>>;  // name (as in "in.<name>") -> leaf

// One reference file with typed access to its metadata and tensors.
struct ModuleRef {
  std::string case_name;
  io::SafetensorsFile file;

  std::string source() const { return "ref_modules.py --case " + case_name; }

  // Metadata values; a missing key is an atto::Error naming it.
  const std::string& meta(const std::string& key) const {
    auto it = file.metadata.find(key);
    if (it == file.metadata.end()) fail("{}: no metadata '{}'", source(), key);
    return it->second;
  }
  int64_t meta_int(const std::string& key) const { return std::stoll(meta(key)); }
  bool meta_bool(const std::string& key) const { return meta(key) == "1"; }  // "1" / "0"
  float meta_float(const std::string& key) const { return std::stof(meta(key)); }

  bool has_input(const std::string& name) const { return file.contains("in." + name); }
  // A copy of "in.<name>" with requires_grad set (a leaf of this test's graph).
  Tensor input(const std::string& name) const {
    Tensor t = file.get("in." + name).clone();
    t.set_requires_grad(true);
    return t;
  }
  // "in.<name>" ([B, Tk] of 0/1 floats) as a key padding mask, 1 = attend.
  std::vector<uint8_t> mask(const std::string& name) const {
    std::vector<uint8_t> out;
    for (float v : file.get("in." + name).to_vector()) out.push_back(v > 0.5f ? 1 : 0);
    return out;
  }
  // "in.<name>" (floats holding integers) as int32 targets.
  std::vector<int32_t> targets(const std::string& name) const {
    std::vector<int32_t> out;
    for (float v : file.get("in." + name).to_vector()) out.push_back(static_cast<int32_t>(std::lround(v)));
    return out;
  }
  // Every "param.<name>" as (<name>, tensor), for Module::load_state_dict.
  std::vector<std::pair<std::string, Tensor>> params() const {
    std::vector<std::pair<std::string, Tensor>> out;
    for (const std::string& n : file.names)
      if (n.starts_with("param.")) out.emplace_back(n.substr(6), file.get(n));
    return out;
  }
};

// Runs ref_modules.py --case <case_name> and loads its file.
inline ModuleRef load_module_ref(const std::string& case_name) {
  return ModuleRef{case_name, run_reference("ref_modules.py", case_name)};
}

namespace detail {
// expect_close, and the max difference for the summary line (infinity on a shape mismatch).
inline float compare(const Tensor& got, const Tensor& want, float tol, const std::string& what) {
  expect_close(got, want, tol, what);
  return got.shape() == want.shape() ? max_abs_diff(got, want) : INFINITY;
}
// A gradient that never arrived counts as zero (e.g. an input whose every use was masked).
inline Tensor grad_or_zero(const Tensor& t) { return t.grad().defined() ? t.grad() : Tensor::zeros(t.shape()); }
}  // namespace detail

// Compares y with out.y, each input's gradient with grad.<name>, and (when module is given)
// each parameter's gradient with grad.param.<name>, all with max |diff| <= tol. Fails too when
// the file has a gradient the test did not check, or the reverse. Prints one line with the
// case's largest differences and returns the largest.
inline float check_parity(const ModuleRef& ref, const Tensor& y, const Inputs& inputs, const nn::Module* module,
                          float tol) {
  const std::string tag = ref.case_name + ": ";
  float y_err = detail::compare(y, ref.file.get("out.y"), tol, tag + "output y");
  float g_err = 0.0f;
  std::string g_worst = "-";
  size_t checked = 0;
  auto check_grad = [&](const Tensor& t, const std::string& key) {
    if (!ref.file.contains(key)) {
      ADD_FAILURE() << tag << "the reference has no '" << key << "'";
      return;
    }
    ++checked;
    const float e = detail::compare(detail::grad_or_zero(t), ref.file.get(key), tol, tag + key);
    if (!(e <= g_err)) g_err = e, g_worst = key;
  };
  for (const auto& [name, t] : inputs) check_grad(t, "grad." + name);
  if (module)
    for (const NamedParameter& p : module->named_parameters()) check_grad(p.tensor, "grad.param." + p.name);
  size_t in_file = 0;
  for (const std::string& n : ref.file.names) in_file += n.starts_with("grad.") ? 1 : 0;
  EXPECT_EQ(checked, in_file) << tag << "the reference has gradients this test does not check";
  std::printf("[ parity   ] %-26s y max|diff| %.2e   grads (%zu) max|diff| %.2e (%s)\n", ref.case_name.c_str(),
              static_cast<double>(y_err), checked, static_cast<double>(g_err), g_worst.c_str());
  return std::max(y_err, g_err);
}

}  // namespace atto::test
