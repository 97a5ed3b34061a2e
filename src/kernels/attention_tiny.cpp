// atto/kernels/attention_tiny.cpp: attention for tiny heads, query rows in vector lanes,
// forward and backward.
//
//   attn::tiny_forward(out, lse, q, k, v, p);   // Tk <= kTinyMaxKeys, HS <= kTinyMaxHeadSize (16)
//   attn::tiny_backward(dq, dk, dv, dout, out, lse, q, k, v, p);
//
// Lanes hold query rows instead of keys: a block of WN query rows (the native width: 16 on
// AVX-512, 8 on AVX2, 4 on ARM64) is one vector, s_j (lane i = row i of the block) = scale <q_i, k_j> + mask for key j, and the softmax over keys runs
// elementwise across the key vectors, with no horizontal max or sum per row and no half-empty
// vectors at head size 8 (the short path's keys-in-lanes layout pays for both). The backward
// transposes dS and P (WN x WN blocks, in registers) to accumulate dK and dV over the query
// blocks. Every lane sees the same operations in the same order at every width (a block's keys
// past its last row's causal limit are -inf for all its rows: exact zeros), so the results have
// the same bits at every level. Head sizes 8 and 16 are compile-time constants (HSC: fully unrolled loops over the
// head columns). Forward and backward share tiny_scores, so the backward's exp(S - lse) sees
// the forward's exact scores.

#include <algorithm>
#include <cmath>

#include "kernels/attention_impl.h"
#include "kernels/parallel.h"

