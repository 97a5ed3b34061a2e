// The tape: recording, grad mode, accumulation, buffer reuse, and shape errors.
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "base/error.h"

using namespace atto;
using test::randn;

TEST(Tape, RecordsOnlyWhenAnInputRequiresGrad) {
  tape().clear();
  Tensor a = randn({2, 3}, 1), b = randn({2, 3}, 2);
  Tensor c = add(a, b);
  EXPECT_EQ(tape().size(), 0u);
  EXPECT_FALSE(c.requires_grad());
  a.set_requires_grad(true);
  Tensor d = mul(add(a, b), b);
  EXPECT_EQ(tape().op_names(), (std::vector<std::string>{"add", "mul"}));
  EXPECT_TRUE(d.requires_grad());
  tape().clear();
}

TEST(Tape, NoGradGuardRecordsNothing) {
  tape().clear();
  Tensor a = randn({2, 3}, 1).set_requires_grad(true);
  {
    NoGradGuard ng;
    Tensor y = relu(linear(a, randn({4, 3}, 2)));
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(tape().size(), 0u);
  }
  EXPECT_TRUE(grad_enabled());
}

TEST(Tape, GradientsAccumulateAcrossBackwardCallsAndTapeIsCleared) {
  Tensor w = Tensor::from_vector({3}, {1, 2, 3}).set_requires_grad(true);
  Tensor x = Tensor::from_vector({3}, {4, 5, 6});
  backward(sum(mul(w, x)));
  EXPECT_EQ(tape().size(), 0u);
  EXPECT_EQ(w.grad().to_vector(), (std::vector<float>{4, 5, 6}));
  backward(sum(mul(w, x)));
  EXPECT_EQ(w.grad().to_vector(), (std::vector<float>{8, 10, 12}));
  w.zero_grad();
  EXPECT_EQ(w.grad().to_vector(), (std::vector<float>{0, 0, 0}));
}

TEST(Tape, TensorUsedTwiceGetsBothContributions) {
  Tensor x = Tensor::from_vector({2}, {3, -2}).set_requires_grad(true);
  backward(sum(mul(x, x)));  // d/dx x^2 = 2x
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{6, -4}));
}

// A residual add hands its output's gradient buffer to one operand instead of copying it: the
// other operand must still get a buffer of its own (later contributions to the first must not
// reach it), add(x, x) gets both shares, and a user-held seed is never written.
TEST(Tape, ResidualAddHandsItsGradientToOneOperandOnly) {
  Tensor a = Tensor::from_vector({3}, {1, 2, 3}).set_requires_grad(true);
  Tensor b = Tensor::from_vector({3}, {4, 5, 6}).set_requires_grad(true);
  Tensor sq = mul(a, a);  // recorded first, so its backward runs after the add's: a takes the
  Tensor s = add(a, b);   // add's buffer, then 2a is added into it
  Tensor loss = sum(add(mul(s, Tensor::from_vector({3}, {1, 2, 3})), sq));
  backward(loss);  // d/da = (1, 2, 3) + 2a = (3, 6, 9); d/db = (1, 2, 3)
  EXPECT_EQ(a.grad().to_vector(), (std::vector<float>{3, 6, 9}));
  EXPECT_EQ(b.grad().to_vector(), (std::vector<float>{1, 2, 3}));
  EXPECT_NE(a.grad().data(), b.grad().data());

  Tensor x = Tensor::from_vector({2}, {1, 1}).set_requires_grad(true);
  Tensor seed = Tensor::from_vector({2}, {2, 3});
  backward(add(x, x), seed);
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{4, 6}));
  EXPECT_EQ(seed.to_vector(), (std::vector<float>{2, 3}));
}

// add(x, pos) with pos broadcast over x's rows: pos gets the sum of the rows of the gradient, x
// the gradient itself (its buffer when x has none yet, added onto one it has).
TEST(Tape, RowBroadcastAddSumsRowsForTheSmallOperand) {
  Tensor x = Tensor::from_vector({3, 2}, {1, 2, 3, 4, 5, 6}).set_requires_grad(true);
  Tensor pos = Tensor::from_vector({2}, {10, 20}).set_requires_grad(true);
  Tensor y = add(x, pos);
  EXPECT_EQ(y.to_vector(), (std::vector<float>{11, 22, 13, 24, 15, 26}));
  Tensor sq = mul(x, x);  // recorded before the add: its backward runs after it, onto x's gradient
  backward(add(sum(mul(y, Tensor::from_vector({3, 2}, {1, 2, 3, 4, 5, 6}))), sum(sq)));
  EXPECT_EQ(pos.grad().to_vector(), (std::vector<float>{9, 12}));              // 1+3+5, 2+4+6
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{3, 6, 9, 12, 15, 18}));  // w + 2x
}

TEST(Tape, BackwardNeedsAScalarOrAGradient) {
  Tensor x = randn({3}, 1).set_requires_grad(true);
  Tensor y = scale(x, 2.0f);
  EXPECT_THROW(backward(y), Error);
  Tensor z = scale(x, 2.0f);
  backward(z, Tensor::ones({3}));
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{2, 2, 2}));
  EXPECT_THROW(backward(randn({1}, 2)), Error);  // does not require grad
}

TEST(Tape, SteadyStateStepDoesNotAskTheSystemForMemory) {
  Tensor w1 = randn({16, 8}, 1).set_requires_grad(true), w2 = randn({4, 16}, 2).set_requires_grad(true);
  Tensor x = randn({5, 8}, 3);
  auto step = [&]() {
    Tensor h = gelu(linear(x, w1));
    Tensor loss = cross_entropy(linear(h, w2), {0, 1, 2, 3, -1});
    backward(loss);
  };
  step();
  step();
  const auto before = allocator_stats();
  for (int i = 0; i < 3; ++i) step();
  const auto after = allocator_stats();
#ifndef ATTO_NO_ALLOC_CACHE
  EXPECT_EQ(after.system_allocs, before.system_allocs);
#endif
  EXPECT_GT(after.cache_hits + after.system_allocs, before.cache_hits + before.system_allocs);
}

TEST(OpErrors, ShapesAreNamedInTheMessage) {
  auto msg = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Tensor a = randn({2, 3}, 1), b = randn({4, 5}, 2);
  EXPECT_NE(msg([&] { matmul(a, b); }).find("[2, 3] @ [4, 5]"), std::string::npos);
  EXPECT_NE(msg([&] { add(a, b); }).find("[2, 3] and [4, 5]"), std::string::npos);
  EXPECT_NE(msg([&] { linear(a, b); }).find("[4, 5]"), std::string::npos);
  Rng r(0);
  EXPECT_NE(msg([&] { dropout(a, 1.0f, true, r); }).find("p = 1"), std::string::npos);
  EXPECT_NE(msg([&] { dropout(a, -0.1f, true, r); }).find("-0.1"), std::string::npos);
  AttentionOptions o;
  o.n_heads = 4;
  Tensor q = randn({1, 2, 6}, 3);
  EXPECT_NE(msg([&] { scaled_dot_product_attention(q, q, q, o); }).find("6 is not divisible by n_heads 4"),
            std::string::npos);
  EXPECT_NE(msg([&] { cross_entropy(a, {0, 7}); }).find("target 7 at position 1"), std::string::npos);
  EXPECT_NE(msg([&] { embedding(b, {9}, {1}); }).find("token id 9"), std::string::npos);
  EXPECT_NE(msg([&] { reshape(a, {4, 2}); }).find("[2, 3]"), std::string::npos);
}
