// tests/parity/modules_common.h: reading the module-parity references (ref_modules.py) and
// comparing atto's output and gradients with them.
//
//   test::ModuleRef ref = test::module_ref("mha_self");
//   nn::SelfAttention attn({.d_model = ref.meta_int("C"), .n_heads = ref.meta_int("n_heads")}, rng);
//   attn.load_state_dict(ref.params(), ref.source());      // the "param." tensors, prefix stripped
//   test::Inputs in{{"x", ref.input("x")}};                 // leaf tensors with requires_grad
//   Tensor y = attn.forward(in[0].second, {.causal = true, .key_mask = ref.mask("key_mask")});
//   backward(y, ref.get("in.dy"));
//   test::check_parity(ref, y, in, &attn, 1e-4f);
//
// File contract (see ref_modules.py), per case: param.<name>, in.<name>, in.dy, out.y,
// grad.<input>, grad.param.<name>, and the configuration as metadata strings. All cases come
// from one run of `ref_modules.py --case all` (one torch start-up instead of one per case),
// where every name and metadata key is prefixed with "<case>/" (cached across processes, see
// module_refs_cache_path).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "io/safetensors.h"
#include "nn/module.h"
#include "parity/harness.h"
#include "tensor/tensor.h"

namespace atto::test {

using Inputs = std::vector<std::pair<std::string, Tensor>>;  // name (as in "in.<name>") -> leaf

namespace detail {
inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// ctest runs every test in its own process, so the references are cached in
// $ATTO_BUILD_DIR/parity-cache (else in parity-cache next to the test executable) under a hash
// (FNV-1a) of the interpreter path and the scripts' text: editing ref_modules.py or st.py makes
// a new entry. ATTO_NO_PARITY_CACHE=1 turns the cache off.
inline std::string module_refs_cache_path() {
  const char* off = std::getenv("ATTO_NO_PARITY_CACHE");
  if (off && std::string(off) == "1") return "";
  const char* env = std::getenv("ATTO_BUILD_DIR");
  std::error_code ec;
  const std::string build =
      env && *env ? std::string(env) : std::filesystem::read_symlink("/proc/self/exe", ec).parent_path().string();
  if (ec || build.empty()) return "";
  const std::string dir = source_dir() + "/tests/parity/";
  uint64_t h = 1469598103934665603ull;
  for (const std::string& part : {python_executable(), read_text(dir + "ref_modules.py"), read_text(dir + "st.py")})
    for (unsigned char c : part + '\0') h = (h ^ c) * 1099511628211ull;
  char name[64];
  std::snprintf(name, sizeof name, "ref_modules-%016llx.safetensors", static_cast<unsigned long long>(h));
  return std::string(build) + "/parity-cache/" + name;
}

inline io::SafetensorsFile load_or_make_module_refs() {
  const std::string cache = module_refs_cache_path();
  if (!cache.empty() && std::filesystem::exists(cache)) {
    try {
      return io::load_safetensors(cache);
    } catch (const Error&) {  // a damaged entry: make it again
    }
  }
  io::SafetensorsFile file = run_reference("ref_modules.py", "all");
  if (!cache.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(cache).parent_path(), ec);
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const std::string& n : file.names) tensors.emplace_back(n, file.get(n));
    try {
      io::save_safetensors(cache, tensors, file.metadata);  // atomic: parallel runs cannot tear it
    } catch (const Error& e) {
      std::fprintf(stderr, "note: not caching the module references: %s\n", e.what());
    }
  }
  return file;
}
}  // namespace detail

// Every case's reference: one run of `ref_modules.py --case all` per process (or none, when
// the cache described above has it), kept for the process.
inline const io::SafetensorsFile& all_module_refs() {
  static const io::SafetensorsFile file = detail::load_or_make_module_refs();
  return file;
}

// One case of the references: typed access to its metadata and tensors.
struct ModuleRef {
  std::string case_name;
  const io::SafetensorsFile* file = nullptr;

  std::string source() const { return "ref_modules.py --case " + case_name; }
  std::string key(const std::string& name) const { return case_name + "/" + name; }