namespace ATTO_KERNELS_NS::attn {

namespace {

constexpr int64_t kMaxHS = kTinyMaxHeadSize;

// The keys [0, n) that rows [i0, i0 + WN) can see (causal: none past i0 + WN - 1 + off).
int64_t tiny_keys(const Problem& p, int64_t i0) {
  return p.d.causal ? std::clamp<int64_t>(i0 + WN + p.off, 0, p.d.Tk) : p.d.Tk;
}

// Lane l = l.
VINLINE vn lane_index() {
  vn r{};
  for (int64_t l = 0; l < WN; l++) r[l] = static_cast<float>(l);
  return r;
}

// s[j], j < n, lane i = scale * sum_e q_(i0+i)e k_je + kb_j (one FMA chain over e in order),
// -inf where key j is not visible to row i0 + i (causal) or masked (kb_j = -inf); qt[e] lane i =
// q_(i0+i)e.
template <int HSC>
VINLINE void tiny_scores(vn* s, const vn* qt, const float* kh, const float* kb, const Problem& p, int64_t i0,
                         int64_t n) {
  const AttentionDims& d = p.d;
  const int64_t HS = HSC > 0 ? HSC : d.HS;
  const vn iota = lane_index();
  const vn ninf = vsplat<vn>(kNegInf);
  // Four keys at a time: four independent FMA chains in flight (one chain per score, e in order).
  constexpr int64_t U = 4;
  for (int64_t j0 = 0; j0 < n; j0 += U) {
    const int64_t m = std::min(U, n - j0);
    vn acc[U] = {};
    const float* kj = kh + j0 * d.ldk;
    if (m == U) {
      for (int64_t e = 0; e < HS; e++)
#pragma GCC unroll 4
        for (int64_t u = 0; u < U; u++) acc[u] += qt[e] * kj[u * d.ldk + e];
    } else {
      for (int64_t e = 0; e < HS; e++)
        for (int64_t u = 0; u < m; u++) acc[u] += qt[e] * kj[u * d.ldk + e];
    }
    for (int64_t u = 0; u < m; u++) {
      const int64_t j = j0 + u;
      const vn x = acc[u] * d.scale + kb[j];
      const int64_t first = j - p.off - i0;  // causal: lanes i >= first see key j
      s[j] = !d.causal || first <= 0 ? x : iota >= static_cast<float>(first) ? x : ninf;
    }
  }
}

// acc[e] = sum_{j < n} c[j] * rows[j * ld + e] for e < HS: j outer, so the HS accumulators are
// independent FMA chains in flight together (each still sums over j in order).
template <int HSC>
VINLINE void tiny_weighted(vn* acc, const vn* c, const float* rows, int64_t ld, int64_t n, int64_t HS) {
  if constexpr (HSC > 0) {
    vn a[HSC];
#pragma GCC unroll 16
    for (int e = 0; e < HSC; e++) a[e] = vn{};
    for (int64_t j = 0; j < n; j++) {
      const float* rj = rows + j * ld;
#pragma GCC unroll 16
      for (int e = 0; e < HSC; e++) a[e] += c[j] * rj[e];
    }
#pragma GCC unroll 16
    for (int e = 0; e < HSC; e++) acc[e] = a[e];
  } else {
    for (int64_t e = 0; e < HS; e++) acc[e] = vn{};
    for (int64_t j = 0; j < n; j++)
      for (int64_t e = 0; e < HS; e++) acc[e] += c[j] * rows[j * ld + e];
  }
}

// xt[e] = lane i: x[i, e] for rows i < n (row stride ld), 0 past n. Transposed in registers, WN
// columns at a time: going through a buffer, the transpose's loads wait on the stores just made.
VINLINE void tiny_load_transposed(vn* xt, const float* x, int64_t ld, int64_t n, int64_t HS) {
  for (int64_t e0 = 0; e0 < HS; e0 += WN) {
    const int64_t nc = std::min(WN, HS - e0);
    vn v[WN];
    for (int64_t i = 0; i < WN; i++)
      v[i] = i < n ? loadn_upto(x + i * ld + e0, nc) : vn{};
    transposen_regs(v);
    for (int64_t e = 0; e < nc; e++) xt[e0 + e] = v[e];
  }
}

void tiny_key_bias(float* kb, const Problem& p, int64_t b) {
  for (int64_t j = 0; j < p.d.Tk; j++)
    kb[j] = p.key_mask != nullptr && p.key_mask[b * p.d.Tk + j] == 0 ? kNegInf : 0.0f;
}

// Rows i < n of the [HS, WN] block xt (xt[e] lane i) into dst rows (stride ld), HS floats each
// (+= when accumulate).
VINLINE void tiny_store_rows(float* dst, int64_t ld, const vn* xt, int64_t n, int64_t HS, bool accumulate) {
  for (int64_t e0 = 0; e0 < HS; e0 += WN) {
    const int64_t nc = std::min(WN, HS - e0);
    vn v[WN];
    for (int64_t e = 0; e < WN; e++) v[e] = e < nc ? xt[e0 + e] : vn{};
    transposen_regs(v);
    for (int64_t i = 0; i < n; i++) {
      float* di = dst + i * ld + e0;
      storen_upto(di, accumulate ? v[i] + loadn_upto(di, nc) : v[i], nc);
    }
  }
}

// v[i] lane j = x[j] lane i for j < n (0 past n): a [keys, rows] block turned [rows, keys].
VINLINE void tiny_transpose_keys(vn (&v)[WN], const vn* x, int64_t n) {
  for (int64_t j = 0; j < WN; j++) v[j] = j < n ? x[j] : vn{};
  transposen_regs(v);
}

// head(b, h) for every head, a contiguous run of heads per thread.
template <class F>
void for_each_tiny_head(const Problem& p, F&& head) {
  const AttentionDims& d = p.d;
  const int64_t heads = d.B * d.NH;
  const bool par = heads > 1 && d.Tq * d.Tk * d.HS * heads >= (1 << 15);
  parallel_for(heads, par, [&](int64_t bh) { head(bh / d.NH, bh % d.NH); });
}

// ---- Forward ------------------------------------------------------------------------------------

// HSC: the head size as a compile-time constant (fully unrolled loops over it), 0 = d.HS.
template <int HSC>
void tiny_forward_head(float* out, float* lse, const float* q, const float* k, const float* v, const Problem& p,
                       int64_t b, int64_t h) {
  const AttentionDims& d = p.d;
  const int64_t HS = HSC > 0 ? HSC : d.HS;
  alignas(64) float kb[kTinyMaxKeys], lv[WN], mv[WN];
  vn qt[kMaxHS], s[kTinyMaxKeys], ot[kMaxHS];
  tiny_key_bias(kb, p, b);
  const float* kh = k + b * d.Tk * d.ldk + h * d.HS;
  const float* vh = v + b * d.Tk * d.ldv + h * d.HS;
  const vn ninf = vsplat<vn>(kNegInf);
  for (int64_t i0 = 0; i0 < d.Tq; i0 += WN) {
    const int64_t nq = std::min(WN, d.Tq - i0), nk = tiny_keys(p, i0);
    tiny_load_transposed(qt, q + (b * d.Tq + i0) * d.ldq + h * d.HS, d.ldq, nq, HS);
    tiny_scores<HSC>(s, qt, kh, kb, p, i0, nk);
    vn m = ninf;
    for (int64_t j = 0; j < nk; j++) m = vmax(m, s[j]);
    const auto dead = m == ninf;  // nothing visible: weights 0, out 0, lse -inf
    const vn shift = dead ? vn{} : m;
    vn l{};
    for (int64_t j = 0; j < nk; j++) {
      s[j] = vexp(s[j] - shift);
      l += s[j];
    }
    const vn inv = dead ? vn{} : 1.0f / l;
    tiny_weighted<HSC>(ot, s, vh, d.ldv, nk, HS);
    for (int64_t e = 0; e < HS; e++) ot[e] = ot[e] * inv;
    tiny_store_rows(out + (b * d.Tq + i0) * d.ldo + h * d.HS, d.ldo, ot, nq, HS, false);
    storen(lv, l);
    storen(mv, m);
    float* lh = lse + (b * d.NH + h) * d.Tq + i0;
    for (int64_t i = 0; i < nq; i++) lh[i] = mv[i] == kNegInf ? kNegInf : mv[i] + std::log(lv[i]);
  }
}

// ---- Backward -----------------------------------------------------------------------------------

// Per block of query rows: P = exp(S - lse), dP_j = dO v_j, D = rowsum(dO * O),
// dS = scale P (dP - D); dQ = sum_j dS_j k_j; dK_j += sum_i dS_ij q_i and dV_j += sum_i P_ij dO_i
// (over the blocks in order, rows in order within a block), kept transposed until the end.
template <int HSC>
void tiny_backward_head(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                        const float* q, const float* k, const float* v, const Problem& p, int64_t b, int64_t h) {
  const AttentionDims& d = p.d;
  const int64_t HS = HSC > 0 ? HSC : d.HS;
  constexpr int64_t KB = kTinyMaxKeys / WN;  // key blocks at most
  alignas(64) float kb[kTinyMaxKeys];
  vn qt[kMaxHS], gt[kMaxHS], ot[kMaxHS], s[kTinyMaxKeys], ds[kTinyMaxKeys], acc[kMaxHS], x[WN];
  vn dkt[KB][kMaxHS], dvt[KB][kMaxHS];  // [key block][e] lane j: dK / dV of key WN kb + j, column e
  const int64_t nkb = (d.Tk + WN - 1) / WN;
  for (int64_t c = 0; c < nkb; c++)
    for (int64_t e = 0; e < HS; e++) dkt[c][e] = dvt[c][e] = vn{};
  const float* kh = k + b * d.Tk * d.ldk + h * d.HS;
  const float* vh = v + b * d.Tk * d.ldv + h * d.HS;
  tiny_key_bias(kb, p, b);
  for (int64_t i0 = 0; i0 < d.Tq; i0 += WN) {
    const int64_t nq = std::min(WN, d.Tq - i0), nk = tiny_keys(p, i0);
    const float* qh = q + (b * d.Tq + i0) * d.ldq + h * d.HS;
    const float* gh = dout + (b * d.Tq + i0) * d.ldo + h * d.HS;
    tiny_load_transposed(qt, qh, d.ldq, nq, HS);
    tiny_scores<HSC>(s, qt, kh, kb, p, i0, nk);
    const vn lv = loadn_part(lse + (b * d.NH + h) * d.Tq + i0, nq, kNegInf);
    const auto live = lv != vsplat<vn>(kNegInf);  // a fully masked row gets no gradient
    const vn lsafe = live ? lv : vn{};
    tiny_load_transposed(gt, gh, d.ldo, nq, HS);
    tiny_load_transposed(ot, out + (b * d.Tq + i0) * d.ldo + h * d.HS, d.ldo, nq, HS);
    vn D{};
    for (int64_t e = 0; e < HS; e++) D += gt[e] * ot[e];
    for (int64_t j = 0; j < nk; j++) {
      const vn pj = live ? vexp(s[j] - lsafe) : vn{};
      const float* vj = vh + j * d.ldv;
      vn dp{};
      for (int64_t e = 0; e < HS; e++) dp += gt[e] * vj[e];
      s[j] = pj;
      ds[j] = live ? d.scale * pj * (dp - D) : vn{};
    }
    if (dq != nullptr) {
      tiny_weighted<HSC>(acc, ds, kh, d.ldk, nk, HS);
      tiny_store_rows(dq + (b * d.Tq + i0) * d.ldq + h * d.HS, d.ldq, acc, nq, HS, d.accumulate);
    }
    // dK^T[e] (lane j) += sum_i dS^T_i q_ie: dS transposed so that lanes hold keys; same for dV.
    for (int64_t c = 0; c * WN < nk; c++) {
      const int64_t n = std::min(WN, nk - c * WN);
      if (dk != nullptr) {
        tiny_transpose_keys(x, ds + c * WN, n);
        for (int64_t i = 0; i < nq; i++) {
          const float* qi = qh + i * d.ldq;
          for (int64_t e = 0; e < HS; e++) dkt[c][e] += x[i] * qi[e];
        }
      }
      if (dv != nullptr) {
        tiny_transpose_keys(x, s + c * WN, n);
        for (int64_t i = 0; i < nq; i++) {
          const float* gi = gh + i * d.ldo;
          for (int64_t e = 0; e < HS; e++) dvt[c][e] += x[i] * gi[e];
        }
      }
    }
  }
  for (int64_t c = 0; c < nkb; c++) {
    const int64_t n = std::min(WN, d.Tk - c * WN);
    if (dk != nullptr) tiny_store_rows(dk + (b * d.Tk + c * WN) * d.ldk + h * d.HS, d.ldk, dkt[c], n, HS, d.accumulate);
    if (dv != nullptr) tiny_store_rows(dv + (b * d.Tk + c * WN) * d.ldv + h * d.HS, d.ldv, dvt[c], n, HS, d.accumulate);
  }
}

}  // namespace

void tiny_forward(float* out, float* lse, const float* q, const float* k, const float* v, const Problem& p) {
  const AttentionDims& d = p.d;
  for_each_tiny_head(p, [&](int64_t b, int64_t h) {
    switch (d.HS) {
      case 8: tiny_forward_head<8>(out, lse, q, k, v, p, b, h); break;
      case 16: tiny_forward_head<16>(out, lse, q, k, v, p, b, h); break;
      default: tiny_forward_head<0>(out, lse, q, k, v, p, b, h); break;
    }
  });
}

void tiny_backward(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                   const float* q, const float* k, const float* v, const Problem& p) {
  const AttentionDims& d = p.d;
  for_each_tiny_head(p, [&](int64_t b, int64_t h) {
    switch (d.HS) {
      case 8: tiny_backward_head<8>(dq, dk, dv, dout, out, lse, q, k, v, p, b, h); break;
      case 16: tiny_backward_head<16>(dq, dk, dv, dout, out, lse, q, k, v, p, b, h); break;
      default: tiny_backward_head<0>(dq, dk, dv, dout, out, lse, q, k, v, p, b, h); break;
    }
  });
}

}  // namespace atto::kernels::attn
