#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "base/error.h"

namespace atto::optim {

const char* to_string(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::Constant: return "constant";
    case ScheduleKind::WarmupCosine: return "cosine";
    case ScheduleKind::InverseSqrt: return "inverse_sqrt";
  }
  return "?";
}

ScheduleKind schedule_kind_from_string(std::string_view name) {
  for (ScheduleKind k : {ScheduleKind::Constant, ScheduleKind::WarmupCosine, ScheduleKind::InverseSqrt})
    if (name == to_string(k)) return k;
  fail("unknown learning-rate schedule '{}'; use constant, cosine or inverse_sqrt", name);
}

void LrSchedule::validate() const {
  const char* k = to_string(kind);
  ATTO_CHECK(std::isfinite(base_lr) && base_lr >= 0.0f, "{} schedule: base_lr {} must be finite and >= 0", k, base_lr);
  ATTO_CHECK(warmup_steps >= 0, "{} schedule: warmup_steps {} must be >= 0", k, warmup_steps);
  if (kind == ScheduleKind::WarmupCosine) {
    ATTO_CHECK(std::isfinite(min_lr) && min_lr >= 0.0f, "cosine schedule: min_lr {} must be finite and >= 0", min_lr);
    ATTO_CHECK(min_lr <= base_lr, "cosine schedule: min_lr {} is above base_lr {}", min_lr, base_lr);
    ATTO_CHECK(total_steps >= 0, "cosine schedule: total_steps {} must be >= 0", total_steps);
    ATTO_CHECK(warmup_steps <= total_steps, "cosine schedule: warmup_steps {} exceeds total_steps {}", warmup_steps,
               total_steps);
  }
  if (kind == ScheduleKind::InverseSqrt)
    ATTO_CHECK(warmup_steps >= 1, "inverse_sqrt schedule: warmup_steps {} must be >= 1", warmup_steps);
}

float LrSchedule::at(int64_t step) const {
  validate();
  ATTO_CHECK(step >= 0, "learning-rate schedule: step {} must be >= 0", step);
  const double base = base_lr;
  const double w = static_cast<double>(warmup_steps);
  const double s = static_cast<double>(step);
  switch (kind) {
    case ScheduleKind::Constant: return static_cast<float>(step < warmup_steps ? base * (s + 1.0) / (w + 1.0) : base);
    case ScheduleKind::WarmupCosine: {
      if (step < warmup_steps) return static_cast<float>(base * (s + 1.0) / (w + 1.0));
      if (step >= total_steps) return min_lr;
      const double ratio = (s - w) / static_cast<double>(total_steps - warmup_steps);
      const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * ratio));
      return static_cast<float>(min_lr + coeff * (base - min_lr));
    }
    case ScheduleKind::InverseSqrt: {
      const double n = s + 1.0;
      return static_cast<float>(base * std::sqrt(w) * std::min(1.0 / std::sqrt(n), n * std::pow(w, -1.5)));
    }
  }
  return base_lr;
}

}  // namespace atto::optim
