// Tests of gradient-norm clipping and the finite-gradient check (optim/clip.cpp).
#include <gmock/gmock.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "optim/clip.h"
#include "support.h"

namespace atto::optim {
namespace {

using atto::test::error_of;
using ::testing::HasSubstr;

NamedParameter with_grad(const std::string& name, const std::vector<float>& g) {
  Tensor t = Tensor::zeros({static_cast<int64_t>(g.size())});
  t.set_requires_grad(true);
  t.set_grad(Tensor::from_vector(t.shape(), g));
  return {name, t, ParamKind::Weight};
}

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
  clip_grad_norm(params, 2.5f);              // scaled once: [1.5, 2] (up to the 1e-6)
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

// clip_grad_norm's `finite` is grads_finite's answer from the same pass (the trainer's one check
// when it clips): true for finite gradients, even ones whose norm overflows a float, false with
// a NaN or an Inf, and then nothing is scaled.
TEST(ClipGradNorm, ReportsWhetherTheGradientsAreFinite) {
  bool finite = false;
  NamedParameters ok = {with_grad("a", {3, 4})};
  EXPECT_FLOAT_EQ(clip_grad_norm(ok, 1.0f, &finite), 5.0f);
  EXPECT_TRUE(finite);
  EXPECT_NEAR(ok[0].tensor.grad().to_vector()[1], 0.8f, 1e-6);  // scaled
  NamedParameters huge = {with_grad("a", {3e38f, 3e38f})};  // 1.8e77 in double; its root is past FLT_MAX
  finite = false;
  clip_grad_norm(huge, 1.0f, &finite);
  EXPECT_TRUE(finite);
  EXPECT_EQ(finite, grads_finite(huge));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float bad : {nan, std::numeric_limits<float>::infinity()}) {
    NamedParameters params = {with_grad("a", {1, bad}), with_grad("b", {100})};
    finite = true;
    clip_grad_norm(params, 1.0f, &finite);
    EXPECT_FALSE(finite) << bad;
    EXPECT_EQ(params[1].tensor.grad().to_vector()[0], 100.0f) << "scaled despite " << bad;
  }
}

TEST(ClipGradNorm, RejectsBadMaxNorm) {
  NamedParameters params = {with_grad("a", {1})};
  EXPECT_THAT(error_of([&] { clip_grad_norm(params, 0.0f); }), HasSubstr("max_norm 0"));
  EXPECT_THAT(error_of([&] { clip_grad_norm(params, -2.5f); }), HasSubstr("-2.5"));
}

TEST(GradsFinite, TrueForLargeFiniteValues) {
  const float big = std::numeric_limits<float>::max();
  NamedParameters params = {with_grad("a", {big, -big, 1e-30f}), with_grad("b", {0})};
  EXPECT_TRUE(grads_finite(params));
  params.push_back(with_grad("c", {0, 0, -std::numeric_limits<float>::infinity()}));
  EXPECT_FALSE(grads_finite(params));
}

}  // namespace
}  // namespace atto::optim
