// Tests of gradient-norm clipping, the finite-gradient check and the learning-rate schedules.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "optim/clip.h"
#include "optim/schedule.h"
#include "base/error.h"

namespace atto::optim {
namespace {

NamedParameter with_grad(const std::string& name, const std::vector<float>& g) {
  Tensor t = Tensor::zeros({static_cast<int64_t>(g.size())});
  t.set_requires_grad(true);
  t.set_grad(Tensor::from_vector(t.shape(), g));
  return {name, t, ParamKind::Weight};
}

void expect_error_with(const std::function<void()>& fn, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "expected atto::Error mentioning " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// ---- clipping ------------------------------------------------------------------------------

TEST(ClipGradNorm, ScalesToMaxNorm) {
  // grads [3, 4] and [12]: global norm sqrt(9 + 16 + 144) = 13.
  NamedParameters params = {with_grad("a", {3, 4}), with_grad("b", {12})};
  EXPECT_DOUBLE_EQ(grad_norm(params), 13.0);
  const float norm = clip_grad_norm(params, 1.0f);
  EXPECT_FLOAT_EQ(norm, 13.0f);
  // After clipping the norm is max_norm * 13 / (13 + 1e-6), i.e. 1 to float precision.
  EXPECT_NEAR(grad_norm(params), 1.0, 1e-6);
  const float coef = 1.0f / (13.0f + 1e-6f);
  EXPECT_EQ(params[0].tensor.grad().to_vector(), (std::vector<float>{3 * coef, 4 * coef}));
  EXPECT_EQ(params[1].tensor.grad().to_vector(), (std::vector<float>{12 * coef}));
}

TEST(ClipGradNorm, LeavesSmallGradientsAlone) {
  NamedParameters params = {with_grad("a", {0.3f, -0.4f})};  // norm 0.5
  const float norm = clip_grad_norm(params, 1.0f);
  EXPECT_FLOAT_EQ(norm, 0.5f);
  EXPECT_EQ(params[0].tensor.grad().to_vector(), (std::vector<float>{0.3f, -0.4f}));
}

TEST(ClipGradNorm, CountsTiedTensorsOnceAndSkipsMissingGrads) {
  NamedParameter a = with_grad("a", {3, 4});
  NamedParameter tied{"tied", a.tensor, ParamKind::Weight};
  NamedParameter nograd{"n", Tensor::ones({5}), ParamKind::Bias};
  NamedParameters params = {a, tied, nograd};
  EXPECT_DOUBLE_EQ(grad_norm(params), 5.0);  // not sqrt(50)
  clip_grad_norm(params, 2.5f);  // scaled once: [1.5, 2] (up to the 1e-6)
  EXPECT_NEAR(a.tensor.grad().to_vector()[0], 1.5f, 1e-6f);
  EXPECT_FALSE(nograd.tensor.grad().defined());
}

TEST(ClipGradNorm, GroupsOverloadMatchesFlatList) {
  std::vector<ParamGroup> groups(2);
  groups[0].params = {with_grad("a", {1, 2})};
  groups[1].params = {with_grad("b", {2})};
  EXPECT_DOUBLE_EQ(grad_norm(groups), 3.0);
  EXPECT_FLOAT_EQ(clip_grad_norm(groups, 1.5f), 3.0f);
  EXPECT_NEAR(grad_norm(groups), 1.5, 1e-6);
}

TEST(ClipGradNorm, NonFiniteNormLeavesGradsAndIsReported) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  NamedParameters params = {with_grad("a", {1, nan}), with_grad("b", {100})};
  EXPECT_TRUE(std::isnan(clip_grad_norm(params, 1.0f)));
  EXPECT_EQ(params[1].tensor.grad().to_vector()[0], 100.0f);
  EXPECT_FALSE(grads_finite(params));
  NamedParameters inf = {with_grad("a", {std::numeric_limits<float>::infinity()})};
  EXPECT_TRUE(std::isinf(clip_grad_norm(inf, 1.0f)));
  EXPECT_FALSE(grads_finite(inf));
}

TEST(ClipGradNorm, RejectsBadMaxNorm) {
  NamedParameters params = {with_grad("a", {1})};
  expect_error_with([&] { clip_grad_norm(params, 0.0f); }, "max_norm 0");
  expect_error_with([&] { clip_grad_norm(params, -2.5f); }, "-2.5");
}

TEST(GradsFinite, TrueForLargeFiniteValues) {
  const float big = std::numeric_limits<float>::max();
  NamedParameters params = {with_grad("a", {big, -big, 1e-30f}), with_grad("b", {0})};
  EXPECT_TRUE(grads_finite(params));
  params.push_back(with_grad("c", {0, 0, -std::numeric_limits<float>::infinity()}));
  EXPECT_FALSE(grads_finite(params));
}

// ---- schedules -----------------------------------------------------------------------------

TEST(Schedule, WarmupCosineKeySteps) {
  LrSchedule s{.kind = ScheduleKind::WarmupCosine, .base_lr = 1.0f, .min_lr = 0.1f,
               .warmup_steps = 10, .total_steps = 110};
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
  EXPECT_FLOAT_EQ(s.at(3), 1.0f);   // peak at step W - 1
  EXPECT_FLOAT_EQ(s.at(15), 0.5f);  // sqrt(W / (step + 1)) = sqrt(4 / 16)
  EXPECT_FLOAT_EQ(s.at(399), 0.1f); // sqrt(4 / 400)
  for (int64_t t = 0; t < 40; ++t) EXPECT_LE(s.at(t), 1.0f);
}

TEST(Schedule, CosineWithWarmupEqualTotal) {
  LrSchedule s{.kind = ScheduleKind::WarmupCosine, .base_lr = 1.0f, .min_lr = 0.0f,
               .warmup_steps = 5, .total_steps = 5};
  EXPECT_FLOAT_EQ(s.at(4), 5.0f / 6.0f);
  EXPECT_EQ(s.at(5), 0.0f);  // no division by zero
}

TEST(Schedule, ValidationNamesTheValue) {
  using K = ScheduleKind;
  expect_error_with([] { LrSchedule{.base_lr = -1e-3f}.validate(); }, "-0.001");
  expect_error_with([] { LrSchedule{.base_lr = NAN}.validate(); }, "nan");
  expect_error_with([] {
    LrSchedule{.kind = K::WarmupCosine, .base_lr = 1, .min_lr = 2, .total_steps = 9}.at(0);
  }, "min_lr 2");
  expect_error_with([] {
    LrSchedule{.kind = K::WarmupCosine, .warmup_steps = 20, .total_steps = 10}.validate();
  }, "warmup_steps 20");
  expect_error_with([] { LrSchedule{.kind = K::InverseSqrt}.validate(); }, "warmup_steps 0");
  expect_error_with([] { LrSchedule{.warmup_steps = -4}.validate(); }, "-4");
  expect_error_with([] { LrSchedule{}.at(-1); }, "step -1");
}

TEST(Schedule, KindNames) {
  for (ScheduleKind k :
       {ScheduleKind::Constant, ScheduleKind::WarmupCosine, ScheduleKind::InverseSqrt})
    EXPECT_EQ(schedule_kind_from_string(to_string(k)), k);
  expect_error_with([] { schedule_kind_from_string("linear"); }, "'linear'");
}

}  // namespace
}  // namespace atto::optim
