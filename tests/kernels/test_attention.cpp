// Tests of attention: the fused kernels against the naive ones (causal, key mask, both,
// Tq != Tk, fully masked rows, q/k/v inside one [B, T, 3C] buffer, padded leading dimensions,
// HS in {1, 8, 16, 64} and others, lengths across tile boundaries and across the short-sequence
// paths' bounds (Tk <= 64 with HS <= 16, or with HS <= 64)), accumulation, nullptr gradients,
// bit-identical results for 1 and 2 threads, attention_probs, the naive forward against a
// direct double-precision softmax, and central differences of the naive backward.
//
// Tolerances (N(0,1) inputs): out 2e-5, lse 2e-5 (1 + |lse|), gradients 1e-4 (1 + |g|).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/kernel_support.h"
#include "kernels/kernels.h"

namespace atto::kernels {
namespace {

using test::expect_bit_identical;
using test::expect_close;
using test::expect_matches_central_differences;
using test::randn;
using test::ThreadGuard;

enum class Mask { kNone, kPadding, kOneBatchAllMasked };

struct Case {
  int64_t B, NH, Tq, Tk, HS;
  bool causal;
  Mask mask;
  bool fused;       // q, k, v (and dq, dk, dv) are column blocks of one [B, T, 3C] buffer
  int64_t pad = 0;  // extra leading-dimension columns when not fused

