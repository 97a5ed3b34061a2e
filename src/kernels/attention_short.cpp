// atto/kernels/attention_short.cpp: attention for short sequences, keys in vector lanes,
// forward and backward.
//
//   attn::short_forward(out, lse, q, k, v, p);     // Tk <= kShortMaxKeys, HS <= kShortMaxHeadSize
//   attn::short_backward(dq, dk, dv, dout, out, lse, q, k, v, p);
//
// One head at a time. With at most 64 keys a query row's scores are at most 4 vectors, so each
// row is done straight from registers: s = scale q K^T + mask (the transposed keys KT[HS, 64]
// packed once per head), softmax, out = sum_j p_j v_j; the backward likewise per query row,
// accumulating dK and dV transposed (dKT[d, j] += q_d dS_j, dVT[d, j] += dO_d P_j) and
// transposing them back at the end. No query tiles, no zero-padded head columns (head size 8
// would pay for 16) and no score matrix in memory: at these sizes that overhead made the flash
// path several times slower (docs/perf-log.md, "attention kernels"). Rows go in groups of
// 4 (2 past 32 keys) that share each key and value load.
// Forward and backward share short_scores, so the backward's exp(S - lse) sees the forward's
// exact scores.

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention_impl.h"
#include "kernels/parallel.h"

