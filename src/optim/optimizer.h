// atto/optim/optimizer.h: SGD (momentum, Nesterov), Adam (L2 decay) and AdamW (decoupled decay).
//
//   using namespace atto::optim;
//   AdamW opt(default_param_groups(model.named_parameters(), 0.1f),
//             AdamOptions{.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f});
//   LrSchedule sched{.kind = ScheduleKind::WarmupCosine, .base_lr = 6e-4f, .min_lr = 6e-5f,
//                    .warmup_steps = 100, .total_steps = 5000};
//   for (int64_t it = 0; it < 5000; ++it) {
//     opt.zero_grad();
//     loss = model.forward(batch); backward(loss);
//     float norm = clip_grad_norm(opt.param_groups(), 1.0f);   // optim/clip.h
//     if (std::isfinite(norm)) opt.step(sched.at(it));          // skip a NaN/Inf step
//   }
//   io::save(..., opt.state_dict());   // exact resume: opt2.load_state_dict(saved)
//
// Conventions
// - The learning rate is an argument of step(): the caller computes it (optim/schedule.h).
//   Group g uses lr * groups[g].lr_scale.
// - The update rules are those of torch.optim.SGD / Adam / AdamW (torch 1.13, foreach=False),
//   written out in kernels/kernels.h (sgd_update, adam_update):
//     Adam:  g += wd*p, then the Adam update                  (L2 decay, enters the moments)
//     AdamW: p *= 1 - lr*wd, then the Adam update on raw g     (decoupled decay)
//   so with weight decay 0 Adam and AdamW are identical.
// - Parameters must be contiguous; their gradient is tensor.grad() (contiguous, same shape).
//   A parameter whose grad() is undefined got no gradient this step and is skipped, as PyTorch
//   skips grad None: its state and its own step count stay as they are. (zero_grad() zeroes
//   gradients, it does not undefine them, as PyTorch 1.13's default.)
// - State is created on a parameter's first update. Adam keeps a per-parameter step count for
//   the bias correction, like PyTorch, so a parameter that skipped steps is corrected by the
//   number of updates it actually had.
// - Invalid options (negative or NaN learning rate / weight decay, betas outside [0, 1),
//   eps <= 0, ...) throw atto::Error naming the value.
//
// State dict (for exact resume; optimizer hyperparameters are not part of it):
//   "step"                    global number of step() calls
//   "<param>.step"            number of updates of that parameter
//   "<param>.exp_avg"         Adam/AdamW first moment m, the parameter's shape
//   "<param>.exp_avg_sq"      Adam/AdamW second moment v, the parameter's shape
//   "<param>.momentum_buffer" SGD momentum buffer (only when momentum > 0)
// A parameter that has not been updated yet has no entries. Step counts are stored exactly in
// float32 tensors of shape [2] = {count / 2^24, count % 2^24} (see encode_count).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/kernels.h"
#include "optim/param_groups.h"

namespace atto::optim {

// The optimisers a run can choose, by name: "adamw" (decoupled weight decay), "adam" and "sgd"
// (weight decay as L2 through the gradient).
enum class OptimizerKind { AdamW, Adam, SGD };
const char* to_string(OptimizerKind kind);
OptimizerKind optimizer_kind_from_string(std::string_view name);  // atto::Error listing the names

// Named state tensors, in a fixed order (global step first, then parameters in group order).
using StateDict = std::vector<std::pair<std::string, Tensor>>;

// An int64 count >= 0 as a float32 tensor [2] = {count / 2^24, count % 2^24} (exact up to 2^48).
Tensor encode_count(int64_t count);
// The inverse; throws atto::Error naming `what` if t is not such a tensor.
int64_t decode_count(const Tensor& t, const std::string& what);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Called with a parameter's data (n floats) once its update is written.
  using Updated = std::function<void(const float* data, int64_t n)>;
  // One update of every parameter that has a gradient, with learning rate lr (>= 0, finite).
  // With `updated`, each parameter is handed to it as soon as its own update is done (Adam and
  // AdamW: parameter by parameter, so that a bf16 copy is packed while the new weights are still
  // in cache; bf16 training refreshes its weight copies this way). The same values either way.
  void step(float lr, const Updated& updated = nullptr);
  // Zero every gradient (set_to_none: drop the buffers instead; skipped next step if unused).
  void zero_grad(bool set_to_none = false);

  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  int64_t steps_taken() const { return steps_; }
  // The per-parameter state tensors (e.g. {"exp_avg", "exp_avg_sq"}).
  const std::vector<std::string>& state_names() const { return slot_names_; }