  bool contains(const std::string& name) const { return file->contains(key(name)); }
  const Tensor& get(const std::string& name) const { return file->get(key(name)); }
  // The names of this case's tensors (prefix stripped), in file order.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    const std::string prefix = case_name + "/";
    for (const std::string& n : file->names)
      if (n.starts_with(prefix)) out.push_back(n.substr(prefix.size()));
    return out;
  }

  // Metadata values; a missing key is an atto::Error naming it.
  const std::string& meta(const std::string& k) const {
    auto it = file->metadata.find(key(k));
    if (it == file->metadata.end()) fail("{}: no metadata '{}'", source(), k);
    return it->second;
  }
  int64_t meta_int(const std::string& k) const { return std::stoll(meta(k)); }
  bool meta_bool(const std::string& k) const { return meta(k) == "1"; }  // "1" / "0"
  float meta_float(const std::string& k) const { return std::stof(meta(k)); }

  bool has_input(const std::string& name) const { return contains("in." + name); }
  // A copy of "in.<name>" with requires_grad set (a leaf of this test's graph).
  Tensor input(const std::string& name) const {
    Tensor t = get("in." + name).clone();
    t.set_requires_grad(true);
    return t;
  }
  // "in.<name>" ([B, Tk] of 0/1 floats) as a key padding mask, 1 = attend.
  std::vector<uint8_t> mask(const std::string& name) const {
    std::vector<uint8_t> out;
    for (float v : get("in." + name).to_vector()) out.push_back(v > 0.5f ? 1 : 0);
    return out;
  }
  // "in.<name>" (floats holding integers) as int32 targets.
  std::vector<int32_t> targets(const std::string& name) const {
    std::vector<int32_t> out;
    for (float v : get("in." + name).to_vector()) out.push_back(static_cast<int32_t>(std::lround(v)));
    return out;
  }
  // Every "param.<name>" as (<name>, tensor), for Module::load_state_dict.
  std::vector<std::pair<std::string, Tensor>> params() const {
    std::vector<std::pair<std::string, Tensor>> out;
    for (const std::string& n : names())
      if (n.starts_with("param.")) out.emplace_back(n.substr(6), get(n));
    return out;
  }
};

// The reference of one case; an atto::Error if the script has no such case.
inline ModuleRef module_ref(const std::string& case_name) {
  ModuleRef ref{case_name, &all_module_refs()};
  ATTO_CHECK(ref.file->metadata.count(ref.key("case")) != 0, "ref_modules.py --case all wrote no case '{}'", case_name);
  return ref;
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
// the reference has a gradient the test did not check, or the reverse. Prints one line with the
// case's largest differences and returns the largest.
inline float check_parity(const ModuleRef& ref, const Tensor& y, const Inputs& inputs, const nn::Module* module,
                          float tol) {
  const std::string tag = ref.case_name + ": ";
  const float y_err = detail::compare(y, ref.get("out.y"), tol, tag + "output y");
  float g_err = 0.0f;
  std::string g_worst = "-";
  size_t checked = 0;
  auto check_grad = [&](const Tensor& t, const std::string& name) {
    if (!ref.contains(name)) {
      ADD_FAILURE() << tag << "the reference has no '" << name << "'";
      return;
    }
    ++checked;
    const float e = detail::compare(detail::grad_or_zero(t), ref.get(name), tol, tag + name);
    if (!(e <= g_err)) g_err = e, g_worst = name;
  };
  for (const auto& [name, t] : inputs) check_grad(t, "grad." + name);
  if (module)
    for (const NamedParameter& p : module->named_parameters()) check_grad(p.tensor, "grad.param." + p.name);
  size_t in_file = 0;
  for (const std::string& n : ref.names()) in_file += n.starts_with("grad.") ? 1 : 0;
  EXPECT_EQ(checked, in_file) << tag << "the reference has gradients this test does not check";
  std::printf("[ parity   ] %-26s y max|diff| %.2e   grads (%zu) max|diff| %.2e (%s)\n", ref.case_name.c_str(),
              static_cast<double>(y_err), checked, static_cast<double>(g_err), g_worst.c_str());
  return std::max(y_err, g_err);
}

}  // namespace atto::test
