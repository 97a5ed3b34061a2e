// atto/kernels/attention_decode.cpp: attention for a few query rows (decoding), forward only.
//
//   attn::decode_forward(out, lse, q, k, v, p);   // Tq <= kDecodeMaxRows (attention_impl.h)
//
// One new token per step: packing 64-row query tiles and transposed key tiles would be mostly
// padding. Each (b, h, row) is done directly on the strided q, k, v (the KV cache): scores
// s_j = scale <q, k_j> for the visible keys, m = max, p_j = exp(s_j - m), l = sum p (16-lane
// sums, fixed tree), out = (sum_j p_j v_j) / l. A row's result does not depend on how many rows
// come with it. There is no decode backward: choose_path sends a backward of so few rows to the
// short or the flash path.

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention_impl.h"
#include "kernels/parallel.h"

namespace ATTO_KERNELS_NS::attn {

namespace {

// Row i of head (b, h); `s` holds Tk floats (rounded up to 16).
void forward_row(float* out, float* lse, const float* q, const float* k, const float* v, const Problem& p, int64_t b,
                 int64_t h, int64_t i, float* s) {
  const AttentionDims& d = p.d;
  const float* qi = q + (b * d.Tq + i) * d.ldq + h * d.HS;
  const float* kb = k + b * d.Tk * d.ldk + h * d.HS;
  const float* vb = v + b * d.Tk * d.ldv + h * d.HS;
  const uint8_t* mask = p.key_mask != nullptr ? p.key_mask + b * d.Tk : nullptr;
  // Keys j < n can be visible; masked ones score -inf.
  const int64_t n = d.causal ? std::clamp<int64_t>(i + p.off + 1, 0, d.Tk) : d.Tk;
  float m = kNegInf;
  for (int64_t j = 0; j < n; j++) {
    s[j] = mask != nullptr && mask[j] == 0 ? kNegInf : dot_hs(qi, kb + j * d.ldk, d.HS) * d.scale;
    m = std::max(m, s[j]);
  }
  float* o = out + (b * d.Tq + i) * d.ldo + h * d.HS;
  float* row_lse = lse + (b * d.NH + h) * d.Tq + i;
  if (m == kNegInf) {  // nothing visible: out = 0, lse = -inf
    std::fill(o, o + d.HS, 0.0f);
    *row_lse = kNegInf;
    return;
  }
  const int64_t nv = round_up(n, W);
  std::fill(s + n, s + nv, kNegInf);  // exp gives exact zeros there
  const float l = row_exp_sum(s, nv, m);
  const float inv = 1.0f / l;
  // out = sum_j p_j v_j, 64 columns (4 * kParts native vectors) at a time: each column one chain
  // over j in order, so the same bits at every width.
  constexpr int kV = 4 * kParts;
  for (int64_t e0 = 0; e0 < d.HS; e0 += 4 * W) {
    const int64_t ne = std::min<int64_t>(4 * W, d.HS - e0);
    vn acc[kV] = {};
    for (int64_t j = 0; j < n; j++) {
      if (s[j] == 0.0f) continue;  // masked (or underflowed) keys add nothing
      const vn pj = vsplat<vn>(s[j]);
      const float* vj = vb + j * d.ldv + e0;
      for (int c = 0; c < kV; c++)
        if (c * WN < ne) acc[c] += pj * loadn_upto(vj + c * WN, ne - c * WN);
    }
    for (int c = 0; c < kV; c++)
      if (c * WN < ne) storen_upto(o + e0 + c * WN, acc[c] * inv, ne - c * WN);
  }
  *row_lse = m + std::log(l);
}

}  // namespace

void decode_forward(float* out, float* lse, const float* q, const float* k, const float* v, const Problem& p) {
  const AttentionDims& d = p.d;
  const int64_t units = d.B * d.NH * d.Tq;
  const bool par = units > 1 && d.Tq * d.Tk * d.HS * d.B * d.NH >= (1 << 16);
  parallel_region(par, [&](int64_t t, int64_t nt) {
    thread_local AlignedVector<float> s;  // scores; reused across calls (no per-token allocation)
    if (static_cast<int64_t>(s.size()) < round_up(d.Tk, W)) s.resize(round_up(d.Tk, W));
    const auto [u0, u1] = static_range(units, t, nt);
    for (int64_t u = u0; u < u1; u++) {
      const int64_t bh = u / d.Tq;
      forward_row(out, lse, q, k, v, p, bh / d.NH, bh % d.NH, u % d.Tq, s.data());
    }
  });
}

}  // namespace atto::kernels::attn
