// atto/optim/clip.h: global gradient norm, clipping, and the finite-gradient check.
//
//   float norm = atto::optim::clip_grad_norm(opt.param_groups(), /*max_norm=*/1.0f);
//   if (!std::isfinite(norm)) { /* NaN or Inf in some gradient: skip this step */ }
//
// Conventions
// - The norm is the L2 norm of all gradients concatenated, as torch.nn.utils.clip_grad_norm_
//   (norm_type 2). It is accumulated in double over fixed chunks (kernels::sum_squares), so it
//   is the same for any thread count.
// - Parameters without a gradient (grad() undefined) are left out. A tensor listed twice (tied
//   weights) counts once.
// - clip_grad_norm scales every gradient by max_norm / (norm + 1e-6) when that factor is below 1,
//   exactly as PyTorch, so the clipped norm is max_norm up to float rounding; smaller gradients
//   are left alone. It returns the norm before clipping.
// - Non-finite gradients give a NaN or Inf norm; then nothing is scaled (PyTorch would scale
//   every gradient to NaN). So the returned norm doubles as the trainer's NaN check.
#pragma once

#include <vector>

#include "optim/param_groups.h"

namespace atto::optim {

// The global L2 norm of the gradients, in double (NaN or Inf if any gradient is not finite).
double grad_norm(const NamedParameters& params);
double grad_norm(const std::vector<ParamGroup>& groups);

// Clip the global gradient norm to max_norm (> 0, finite); returns the norm before clipping.
// With `finite`, also whether every gradient is finite (grads_finite's answer, from the same
// pass over the gradients: a trainer that clips needs no second one).
float clip_grad_norm(const NamedParameters& params, float max_norm, bool* finite = nullptr);
float clip_grad_norm(const std::vector<ParamGroup>& groups, float max_norm, bool* finite = nullptr);

// True when every gradient value is finite (no NaN, no Inf).
bool grads_finite(const NamedParameters& params);
bool grads_finite(const std::vector<ParamGroup>& groups);

}  // namespace atto::optim