#if ATTO_ATTN_SHORT  // AVX-512 builds only (attention_impl.h)
namespace ATTO_KERNELS_NS::attn {

namespace {

struct ShortScratch {
  int64_t ldkt = 0;  // Tk rounded up to 16
  AlignedVector<float> KT, VT, dKT, dVT, kb, pb, tmp;
  ShortScratch(int64_t Tk, int64_t HS) : ldkt(round_up(Tk, W)) {
    KT.resize(HS * ldkt);
    VT.resize(HS * ldkt);
    dKT.resize(HS * ldkt);
    dVT.resize(HS * ldkt);
    kb.resize(ldkt);
    pb.resize(4 * kShortMaxKeys);  // one row of weights per row of a group
    tmp.resize(ldkt * round_up(HS, W));
  }
};

// Keys j < n_vis of row i can be visible (causal), key j is at lane j % 16 of vector j / 16.
int64_t visible_keys(const Problem& p, int64_t i) {
  return p.d.causal ? std::clamp<int64_t>(i + p.off + 1, 0, p.d.Tk) : p.d.Tk;
}

// The rows of one group: G query rows [i0, i0 + G) processed together, so that their
// independent dependency chains (a score is a chain of HS FMAs, then max, exp, sum) overlap and
// each key or value row loaded serves all G. Rows past Tq repeat the last row's inputs and are
// never written (and add nothing to dK, dV).
template <int G>
struct RowGroup {
  int64_t row[G];    // the row each slot reads (clamped to Tq - 1)
  int64_t n_vis[G];  // keys j < n_vis can be visible
  bool valid[G];
  int64_t n_max = 0;  // max n_vis: keys past it are masked in every row
};

template <int G>
RowGroup<G> row_group(const Problem& p, int64_t i0) {
  RowGroup<G> r;
#pragma GCC unroll 4
  for (int g = 0; g < G; g++) {
    r.valid[g] = i0 + g < p.d.Tq;
    r.row[g] = std::min(i0 + g, p.d.Tq - 1);
    r.n_vis[g] = visible_keys(p, r.row[g]);
    r.n_max = std::max(r.n_max, r.n_vis[g]);
  }
  return r;
}

// s[g][v] = scale <q_row(g), k_j> + kb[j] for keys j in vector v < NV, -inf from key n_vis on.
// Each score is one FMA chain over d = 0..HS-1 in order.
template <int NV, int G>
VINLINE void short_scores(vf16 (&s)[G][NV], const float* qh, int64_t ldq, const RowGroup<G>& r, const float* KT,
                          int64_t ldkt, const float* kb, int64_t HS, float scale) {
#pragma GCC unroll 4
  for (int g = 0; g < G; g++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) s[g][v] = vf16{};
  for (int64_t d = 0; d < HS; d++) {
    vf16 kt[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) kt[v] = load(KT + d * ldkt + v * W);
#pragma GCC unroll 4
    for (int g = 0; g < G; g++) {
      const vf16 qd = splat(qh[r.row[g] * ldq + d]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) s[g][v] += qd * kt[v];
    }
  }
  const vf16 iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const vf16 ninf = splat(kNegInf);
#pragma GCC unroll 4
  for (int g = 0; g < G; g++) {
    const vf16 nv = splat(static_cast<float>(r.n_vis[g]));
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) {
      const vf16 x = s[g][v] * scale + load(kb + v * W);
      s[g][v] = iota + static_cast<float>(v * W) >= nv ? ninf : x;
    }
  }
}

// acc[g][e] = sum_{j < n} c[g * ldc + j] * row_j[16 e ..], row_j = rows + j * ld (HS floats,
// masked tail); each row loaded once for the G rows; one FMA chain per output, j in order.
template <int HV, int G>
VINLINE void weighted_rows(vf16 (&acc)[G][HV], const float* c, int64_t ldc, const float* rows, int64_t ld, int64_t n,
                           int64_t HS) {
  const int64_t tail = HS - (HV - 1) * W;  // 1..16
#pragma GCC unroll 4
  for (int g = 0; g < G; g++)
#pragma GCC unroll 4
    for (int e = 0; e < HV; e++) acc[g][e] = vf16{};
  for (int64_t j = 0; j < n; j++) {
    const float* rj = rows + j * ld;
    vf16 x[HV];
#pragma GCC unroll 4
    for (int e = 0; e < HV - 1; e++) x[e] = load(rj + e * W);
    x[HV - 1] = load_part(rj + (HV - 1) * W, tail);
#pragma GCC unroll 4
    for (int g = 0; g < G; g++) {
      const vf16 cj = splat(c[g * ldc + j]);
#pragma GCC unroll 4
      for (int e = 0; e < HV; e++) acc[g][e] += cj * x[e];
    }
  }
}

// Stores acc * mul into the HS floats at dst (+= when accumulate).
template <int HV>
VINLINE void store_row(float* dst, const vf16* acc, float mul, int64_t HS, bool accumulate) {
  const int64_t tail = HS - (HV - 1) * W;
#pragma GCC unroll 4
  for (int e = 0; e < HV; e++) {
    const int64_t n = e < HV - 1 ? W : tail;
    vf16 x = acc[e] * mul;
    if (accumulate) x += load_part(dst + e * W, n);
    store_part(dst + e * W, x, n);
  }
}

// The head's transposed keys (and values, for backward) and key biases.
void short_pack(ShortScratch& w, const Problem& p, const float* k, const float* v, int64_t b, int64_t h) {
  const AttentionDims& d = p.d;
  pack_transposed(w.KT.data(), w.ldkt, k + b * d.Tk * d.ldk + h * d.HS, d.ldk, d.Tk, d.HS, w.ldkt);
  if (v != nullptr) pack_transposed(w.VT.data(), w.ldkt, v + b * d.Tk * d.ldv + h * d.HS, d.ldv, d.Tk, d.HS, w.ldkt);
  key_bias(w.kb.data(), p, b, 0, d.Tk);  // one key tile: p.bk == ldkt here
}

constexpr int64_t kPbStride = kShortMaxKeys;  // floats per row of the weights buffer

// Calls rows.template operator()<NV, HV, G>(i0) for the groups of the head's query rows:
// groups of 4 rows while a row's scores fit in 2 vectors (Tk <= 32), else of 2 (registers);
// NV from the group's widest row (rows of a causal group differ by < 4 keys), HV from HS.
template <int HV, class F>
void short_row_groups_hv(const Problem& p, F& rows) {
  for (int64_t i0 = 0; i0 < p.d.Tq;) {
    const int64_t nv4 = (visible_keys(p, std::min(i0 + 3, p.d.Tq - 1)) + W - 1) / W;
    switch (std::clamp<int64_t>(nv4, 1, 4)) {
      case 1:
        rows.template operator()<1, HV, 4>(i0);
        i0 += 4;
        break;
      case 2:
        rows.template operator()<2, HV, 4>(i0);
        i0 += 4;
        break;
      case 3:
        rows.template operator()<3, HV, 2>(i0);
        i0 += 2;
        break;
      default:
        rows.template operator()<4, HV, 2>(i0);
        i0 += 2;
        break;
    }
  }
}

template <class F>
void short_row_groups(const Problem& p, F&& rows) {
  switch ((p.d.HS + W - 1) / W) {
    case 1: short_row_groups_hv<1>(p, rows); break;
    case 2: short_row_groups_hv<2>(p, rows); break;
    case 3: short_row_groups_hv<3>(p, rows); break;
    default: short_row_groups_hv<4>(p, rows); break;
  }
}

// head(b, h, scratch) for every head, a contiguous run of heads per thread.
template <class F>
void for_each_short_head(const Problem& p, F&& head) {
  const AttentionDims& d = p.d;
  const int64_t heads = d.B * d.NH;
  const bool par = heads > 1 && d.Tq * d.Tk * d.HS * heads >= (1 << 15);
  parallel_region(par, [&](int64_t t, int64_t nt) {
    ShortScratch w(d.Tk, d.HS);
    const auto [h0, h1] = static_range(heads, t, nt);
    for (int64_t bh = h0; bh < h1; bh++) head(bh / d.NH, bh % d.NH, w);
  });
}

// ---- Forward ------------------------------------------------------------------------------------

template <int NV, int HV, int G>
void short_forward_rows(float* out, float* lse, const float* q, const float* v, const Problem& p, int64_t b, int64_t h,
                        int64_t i0, ShortScratch& w) {
  const AttentionDims& d = p.d;
  const RowGroup<G> r = row_group<G>(p, i0);
  vf16 s[G][NV];
  short_scores<NV, G>(s, q + b * d.Tq * d.ldq + h * d.HS, d.ldq, r, w.KT.data(), w.ldkt, w.kb.data(), d.HS, d.scale);
  float inv[G], lrow[G];
#pragma GCC unroll 4
  for (int g = 0; g < G; g++) {
    vf16 mv = s[g][0];
#pragma GCC unroll 4
    for (int u = 1; u < NV; u++) mv = vmax(mv, s[g][u]);
    const float m = hmax(mv);
    float* pb = w.pb.data() + g * kPbStride;
    if (m == kNegInf) {  // nothing visible: weights 0, out = 0, lse = -inf
#pragma GCC unroll 4
      for (int u = 0; u < NV; u++) store(pb + u * W, vf16{});
      inv[g] = 0.0f;
      lrow[g] = kNegInf;
      continue;
    }
    vf16 lsum{};
#pragma GCC unroll 4
    for (int u = 0; u < NV; u++) {
      const vf16 e = vexp(s[g][u] - m);
      store(pb + u * W, e);
      lsum += e;
    }
    const float l = hsum(lsum);
    inv[g] = 1.0f / l;
    lrow[g] = m + std::log(l);
  }
  vf16 acc[G][HV];
  weighted_rows<HV, G>(acc, w.pb.data(), kPbStride, v + b * d.Tk * d.ldv + h * d.HS, d.ldv, r.n_max, d.HS);
#pragma GCC unroll 4
  for (int g = 0; g < G; g++) {
    if (!r.valid[g]) continue;
    store_row<HV>(out + (b * d.Tq + r.row[g]) * d.ldo + h * d.HS, acc[g], inv[g], d.HS, false);
    lse[(b * d.NH + h) * d.Tq + r.row[g]] = lrow[g];
  }
}

// ---- Backward -----------------------------------------------------------------------------------

// A group of query rows: P = exp(S - lse), dP = dO V^T, dS = scale P (dP - D_i);
// dQ_i = sum_j dS_ij k_j, dKT[:, j] += q_i dS_ij, dVT[:, j] += dO_i P_ij (rows in order).
template <int NV, int HV, int G>
void short_backward_rows(float* dq, const float* dout, const float* out, const float* lse, const float* q,
                         const float* k, const Problem& p, int64_t b, int64_t h, int64_t i0, ShortScratch& w) {
  const AttentionDims& d = p.d;
  const RowGroup<G> r = row_group<G>(p, i0);
  const int64_t ld = w.ldkt;
  const float* qh = q + b * d.Tq * d.ldq + h * d.HS;
  const float* gh = dout + b * d.Tq * d.ldo + h * d.HS;
  bool live[G];
  float l[G];
#pragma GCC unroll 4
  for (int g = 0; g < G; g++) {
    l[g] = lse[(b * d.NH + h) * d.Tq + r.row[g]];
    live[g] = r.valid[g] && l[g] != kNegInf;  // a fully masked row gets no gradient
  }
  vf16 s[G][NV], dp[G][NV];
  short_scores<NV, G>(s, qh, d.ldq, r, w.KT.data(), ld, w.kb.data(), d.HS, d.scale);
#pragma GCC unroll 4
  for (int g = 0; g < G; g++)
#pragma GCC unroll 4
    for (int u = 0; u < NV; u++) {
      s[g][u] = live[g] ? vexp(s[g][u] - l[g]) : vf16{};  // P
      dp[g][u] = vf16{};
    }
  for (int64_t e = 0; e < d.HS; e++) {
    vf16 vt[NV];
#pragma GCC unroll 4
    for (int u = 0; u < NV; u++) vt[u] = load(w.VT.data() + e * ld + u * W);
#pragma GCC unroll 4
    for (int g = 0; g < G; g++) {
      const vf16 ge = splat(gh[r.row[g] * d.ldo + e]);
#pragma GCC unroll 4
      for (int u = 0; u < NV; u++) dp[g][u] += ge * vt[u];
    }
  }
  const vf16 sc = splat(d.scale);
#pragma GCC unroll 4
  for (int g = 0; g < G; g++) {
    const int64_t at = r.row[g] * d.ldo;
    const vf16 Di = splat(dot_hs(gh + at, out + b * d.Tq * d.ldo + h * d.HS + at, d.HS));
#pragma GCC unroll 4
    for (int u = 0; u < NV; u++) {
      dp[g][u] = live[g] ? sc * s[g][u] * (dp[g][u] - Di) : vf16{};  // dS
      store(w.pb.data() + g * kPbStride + u * W, dp[g][u]);
    }
  }
  for (int64_t e = 0; e < d.HS; e++) {
    float* dkt = w.dKT.data() + e * ld;
    float* dvt = w.dVT.data() + e * ld;
    vf16 xk[NV], xv[NV];
#pragma GCC unroll 4
    for (int u = 0; u < NV; u++) {
      xk[u] = load(dkt + u * W);
      xv[u] = load(dvt + u * W);
    }
#pragma GCC unroll 4
    for (int g = 0; g < G; g++) {
      if (!live[g]) continue;
      const vf16 qe = splat(qh[r.row[g] * d.ldq + e]), ge = splat(gh[r.row[g] * d.ldo + e]);
#pragma GCC unroll 4
      for (int u = 0; u < NV; u++) {
        xk[u] += qe * dp[g][u];
        xv[u] += ge * s[g][u];
      }
    }
#pragma GCC unroll 4
    for (int u = 0; u < NV; u++) {
      store(dkt + u * W, xk[u]);
      store(dvt + u * W, xv[u]);
    }
  }
  if (dq == nullptr) return;
  vf16 acc[G][HV];
  weighted_rows<HV, G>(acc, w.pb.data(), kPbStride, k + b * d.Tk * d.ldk + h * d.HS, d.ldk, r.n_max, d.HS);
#pragma GCC unroll 4
  for (int g = 0; g < G; g++) {
    if (!r.valid[g]) continue;
    float* dqi = dq + (b * d.Tq + r.row[g]) * d.ldq + h * d.HS;
    if (live[g]) {
      store_row<HV>(dqi, acc[g], 1.0f, d.HS, d.accumulate);
    } else if (!d.accumulate) {
      std::fill(dqi, dqi + d.HS, 0.0f);
    }
  }
}

// dst rows [Tk, HS] (stride ld) (+)= the transpose of src [HS, ldkt].
void short_store_transposed(float* dst, int64_t ld, const float* src, const Problem& p, ShortScratch& w) {
  if (dst == nullptr) return;
  const AttentionDims& d = p.d;
  const int64_t HSp = round_up(d.HS, W);
  for (int64_t j0 = 0; j0 < d.Tk; j0 += W)
    for (int64_t e0 = 0; e0 < d.HS; e0 += W)
      transpose16(w.tmp.data() + j0 * HSp + e0, HSp, src + e0 * w.ldkt + j0, w.ldkt, std::min<int64_t>(W, d.HS - e0),
                  std::min<int64_t>(W, d.Tk - j0));
  add_rows(dst, ld, w.tmp.data(), d.Tk, d.HS, HSp, d.accumulate);
}

}  // namespace

