// Tests of the learning-rate schedules (optim/schedule.cpp): warmup, cosine decay, inverse square
// root, validation and the kind names.
#include <gmock/gmock.h>

#include <cmath>
#include <cstdint>

#include "optim/schedule.h"
#include "support.h"

namespace atto::optim {
namespace {

using atto::test::error_of;
using ::testing::HasSubstr;

TEST(Schedule, WarmupCosineKeySteps) {
  LrSchedule s{
      .kind = ScheduleKind::WarmupCosine, .base_lr = 1.0f, .min_lr = 0.1f, .warmup_steps = 10, .total_steps = 110};
  EXPECT_FLOAT_EQ(s.at(0), 1.0f / 11.0f);   // (0 + 1) / (10 + 1)
  EXPECT_FLOAT_EQ(s.at(9), 10.0f / 11.0f);  // last warmup step
  EXPECT_FLOAT_EQ(s.at(10), 1.0f);          // cosine starts at base
  EXPECT_FLOAT_EQ(s.at(60), 0.55f);         // midpoint: (base + min) / 2
  // a quarter in: min + 0.5 (1 + cos(pi/4)) (base - min)
  EXPECT_FLOAT_EQ(s.at(35), static_cast<float>(0.1 + 0.5 * (1 + std::sqrt(0.5)) * 0.9));
  EXPECT_FLOAT_EQ(s.at(110), 0.1f);  // total: min
  EXPECT_FLOAT_EQ(s.at(5000), 0.1f);
  for (int64_t t = 10; t < 110; ++t) EXPECT_GE(s.at(t), s.at(t + 1)) << "not decreasing at " << t;
}

TEST(Schedule, ConstantWithAndWithoutWarmup) {
  LrSchedule c{.kind = ScheduleKind::Constant, .base_lr = 3e-4f};
  EXPECT_EQ(c.at(0), 3e-4f);
  EXPECT_EQ(c.at(123456), 3e-4f);
  LrSchedule w{.kind = ScheduleKind::Constant, .base_lr = 2.0f, .warmup_steps = 3};
  EXPECT_FLOAT_EQ(w.at(0), 0.5f);
  EXPECT_FLOAT_EQ(w.at(2), 1.5f);
  EXPECT_FLOAT_EQ(w.at(3), 2.0f);
  EXPECT_FLOAT_EQ(w.at(1000), 2.0f);
}

TEST(Schedule, InverseSqrtPeaksAtBaseAfterWarmup) {
  LrSchedule s{.kind = ScheduleKind::InverseSqrt, .base_lr = 1.0f, .warmup_steps = 4};
  EXPECT_FLOAT_EQ(s.at(0), 0.25f);  // linear: (step + 1) / W
  EXPECT_FLOAT_EQ(s.at(2), 0.75f);
  EXPECT_FLOAT_EQ(s.at(3), 1.0f);    // peak at step W - 1
  EXPECT_FLOAT_EQ(s.at(15), 0.5f);   // sqrt(W / (step + 1)) = sqrt(4 / 16)
  EXPECT_FLOAT_EQ(s.at(399), 0.1f);  // sqrt(4 / 400)
  for (int64_t t = 0; t < 40; ++t) EXPECT_LE(s.at(t), 1.0f);
}

TEST(Schedule, CosineWithWarmupEqualTotal) {
  LrSchedule s{
      .kind = ScheduleKind::WarmupCosine, .base_lr = 1.0f, .min_lr = 0.0f, .warmup_steps = 5, .total_steps = 5};
  EXPECT_FLOAT_EQ(s.at(4), 5.0f / 6.0f);
  EXPECT_EQ(s.at(5), 0.0f);  // no division by zero
}

TEST(Schedule, ValidationNamesTheValue) {
  using K = ScheduleKind;
  EXPECT_THAT(error_of([] { LrSchedule{.base_lr = -1e-3f}.validate(); }), HasSubstr("-0.001"));
  EXPECT_THAT(error_of([] { LrSchedule{.base_lr = NAN}.validate(); }), HasSubstr("nan"));
  EXPECT_THAT(error_of([] { LrSchedule{.kind = K::WarmupCosine, .base_lr = 1, .min_lr = 2, .total_steps = 9}.at(0); }),
              HasSubstr("min_lr 2"));
  EXPECT_THAT(error_of([] { LrSchedule{.kind = K::WarmupCosine, .warmup_steps = 20, .total_steps = 10}.validate(); }),
              HasSubstr("warmup_steps 20"));
  EXPECT_THAT(error_of([] { LrSchedule{.kind = K::InverseSqrt}.validate(); }), HasSubstr("warmup_steps 0"));
  EXPECT_THAT(error_of([] { LrSchedule{.warmup_steps = -4}.validate(); }), HasSubstr("-4"));
  EXPECT_THAT(error_of([] { LrSchedule{}.at(-1); }), HasSubstr("step -1"));
}

TEST(Schedule, KindNames) {
  for (ScheduleKind k : {ScheduleKind::Constant, ScheduleKind::WarmupCosine, ScheduleKind::InverseSqrt})
    EXPECT_EQ(schedule_kind_from_string(to_string(k)), k);
  EXPECT_THAT(error_of([] { schedule_kind_from_string("linear"); }), HasSubstr("'linear'"));
}

}  // namespace
}  // namespace atto::optim
