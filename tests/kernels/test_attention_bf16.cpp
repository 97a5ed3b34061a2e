// Tests of attention in bf16 (under a BF16 PrecisionScope): the flash tiles (attention_bf16.cpp)
// and, on the AVX512_BF16 backend up to 1024 keys, whole rows (attention_bf16_rows.cpp), on every
// bf16 backend this CPU runs: forward and backward against the naive kernels run on
// the same inputs rounded to bf16 (q, k, v, and dout for the backward), over shapes that take
// the flash path (keys past the short paths' 64, or a head size past 64) with causal and key
// masks, Tq != Tk, fully masked rows, fused q/k/v, padded leading dimensions and partial tiles;
// that the inputs are rounded (inputs already in bf16 give the same bits); that the scope
// routes to it (the bits differ from the fp32 kernel's); the same bits for 1 and 2 threads.
//
// Tolerances (N(0,1) inputs; errors against max|reference| of each tensor): the kernel also
// rounds P (forward and backward) and dS (backward) to bf16, relative steps of 2^-9 that average
// out over the keys: out within 5e-3 of max|out| (measured: 0.8-1.3e-3), gradients within 1e-2
// (1.2-2.9e-3), lse within 2e-5 (1 + |lse|) (its scores are the same bf16 products summed in
// fp32). A wrong element or a missing rescale is O(1) of max; an unrounded operand is caught
// by the bit test, not the tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/kernel_support.h"
#include "kernels/kernels.h"