  std::string name() const {
    return "B=" + std::to_string(B) + " NH=" + std::to_string(NH) + " Tq=" + std::to_string(Tq) +
           " Tk=" + std::to_string(Tk) + " HS=" + std::to_string(HS) + " causal=" + std::to_string(causal) +
           " mask=" + std::to_string(int(mask)) + " fused=" + std::to_string(fused) + " pad=" + std::to_string(pad);
  }
};

// Buffers of one case; gradients start non-zero (backward accumulates).
struct Data {
  AttentionDims d;
  std::vector<float> qb, kb, vb, ob, dob, lse;  // with fused, kb and vb are unused
  std::vector<float> dqb, dkb, dvb;
  std::vector<uint8_t> mask;
  const float *q = nullptr, *k = nullptr, *v = nullptr;
  float *dq = nullptr, *dk = nullptr, *dv = nullptr;
  const uint8_t* key_mask = nullptr;
};

Data make_data(const Case& c, uint32_t seed = 1) {
  Data x;
  const int64_t C = c.NH * c.HS;
  x.d.B = c.B;
  x.d.NH = c.NH;
  x.d.Tq = c.Tq;
  x.d.Tk = c.Tk;
  x.d.HS = c.HS;
  x.d.causal = c.causal;
  if (c.fused) {  // requires Tq == Tk
    x.d.ldq = x.d.ldk = x.d.ldv = 3 * C;
    x.qb = randn(c.B * c.Tq * 3 * C, seed);
    x.dqb = randn(c.B * c.Tq * 3 * C, seed + 1);
    x.q = x.qb.data();
    x.k = x.q + C;
    x.v = x.q + 2 * C;
    x.dq = x.dqb.data();
    x.dk = x.dq + C;
    x.dv = x.dq + 2 * C;
  } else {
    x.d.ldq = x.d.ldk = x.d.ldv = C + c.pad;
    x.qb = randn(c.B * c.Tq * (C + c.pad), seed);
    x.kb = randn(c.B * c.Tk * (C + c.pad), seed + 2);
    x.vb = randn(c.B * c.Tk * (C + c.pad), seed + 3);
    x.dqb = randn(x.qb.size(), seed + 4);
    x.dkb = randn(x.kb.size(), seed + 5);
    x.dvb = randn(x.vb.size(), seed + 6);
    x.q = x.qb.data();
    x.k = x.kb.data();
    x.v = x.vb.data();
    x.dq = x.dqb.data();
    x.dk = x.dkb.data();
    x.dv = x.dvb.data();
  }
  x.d.ldo = C + c.pad;
  x.ob.assign(c.B * c.Tq * x.d.ldo, 7.0f);  // pad columns must stay 7
  x.dob = randn(x.ob.size(), seed + 7);
  x.lse.assign(c.B * c.NH * c.Tq, 0.0f);
  if (c.mask != Mask::kNone) {
    x.mask.assign(c.B * c.Tk, 1);
    for (int64_t b = 0; b < c.B; b++)
      for (int64_t j = 0; j < c.Tk; j++) {
        if (c.mask == Mask::kOneBatchAllMasked && b == 0) x.mask[b * c.Tk + j] = 0;
        if (j % 3 == 1 || j >= c.Tk - b) x.mask[b * c.Tk + j] = 0;  // scattered + tail padding
      }
    x.key_mask = x.mask.data();
  }
  return x;
}

void run_forward(Data& x, bool naive) {
  (naive ? attention_forward_naive : attention_forward)(x.ob.data(), x.lse.data(), x.q, x.k, x.v, x.key_mask, x.d);
}

void run_backward(Data& x, bool naive) {
  (naive ? attention_backward_naive : attention_backward)(x.dq, x.dk, x.dv, x.dob.data(), x.ob.data(), x.lse.data(),
                                                          x.q, x.k, x.v, x.key_mask, x.d);
}

void expect_fast_matches_naive(const Case& c) {
  Data f = make_data(c), n = make_data(c);
  run_forward(f, false);
  run_forward(n, true);
  expect_close(f.ob, n.ob, 0, 2e-5, "out " + c.name());
  expect_close(f.lse, n.lse, 2e-5, 2e-5, "lse " + c.name());
  run_backward(f, false);
  run_backward(n, true);
  expect_close(f.dqb, n.dqb, 1e-4, 1e-4, "dq " + c.name());
  expect_close(f.dkb, n.dkb, 1e-4, 1e-4, "dk " + c.name());
  expect_close(f.dvb, n.dvb, 1e-4, 1e-4, "dv " + c.name());
}

TEST(KernelAttention, FastMatchesNaiveSweep) {
  for (int64_t HS : {1, 8, 16, 64})
    for (int64_t T : {1, 7, 64, 65, 130})
      for (bool causal : {false, true})
        for (Mask mask : {Mask::kNone, Mask::kPadding}) {
          if (HS == 64 && T == 130 && mask == Mask::kNone) continue;  // keep the sweep short
          expect_fast_matches_naive({2, 2, T, T, HS, causal, mask, T % 2 == 1, 0});
        }
}

// accumulate = false (what the autograd op uses for new gradient buffers): every element of the
// q, k, v blocks is written, equal bit for bit to accumulating into zeros; pad columns untouched.
TEST(KernelAttention, OverwriteEqualsAccumulateIntoZeros) {
  const Case cases[] = {
      {2, 3, 16, 16, 8, true, Mask::kNone, true, 0},  // fused qkv, one short key tile
      {2, 2, 130, 130, 16, true, Mask::kPadding, true, 0},
      {2, 3, 5, 130, 8, true, Mask::kPadding, false, 3},  // separate buffers, padded ld
      {3, 1, 40, 129, 20, false, Mask::kOneBatchAllMasked, false, 2},
      {3, 2, 40, 50, 20, true, Mask::kOneBatchAllMasked, false, 1},  // short path, dead rows
  };
  for (const Case& c : cases) {
    Data zero = make_data(c), over = make_data(c);
    run_forward(zero, false);
    run_forward(over, false);
    const int64_t C = c.NH * c.HS;
    // Zero (resp. NaN) exactly the q/k/v columns, leaving any pad columns as they are.
    auto fill_blocks = [&](Data& x, float value) {
      const int64_t ld = x.d.ldq;
      auto fill = [&](std::vector<float>& buf, int64_t T, int64_t col0, int64_t ncol) {
        for (int64_t r = 0; r < c.B * T; r++)
          for (int64_t e = 0; e < ncol; e++) buf[r * ld + col0 + e] = value;
      };
      if (c.fused) {
        fill(x.dqb, c.Tq, 0, 3 * C);
      } else {
        fill(x.dqb, c.Tq, 0, C);
        fill(x.dkb, c.Tk, 0, C);
        fill(x.dvb, c.Tk, 0, C);
      }
    };
    fill_blocks(zero, 0.0f);
    fill_blocks(over, NAN);
    run_backward(zero, false);
    over.d.accumulate = false;
    run_backward(over, false);
    expect_bit_identical(over.dqb, zero.dqb, "dq " + c.name());
    expect_bit_identical(over.dkb, zero.dkb, "dk " + c.name());
    expect_bit_identical(over.dvb, zero.dvb, "dv " + c.name());
  }
}

TEST(KernelAttention, FastMatchesNaiveTqNotTkAndPaddedLd) {
  const Case cases[] = {
      {2, 3, 1, 67, 16, true, Mask::kNone, false, 5},     // decoding: one query, many keys
      {2, 3, 5, 130, 8, true, Mask::kPadding, false, 3},  // bottom-right causal, masked
      {1, 2, 70, 9, 24, true, Mask::kNone, false, 1},     // Tq > Tk: first rows see nothing
      {2, 2, 70, 9, 24, false, Mask::kPadding, false, 0},
      {3, 1, 40, 129, 20, false, Mask::kOneBatchAllMasked, false, 2},
      {2, 2, 65, 65, 32, true, Mask::kOneBatchAllMasked, true, 0},
      // Short path (Tk <= 64, HS <= 64): head sizes of 3 vectors with a tail, 4 vectors.
      {2, 2, 33, 33, 40, true, Mask::kPadding, true, 0},
      {1, 3, 20, 50, 48, false, Mask::kPadding, false, 2},
      {2, 1, 12, 64, 64, true, Mask::kNone, false, 1},
      {1, 1, 10, 10, 65, true, Mask::kNone, false, 0},  // HS past 64: tiled
      // Tiny path (Tq > 4, Tk <= 64, HS <= 16: blocks of 16 query rows in vector lanes).
      {3, 4, 16, 16, 16, true, Mask::kPadding, true, 0},
      {2, 2, 9, 13, 5, true, Mask::kPadding, false, 3},   // Tq < Tk: bottom-right causal
      {2, 3, 16, 3, 12, true, Mask::kPadding, false, 1},  // Tq > Tk: first rows see nothing
      {2, 2, 5, 16, 8, false, Mask::kOneBatchAllMasked, false, 2},
      {1, 2, 11, 11, 1, false, Mask::kNone, true, 0},
      {2, 2, 40, 40, 16, true, Mask::kPadding, true, 0},            // 3 query blocks, 3 key blocks
      {2, 3, 20, 50, 8, true, Mask::kPadding, false, 1},            // Tq < Tk, causal, key blocks of 2
      {2, 2, 33, 7, 12, true, Mask::kOneBatchAllMasked, false, 0},  // whole dead blocks
      {1, 2, 64, 64, 16, false, Mask::kNone, false, 2},
  };
  for (const Case& c : cases) expect_fast_matches_naive(c);
}

// Up to 4 query rows take the direct (decoding) path: widths with and without a 16-lane tail
// and past 64 columns, keys past one tile, masks, rows that see nothing, padded ld.
TEST(KernelAttention, FewQueryRowsMatchNaive) {
  const Case cases[] = {
      {1, 6, 1, 190, 64, true, Mask::kNone, false, 0},     // (d) decoding step
      {2, 3, 1, 200, 20, true, Mask::kPadding, false, 3},  // cross-attention step, tail lanes
      {2, 2, 4, 130, 80, true, Mask::kOneBatchAllMasked, false, 1},
      {1, 2, 3, 2, 8, true, Mask::kNone, false, 0},  // first row sees nothing
      {2, 1, 2, 70, 1, false, Mask::kPadding, false, 0},
      {3, 2, 4, 4, 16, true, Mask::kPadding, true, 0},  // fused qkv
  };
  for (const Case& c : cases) expect_fast_matches_naive(c);
}

TEST(KernelAttention, FullyMaskedRowsGiveZeroOutInfLseNoGradient) {
  for (bool naive : {false, true}) {
    // Batch 0 fully masked; with Tq > Tk and causal, rows i < Tq - Tk see no key either.
    const Case c{2, 2, 12, 5, 8, true, Mask::kOneBatchAllMasked, false, 0};
    Data x = make_data(c);
    const std::vector<float> dq0 = x.dqb, dk0 = x.dkb, dv0 = x.dvb;
    run_forward(x, naive);
    run_backward(x, naive);
    const int64_t C = c.NH * c.HS;
    for (int64_t b = 0; b < c.B; b++)
      for (int64_t h = 0; h < c.NH; h++)
        for (int64_t i = 0; i < c.Tq; i++) {
          const bool dead = b == 0 || i < c.Tq - c.Tk;
          const float l = x.lse[(b * c.NH + h) * c.Tq + i];
          if (!dead) {
            EXPECT_TRUE(std::isfinite(l));
            continue;
          }
          EXPECT_EQ(l, -INFINITY) << "naive=" << naive << " b=" << b << " i=" << i;
          for (int64_t e = 0; e < c.HS; e++) {
            const int64_t at = (b * c.Tq + i) * C + h * c.HS + e;
            EXPECT_EQ(x.ob[at], 0.0f);
            EXPECT_EQ(x.dqb[at], dq0[at]);  // no gradient to q of a dead row
          }
        }
    for (int64_t i = 0; i < c.Tk * C; i++) {  // batch 0's keys get no gradient
      EXPECT_EQ(x.dkb[i], dk0[i]);
      EXPECT_EQ(x.dvb[i], dv0[i]);
    }
    for (float g : x.dqb) ASSERT_FALSE(std::isnan(g));
    for (float g : x.dkb) ASSERT_FALSE(std::isnan(g));
  }
}

TEST(KernelAttention, BackwardAccumulatesAndSkipsNull) {
  for (bool naive : {false, true}) {
    const Case c{1, 2, 33, 33, 8, true, Mask::kPadding, false, 0};
    Data x = make_data(c);
    run_forward(x, naive);
    std::fill(x.dqb.begin(), x.dqb.end(), 0.0f);
    std::fill(x.dkb.begin(), x.dkb.end(), 0.0f);
    std::fill(x.dvb.begin(), x.dvb.end(), 0.0f);
    run_backward(x, naive);
    const std::vector<float> dq1 = x.dqb, dk1 = x.dkb, dv1 = x.dvb;
    run_backward(x, naive);
    for (size_t i = 0; i < dq1.size(); i++) ASSERT_NEAR(x.dqb[i], 2 * dq1[i], 1e-6 * (1 + std::fabs(dq1[i])));
    for (size_t i = 0; i < dk1.size(); i++) ASSERT_NEAR(x.dkb[i], 2 * dk1[i], 1e-6 * (1 + std::fabs(dk1[i])));
    for (size_t i = 0; i < dv1.size(); i++) ASSERT_NEAR(x.dvb[i], 2 * dv1[i], 1e-6 * (1 + std::fabs(dv1[i])));
    // Only dk wanted.
    std::vector<float> dk(dk1.size(), 0.0f);
    (naive ? attention_backward_naive : attention_backward)(nullptr, dk.data(), nullptr, x.dob.data(), x.ob.data(),
                                                            x.lse.data(), x.q, x.k, x.v, x.key_mask, x.d);
    EXPECT_EQ(dk, dk1) << "naive=" << naive;
  }
}

TEST(KernelAttention, BitIdenticalForOneAndTwoThreads) {
  ThreadGuard guard;
  const Case cases[] = {
      {2, 3, 130, 130, 16, true, Mask::kPadding, true, 0},
      {1, 4, 67, 200, 64, false, Mask::kNone, false, 3},
      {2, 6, 1, 250, 64, true, Mask::kPadding, false, 0},  // decoding path, split over threads
      {16, 4, 16, 16, 8, true, Mask::kNone, true, 0},      // short path, heads over threads
  };
  for (const Case& c : cases) {
    Data one = make_data(c), two = make_data(c);
    set_num_threads(1);
    run_forward(one, false);
    run_backward(one, false);
    set_num_threads(2);
    run_forward(two, false);
    run_backward(two, false);
    expect_bit_identical(one.ob, two.ob, c.name());
    expect_bit_identical(one.lse, two.lse, c.name());
    expect_bit_identical(one.dqb, two.dqb, c.name());
    expect_bit_identical(one.dkb, two.dkb, c.name());
    expect_bit_identical(one.dvb, two.dvb, c.name());
  }
}

// ---- attention_probs and the naive forward against a direct softmax --------------------------

TEST(KernelAttention, ProbsRowsSumToOneMaskedZeroAndMatchNaive) {
  const Case c{2, 2, 9, 11, 8, true, Mask::kOneBatchAllMasked, false, 2};
  Data x = make_data(c);
  std::vector<float> probs(c.B * c.NH * c.Tq * c.Tk, -1.0f);
  attention_probs(probs.data(), x.q, x.k, x.key_mask, x.d);
  run_forward(x, true);
  const int64_t C = c.NH * c.HS, off = c.Tk - c.Tq;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.HS));
  for (int64_t b = 0; b < c.B; b++)
    for (int64_t h = 0; h < c.NH; h++)
      for (int64_t i = 0; i < c.Tq; i++) {
        const float* p = probs.data() + ((b * c.NH + h) * c.Tq + i) * c.Tk;
        // Direct: scores in double, softmax over the unmasked keys.
        std::vector<double> s(c.Tk);
        std::vector<bool> vis(c.Tk);
        double m = -INFINITY;
        for (int64_t j = 0; j < c.Tk; j++) {
          vis[j] = j <= i + off && x.mask[b * c.Tk + j] != 0;
          double dot = 0;
          for (int64_t e = 0; e < c.HS; e++)
            dot += static_cast<double>(x.q[(b * c.Tq + i) * x.d.ldq + h * c.HS + e]) *
                   x.k[(b * c.Tk + j) * x.d.ldk + h * c.HS + e];
          s[j] = dot * scale;
          if (vis[j]) m = std::max(m, s[j]);
        }
        double z = 0;
        for (int64_t j = 0; j < c.Tk; j++) z += vis[j] ? std::exp(s[j] - m) : 0.0;
        double row = 0;
        for (int64_t j = 0; j < c.Tk; j++) {
          if (!vis[j]) {
            ASSERT_EQ(p[j], 0.0f) << "masked entry b=" << b << " i=" << i << " j=" << j;
            continue;
          }
          ASSERT_NEAR(p[j], std::exp(s[j] - m) / z, 1e-6);
          row += p[j];
        }
        if (b == 0) {
          EXPECT_EQ(row, 0.0);  // every key masked
          continue;
        }
        EXPECT_NEAR(row, 1.0, 1e-6);
        EXPECT_NEAR(x.lse[(b * c.NH + h) * c.Tq + i], m + std::log(z), 1e-5);
        for (int64_t e = 0; e < c.HS; e++) {  // naive out = P V
          double o = 0;
          for (int64_t j = 0; j < c.Tk; j++)
            o += vis[j] ? std::exp(s[j] - m) / z * x.v[(b * c.Tk + j) * x.d.ldv + h * c.HS + e] : 0.0;
          EXPECT_NEAR(x.ob[(b * c.Tq + i) * x.d.ldo + h * c.HS + e], o, 1e-5);
        }
      }
  (void)C;
}

// Central differences of L = sum(out * dout) through the naive forward (loss in double).
TEST(KernelAttention, NaiveBackwardMatchesCentralDifferences) {
  const Case c{2, 1, 4, 5, 3, true, Mask::kPadding, false, 1};
  Data x = make_data(c, 3);
  auto loss = [&]() {
    std::vector<float> out(x.ob.size(), 0.0f), lse(x.lse.size());
    attention_forward_naive(out.data(), lse.data(), x.q, x.k, x.v, x.key_mask, x.d);
    double l = 0;
    for (size_t i = 0; i < out.size(); i++) l += static_cast<double>(out[i]) * x.dob[i];
    return l;
  };
  run_forward(x, true);
  std::fill(x.dqb.begin(), x.dqb.end(), 0.0f);
  std::fill(x.dkb.begin(), x.dkb.end(), 0.0f);
  std::fill(x.dvb.begin(), x.dvb.end(), 0.0f);
  run_backward(x, true);
  expect_matches_central_differences(x.qb, x.dqb, loss, "dq");
  expect_matches_central_differences(x.kb, x.dkb, loss, "dk");
  expect_matches_central_differences(x.vb, x.dvb, loss, "dv");
}

}  // namespace
}  // namespace atto::kernels