void short_forward(float* out, float* lse, const float* q, const float* k, const float* v, const Problem& p) {
  for_each_short_head(p, [&](int64_t b, int64_t h, ShortScratch& w) {
    short_pack(w, p, k, nullptr, b, h);
    short_row_groups(
        p, [&]<int NV, int HV, int G>(int64_t i0) { short_forward_rows<NV, HV, G>(out, lse, q, v, p, b, h, i0, w); });
  });
}

void short_backward(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                    const float* q, const float* k, const float* v, const Problem& p) {
  const AttentionDims& d = p.d;
  for_each_short_head(p, [&](int64_t b, int64_t h, ShortScratch& w) {
    short_pack(w, p, k, v, b, h);
    std::fill(w.dKT.begin(), w.dKT.end(), 0.0f);
    std::fill(w.dVT.begin(), w.dVT.end(), 0.0f);
    short_row_groups(p, [&]<int NV, int HV, int G>(int64_t i0) {
      short_backward_rows<NV, HV, G>(dq, dout, out, lse, q, k, p, b, h, i0, w);
    });
    const int64_t at = b * d.Tk;
    short_store_transposed(dk != nullptr ? dk + at * d.ldk + h * d.HS : nullptr, d.ldk, w.dKT.data(), p, w);
    short_store_transposed(dv != nullptr ? dv + at * d.ldv + h * d.HS : nullptr, d.ldv, w.dVT.data(), p, w);
  });
}

}  // namespace atto::kernels::attn
#endif  // ATTO_ATTN_SHORT
