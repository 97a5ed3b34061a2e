#include "optim/clip.h"

#include <cmath>
#include <vector>

#include "base/error.h"
#include "kernels/kernels.h"

namespace atto::optim {

namespace {

NamedParameters flatten(const std::vector<ParamGroup>& groups) {
  NamedParameters all;
  for (const ParamGroup& g : groups) all.insert(all.end(), g.params.begin(), g.params.end());
  return all;
}

// The defined gradients of the distinct parameters, checked to be contiguous.
std::vector<Tensor> gradients(const NamedParameters& params) {
  std::vector<Tensor> grads;
  for (const NamedParameter& p : unique_parameters(params)) {
    Tensor g = p.tensor.grad();
    if (!g.defined()) continue;
    ATTO_CHECK(g.is_contiguous(), "gradient of '{}' {} is not contiguous", p.name, shape_str(g.shape()));
    grads.push_back(g);
  }
  return grads;
}

// Sum of squares in double: each gradient's (kernels::sum_squares, all of them in one parallel
// pass), added one after another in the given order.
double sum_of_squares(const std::vector<Tensor>& grads) {
  std::vector<const float*> x;
  std::vector<int64_t> n;
  for (const Tensor& g : grads) {
    x.push_back(g.data());
    n.push_back(g.numel());
  }
  std::vector<double> each(grads.size());
  kernels::sum_squares_many(each.data(), x.data(), n.data(), grads.size());
  double total = 0.0;
  for (double v : each) total += v;
  return total;
}

}  // namespace

double grad_norm(const NamedParameters& params) { return std::sqrt(sum_of_squares(gradients(params))); }
double grad_norm(const std::vector<ParamGroup>& groups) { return grad_norm(flatten(groups)); }

float clip_grad_norm(const NamedParameters& params, float max_norm, bool* finite) {
  ATTO_CHECK(std::isfinite(max_norm) && max_norm > 0.0f, "clip_grad_norm: max_norm {} must be finite and > 0",
             max_norm);
  std::vector<Tensor> grads = gradients(params);
  const double total = sum_of_squares(grads);
  if (finite != nullptr) *finite = std::isfinite(total);  // as grads_finite
  const float norm = static_cast<float>(std::sqrt(total));
  if (!std::isfinite(total)) return norm;  // NaN/Inf gradients: leave them for the caller
  // As PyTorch: coef = max_norm / (norm + 1e-6) in float, applied when below 1.
  const float coef = max_norm / (norm + 1e-6f);
  if (coef < 1.0f) {
    std::vector<float*> x;
    std::vector<int64_t> n;
    for (Tensor& g : grads) {
      x.push_back(g.data());
      n.push_back(g.numel());
    }
    kernels::scale_inplace_many(x.data(), n.data(), grads.size(), coef);
  }
  return norm;
}
float clip_grad_norm(const std::vector<ParamGroup>& groups, float max_norm, bool* finite) {
  return clip_grad_norm(flatten(groups), max_norm, finite);
}

// A sum of squares of finite floats is finite in double (max float^2 ~ 1.2e77), and any NaN or
// Inf makes it NaN or Inf, so this is one deterministic parallel pass.
bool grads_finite(const NamedParameters& params) { return std::isfinite(sum_of_squares(gradients(params))); }
bool grads_finite(const std::vector<ParamGroup>& groups) { return grads_finite(flatten(groups)); }

}  // namespace atto::optim