namespace atto::kernels {
namespace {

using test::expect_bit_identical;
using test::randn;

using test::BackendGuard;

struct Bf16Case {
  int64_t B, NH, Tq, Tk, HS;
  bool causal;
  bool mask;        // scattered masked keys and tail padding, batch 0 wholly masked
  bool fused;       // q, k, v in one [B, T, 3C] buffer (Tq == Tk)
  int64_t pad = 0;  // extra leading-dimension columns when not fused
  std::string name() const {
    return "B=" + std::to_string(B) + " NH=" + std::to_string(NH) + " Tq=" + std::to_string(Tq) +
           " Tk=" + std::to_string(Tk) + " HS=" + std::to_string(HS) + " causal=" + std::to_string(causal) +
           " mask=" + std::to_string(mask) + " fused=" + std::to_string(fused) + " pad=" + std::to_string(pad);
  }
};

const Bf16Case kCases[] = {
    {2, 3, 100, 100, 64, true, false, false, 0},  // (d)-like head, partial second tile
    {2, 2, 200, 200, 24, true, true, false, 5},   // odd head size, masks, padded ld
    {1, 2, 70, 130, 80, false, false, false, 0},  // head size past 64, Tq != Tk
    {1, 2, 70, 130, 48, true, false, false, 3},   // causal with an offset (Tk - Tq)
    {2, 2, 96, 96, 16, true, true, true, 0},      // fused q/k/v, a wholly masked batch
    {1, 1, 9, 300, 32, true, false, false, 0},    // few query rows, many keys
    {2, 1, 20, 20, 72, false, true, false, 0},    // one key tile of 32 (head size past 64)
    {1, 2, 130, 70, 64, true, false, false, 0},   // more queries than keys: the first 60 rows see none
    {1, 2, 40, 600, 64, true, true, false, 0},    // many keys, few query rows
    {1, 1, 20, 1100, 32, true, false, false, 0},  // past 1024 keys: the flash tiles on every backend
};

// Buffers of one case. q, k, v, dout random; out and the gradients written by the kernels.
struct Bf16Data {
  AttentionDims d;
  std::vector<float> qkv, k, v, out, dout, lse, dqkv, dk, dv;
  std::vector<uint8_t> mask;
  Bf16Case c;
  explicit Bf16Data(const Bf16Case& cs) : c(cs) {
    const int64_t C = c.NH * c.HS, ld = c.fused ? 3 * C : C + c.pad;
    d.B = c.B;
    d.NH = c.NH;
    d.Tq = c.Tq;
    d.Tk = c.Tk;
    d.HS = c.HS;
    d.causal = c.causal;
    d.ldq = d.ldk = d.ldv = ld;
    d.ldo = C + c.pad;
    d.accumulate = false;
    qkv = randn(c.B * c.Tq * ld, 11);
    if (!c.fused) {
      k = randn(c.B * c.Tk * ld, 12);
      v = randn(c.B * c.Tk * ld, 13);
    }
    dout = randn(c.B * c.Tq * d.ldo, 14);
    if (c.mask) {
      mask.assign(c.B * c.Tk, 1);
      for (int64_t b = 0; b < c.B; b++)
        for (int64_t j = 0; j < c.Tk; j++)
          if (b == 0 || j % 3 == 1 || j >= c.Tk - 7 * b) mask[b * c.Tk + j] = 0;
      if (c.B == 1) std::fill(mask.begin(), mask.end(), 1);
    }
  }
  const float* q() const { return qkv.data(); }
  const float* kp() const { return c.fused ? qkv.data() + c.NH * c.HS : k.data(); }
  const float* vp() const { return c.fused ? qkv.data() + 2 * c.NH * c.HS : v.data(); }
  const uint8_t* key_mask() const { return mask.empty() ? nullptr : mask.data(); }
  void forward(bool naive) {
    out.assign(c.B * c.Tq * d.ldo, 0.0f);
    lse.assign(c.B * c.NH * c.Tq, 0.0f);
    (naive ? attention_forward_naive : attention_forward)(out.data(), lse.data(), q(), kp(), vp(), key_mask(), d);
  }
  // After forward. The naive backward accumulates, so every gradient starts at zero.
  void backward(bool naive) {
    dqkv.assign(qkv.size(), 0.0f);
    dk.assign(k.size(), 0.0f);
    dv.assign(v.size(), 0.0f);
    const int64_t C = c.NH * c.HS;
    float* dq = dqkv.data();
    float* dkp = c.fused ? dq + C : dk.data();
    float* dvp = c.fused ? dq + 2 * C : dv.data();
    (naive ? attention_backward_naive : attention_backward)(dq, dkp, dvp, dout.data(), out.data(), lse.data(), q(),
                                                            kp(), vp(), key_mask(), d);
  }
  void round_inputs() {
    for (std::vector<float>* x : {&qkv, &k, &v, &dout})
      for (float& e : *x) e = from_bf16(to_bf16(e));
  }
};

// max |got - want| / max |want| (infinities of lse must agree exactly).
double rel_error(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < want.size(); i++) {
    if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << "at " << i;
      continue;
    }
    EXPECT_FALSE(std::isnan(got[i])) << "NaN at " << i;
    err = std::max(err, std::fabs(double(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(double(want[i])));
  }
  return scale > 0 ? err / scale : err;
}

TEST(AttentionBf16, MatchesTheNaiveKernelsOnRoundedInputs) {
  if (test::bf16_backends().empty()) GTEST_SKIP() << "no bf16 on this CPU";
  for (Bf16Backend be : test::bf16_backends()) {
    const BackendGuard guard(be);
    for (const Bf16Case& c : kCases) {
      const std::string what = std::string(bf16_backend_name(be)) + " " + c.name();
      Bf16Data fast(c), ref(c);
      ref.round_inputs();
      ref.forward(true);
      ref.backward(true);
      {
        const PrecisionScope bf16(Precision::BF16);
        fast.forward(false);
        fast.backward(false);
      }
      const double eo = rel_error(fast.out, ref.out), eq = rel_error(fast.dqkv, ref.dqkv);
      EXPECT_LE(eo, 5e-3) << "out " << what;
      for (size_t i = 0; i < ref.lse.size(); i++) {
        if (std::isinf(ref.lse[i])) continue;
        ASSERT_NEAR(fast.lse[i], ref.lse[i], 2e-5 * (1 + std::fabs(ref.lse[i]))) << "lse " << what << " at " << i;
      }
      EXPECT_LE(eq, 1e-2) << "dq " << what;
      double ek = 0, ev = 0;
      if (!c.fused) {
        ek = rel_error(fast.dk, ref.dk);
        ev = rel_error(fast.dv, ref.dv);
        EXPECT_LE(ek, 1e-2) << "dk " << what;
        EXPECT_LE(ev, 1e-2) << "dv " << what;
      }
      std::printf("[ bf16 attn ] %s: out %.1e dq %.1e dk %.1e dv %.1e\n", what.c_str(), eo, eq, ek, ev);
    }
  }
}

TEST(AttentionBf16, RoundsItsInputsAndIsWhatTheScopeRuns) {
  if (test::bf16_backends().empty()) GTEST_SKIP() << "no bf16 on this CPU";
  for (Bf16Backend be : test::bf16_backends()) {
    const BackendGuard guard(be);
    const Bf16Case c = kCases[1];
    Bf16Data raw(c), rounded(c), f32(c);
    rounded.round_inputs();
    {
      const PrecisionScope bf16(Precision::BF16);
      raw.forward(false);
      raw.backward(false);
      rounded.forward(false);
      rounded.backward(false);
    }
    expect_bit_identical(raw.out, rounded.out, "out of raw and rounded inputs");
    expect_bit_identical(raw.dqkv, rounded.dqkv, "dq of raw and rounded inputs");
    expect_bit_identical(raw.dk, rounded.dk, "dk of raw and rounded inputs");
    expect_bit_identical(raw.dv, rounded.dv, "dv of raw and rounded inputs");
    f32.forward(false);
    f32.backward(false);
    EXPECT_NE(f32.out, raw.out) << "the BF16 scope ran the fp32 kernel";
    EXPECT_NE(f32.dk, raw.dk) << "the BF16 scope ran the fp32 backward";
  }
}

TEST(AttentionBf16, SameBitsForOneAndTwoThreads) {
  if (test::bf16_backends().empty()) GTEST_SKIP() << "no bf16 on this CPU";
  for (Bf16Backend be : test::bf16_backends()) {
    const BackendGuard guard(be);
    for (const Bf16Case& c : {kCases[0], kCases[1], kCases[4]}) {
      test::expect_thread_invariant(
          [&] {
            Bf16Data x(c);
            const PrecisionScope bf16(Precision::BF16);
            x.forward(false);
            x.backward(false);
            std::vector<float> all = x.out;
            for (const std::vector<float>* g : {&x.lse, &x.dqkv, &x.dk, &x.dv}) all.insert(all.end(), g->begin(), g->end());
            return all;
          },
          std::string(bf16_backend_name(be)) + " " + c.name());
    }
  }
}

}  // namespace
}  // namespace atto::kernels
