// atto/optim/schedule.h: learning-rate schedules, a pure function of the step.
//
//   atto::optim::LrSchedule s{.kind = atto::optim::ScheduleKind::WarmupCosine,
//                             .base_lr = 6e-4f, .min_lr = 6e-5f,
//                             .warmup_steps = 100, .total_steps = 5000};
//   s.validate();                   // throws atto::Error on a bad setting
//   opt.step(s.at(it));             // it = 0, 1, 2, ... (0-based optimizer step)
//
// Kinds (step is 0-based; W = warmup_steps, N = total_steps):
//   Constant      base_lr, after an optional linear warmup (W > 0):
//                   step < W: base * (step + 1) / (W + 1)
//   WarmupCosine  nanoGPT's get_lr:
//                   step < W:        base * (step + 1) / (W + 1)
//                   W <= step <= N:  min + 0.5 (1 + cos(pi (step - W) / (N - W))) (base - min)
//                   step > N:        min                      (step == N gives min as well)
//   InverseSqrt   "Noam" (Attention Is All You Need, eq. 3) normalised so the peak is base_lr:
//                   s = step + 1:  base * sqrt(W) * min(s^-0.5, s * W^-1.5)
//                 linear rise to base_lr at s == W (step W - 1), then decay as base * sqrt(W / s).
//                 Needs W >= 1.
// min_lr is used by WarmupCosine only. total_steps is used by WarmupCosine only.
// Arithmetic is in double, rounded to float at the end.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace atto::optim {

enum class ScheduleKind { Constant, WarmupCosine, InverseSqrt };

// "constant", "cosine", "inverse_sqrt"
const char* to_string(ScheduleKind kind);
// Parses the names above; throws atto::Error listing them on anything else.
ScheduleKind schedule_kind_from_string(std::string_view name);

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::Constant;
  float base_lr = 1e-3f;     // finite, >= 0
  float min_lr = 0.0f;       // WarmupCosine: finite, in [0, base_lr]
  int64_t warmup_steps = 0;  // >= 0 (>= 1 for InverseSqrt; <= total_steps for WarmupCosine)
  int64_t total_steps = 0;   // WarmupCosine: the step at which min_lr is reached

  // Throws atto::Error naming the bad value.
  void validate() const;
  // The learning rate for 0-based step `step` (>= 0). Validates first.
  float at(int64_t step) const;
};

}  // namespace atto::optim
