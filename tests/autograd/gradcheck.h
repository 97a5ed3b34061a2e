// One gradient-check harness: adding an op is one entry.
//
//   EXPECT_TRUE(gradcheck("layer_norm", [](const Inputs& x) { return layer_norm(x[0], x[1], x[2]); },
//                         {randn({3, 5}), randn({5}), randn({5})}));
//
// f maps inputs to an output y. The check compares the analytic gradient of L = sum(y * r)
// (r a fixed random tensor, so every output element matters with a different weight) with
// central differences (L(x + eps) - L(x - eps)) / 2 eps, L summed in double precision over the
// float kernels' outputs. Each element passes when |analytic - numeric| <= atol + rtol |numeric|.
//
// With non_contiguous = true every input of rank >= 2 is handed to f as a transposed view of a
// leaf (so f sees strides that are not row-major) and the gradient is checked on that leaf.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "autograd/parameter.h"
#include "tensor/tensor.h"

namespace atto::test {

using Inputs = std::vector<Tensor>;

// A tensor of normal values (mean 0, standard deviation std) from its own seeded generator.
inline Tensor randn(const Shape& s, uint64_t seed, float std = 1.0f) {
  Rng rng(seed);
  return Tensor::randn(s, rng, 0.0f, std);
}
using Fn = std::function<Tensor(const Inputs&)>;

struct GradcheckOptions {
  double eps = 1e-2;
  double atol = 2e-3;
  double rtol = 2e-2;
  bool non_contiguous = false;
  uint64_t seed = 12345;
  std::vector<bool> skip;  // skip[i]: do not check input i (e.g. a mask)
};

inline double weighted_sum(const Tensor& y, const Tensor& r) {
  const auto vy = y.to_vector();
  const auto vr = r.to_vector();
  double s = 0.0;
  for (size_t i = 0; i < vy.size(); ++i) s += static_cast<double>(vy[i]) * vr[i];
  return s;
}

inline ::testing::AssertionResult gradcheck(const std::string& name, const Fn& f, const Inputs& values,
                                            GradcheckOptions opt = {}) {
  // Leaves: what gradients are checked on. Presented: what f receives.
  Inputs leaves, presented;
  for (const Tensor& v : values) {
    if (opt.non_contiguous && v.ndim() >= 2) {
      Tensor leaf = v.detach().as_strided(v.shape(), v.strides(), v.offset());
      Tensor base = transpose(leaf, -1, -2).contiguous().detach();  // [.., n, m] with swapped dims
      base.set_requires_grad(true);
      leaves.push_back(base);
      presented.push_back(transpose(base, -1, -2));
    } else {
      Tensor leaf = v.clone();
      leaf.set_requires_grad(true);
      leaves.push_back(leaf);
      presented.push_back(leaf);
    }
  }
  Tensor y = f(presented);
  Rng rng(opt.seed);
  Tensor r = Tensor::randn(y.shape(), rng);
  backward(sum(mul(y, r)));

  auto evaluate = [&]() {
    NoGradGuard ng;
    Inputs in;
    for (size_t i = 0; i < leaves.size(); ++i)
      in.push_back(opt.non_contiguous && values[i].ndim() >= 2 ? transpose(leaves[i], -1, -2) : leaves[i]);
    return weighted_sum(f(in), r);
  };

  for (size_t i = 0; i < leaves.size(); ++i) {
    if (i < opt.skip.size() && opt.skip[i]) continue;
    Tensor leaf = leaves[i];
    Tensor g = leaf.grad();
    const auto analytic = g.defined() ? g.to_vector() : std::vector<float>(leaf.numel(), 0.0f);
    float* p = leaf.data();
    for (int64_t j = 0; j < leaf.numel(); ++j) {
      const float orig = p[j];
      p[j] = static_cast<float>(orig + opt.eps);
      const double lp = evaluate();
      p[j] = static_cast<float>(orig - opt.eps);
      const double lm = evaluate();
      p[j] = orig;
      const double numeric = (lp - lm) / (2.0 * opt.eps);
      const double diff = std::abs(numeric - analytic[j]);
      if (!(diff <= opt.atol + opt.rtol * std::abs(numeric)))
        return ::testing::AssertionFailure()
               << name << ": input " << i << " element " << j << " analytic " << analytic[j] << " numeric " << numeric
               << " (diff " << diff << ")" << (opt.non_contiguous ? " [non-contiguous]" : "");
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace atto::test

namespace atto::test {

// Gradient check of a module: the gradients of L = sum(f(x) * r) with respect to the input x
// (given to f as a transposed view when non_contiguous) and to every named parameter.
inline ::testing::AssertionResult gradcheck_module(const std::string& name, const NamedParameters& params,
                                                   const std::function<Tensor(const Tensor&)>& f, const Tensor& x,
                                                   GradcheckOptions opt = {}) {
  const bool nc = opt.non_contiguous && x.ndim() >= 2;
  Tensor leaf = nc ? transpose(x.detach(), -1, -2).contiguous().detach() : x.clone();
  leaf.set_requires_grad(true);
  auto present = [&]() { return nc ? transpose(leaf, -1, -2) : leaf; };
  for (const auto& p : params) Tensor(p.tensor).zero_grad();
  Tensor y = f(present());
  Rng rng(opt.seed);
  Tensor r = Tensor::randn(y.shape(), rng);
  backward(sum(mul(y, r)));
  auto evaluate = [&]() {
    NoGradGuard ng;
    return weighted_sum(f(present()), r);
  };
  std::vector<std::pair<std::string, Tensor>> targets{{"input", leaf}};
  for (const auto& p : params) targets.emplace_back(p.name, p.tensor);
  for (auto& [tname, t] : targets) {
    Tensor g = t.grad();
    const auto analytic = g.defined() ? g.to_vector() : std::vector<float>(t.numel(), 0.0f);
    float* p = t.data();
    for (int64_t j = 0; j < t.numel(); ++j) {
      const float orig = p[j];
      p[j] = static_cast<float>(orig + opt.eps);
      const double lp = evaluate();
      p[j] = static_cast<float>(orig - opt.eps);
      const double lm = evaluate();
      p[j] = orig;
      const double numeric = (lp - lm) / (2.0 * opt.eps);
      const double diff = std::abs(numeric - analytic[j]);
      if (!(diff <= opt.atol + opt.rtol * std::abs(numeric)))
        return ::testing::AssertionFailure()
               << name << ": " << tname << " element " << j << " analytic " << analytic[j] << " numeric " << numeric
               << " (diff " << diff << ")" << (nc ? " [non-contiguous input]" : "");
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace atto::test