  // A snapshot (copies) of the state, see the table above.
  StateDict state_dict() const;
  // Replace the state with `state`. Throws atto::Error, changing nothing, on an unknown or
  // duplicate name, a shape mismatch, a missing entry, or a malformed step count.
  void load_state_dict(const StateDict& state);

 protected:
  // Per-parameter state: its update count and one tensor per state name (allocated, zero, on
  // the first update).
  struct ParamState {
    int64_t step = 0;
    std::vector<Tensor> slots;
  };
  Optimizer(std::vector<ParamGroup> groups, std::vector<std::string> slot_names);
  // One parameter's update in a step; state->step has already been incremented (1 on the first
  // update).
  struct Update {
    const ParamGroup* group;
    ParamState* state;
    Tensor param;
    Tensor grad;
    float lr;
  };
  // Apply a step's updates (every parameter with a gradient, in group order). One call per step,
  // so an optimizer can update all parameters in one parallel pass; `updated` (may be empty) gets
  // each parameter once its update is written.
  virtual void apply(std::vector<Update>& updates, const Updated& updated) = 0;

 private:
  ParamState load_param_state(const std::map<std::string, Tensor>& byname, const NamedParameter& p) const;

  std::vector<ParamGroup> groups_;
  std::vector<std::string> slot_names_;
  std::vector<std::vector<ParamState>> state_;  // [group][param]
  int64_t steps_ = 0;
  std::vector<Update> updates_;  // step()'s list, kept to reuse its storage
};

// opt.step(lr) and the cache's bf16 copies of the weights it changed packed anew, each right after
// its weight's update (while that is still in cache), before the next step reads them.
void step_and_refresh(Optimizer& opt, float lr, kernels::Bf16WeightCache& cache);

// ---- SGD --------------------------------------------------------------------------------
struct SgdOptions {
  float momentum = 0.0f;  // in [0, 1); 0 keeps no buffer
  bool nesterov = false;  // needs momentum > 0
};

class SGD final : public Optimizer {
 public:
  explicit SGD(std::vector<ParamGroup> groups, SgdOptions options = {});
  const SgdOptions& options() const { return opt_; }

 private:
  void apply(std::vector<Update>& updates, const Updated& updated) override;
  SgdOptions opt_;
};

// ---- Adam / AdamW -------------------------------------------------------------------------
struct AdamOptions {
  float beta1 = 0.9f;    // in [0, 1)
  float beta2 = 0.999f;  // in [0, 1)
  float eps = 1e-8f;     // > 0
};

// The shared implementation; use Adam or AdamW.
class AdamBase : public Optimizer {
 public:
  const AdamOptions& options() const { return opt_; }
  bool decoupled_weight_decay() const { return decoupled_; }

 protected:
  AdamBase(std::vector<ParamGroup> groups, AdamOptions options, bool decoupled);

 private:
  void apply(std::vector<Update>& updates, const Updated& updated) override;
  AdamOptions opt_;
  bool decoupled_;
  std::vector<kernels::AdamTensor> tensors_;  // apply()'s list, kept to reuse its storage
};

// torch.optim.Adam: weight decay is L2 (added to the gradient, so it enters the moments).
class Adam final : public AdamBase {
 public:
  explicit Adam(std::vector<ParamGroup> groups, AdamOptions options = {})
      : AdamBase(std::move(groups), options, /*decoupled=*/false) {}
};

// torch.optim.AdamW: weight decay is decoupled (p *= 1 - lr*wd before the Adam update).
class AdamW final : public AdamBase {
 public:
  explicit AdamW(std::vector<ParamGroup> groups, AdamOptions options = {})
      : AdamBase(std::move(groups), options, /*decoupled=*/true) {}
};

}  // namespace atto::optim
