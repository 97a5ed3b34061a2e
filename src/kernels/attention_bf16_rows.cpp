// atto/kernels/attention_bf16_rows.cpp: bf16 attention whose keys fit in a row (Tk <=
// kRowsMaxKeys), on the AVX512_BF16 backend: the path a BF16 PrecisionScope takes there instead
// of the bf16 flash tiles (attention_bf16.cpp) for blocks of up to a few hundred tokens.
//
// With every key of a query row at hand there is no online softmax. Per head, in blocks of RB
// query rows:
//   forward   S = bf16(Q) bf16(K)^T                     the block's visible keys only (causal)
//             m = max_j S, P = exp(S - m), l = sum_j P  fp32, the whole row at once
//             O = bf16(P) bf16(V) / l,  lse = m + log l
//   backward  S again (the same code), P = exp(S - lse), dP = bf16(dO) bf16(V)^T,
//             dS = scale P (dP - D), D = <bf16(dO), O>
//             dQ = bf16(dS) bf16(K)                     per block, complete: written at once
//             P and dS kept for the head, paired by query rows, and after the last block
//             dV^T = bf16(dO)^T bf16(P), dK^T = bf16(Q)^T bf16(dS) as products over all the
//             query rows that see each 64-key chunk (one long chain per element), transposed
//             into dv and dk once
// The flash tiles cost a rescale of O, a fresh C per small product and a pack per tile pair;
// here each product is one call with the whole visible key range (or query range) as its K,
// and the causal triangle is cut at 32 rows instead of 64 x 64 tiles. Causal, head size 64, one
// thread of an AMD Zen 5 (medians of 100 calls, forward + backward, rows against tiles):
// T 256 x 24 heads 1.15 + 3.09 ms against 1.51 + 3.46; T 512 x 12 heads 1.68 + 4.75 against
// 2.51 + 5.03; T 1024 x 6 heads 3.51 + 8.48 against 4.30 + 8.72; T 2048 x 4 heads 8.25 + 20.9
// against 9.97 + 20.5, past which the tiles' backward wins: hence kRowsMaxKeys = 1024.
//
// P and dS never go to memory in fp32: the forward's exp pass writes bf16(P) as it sums, the
// backward's softmax pass writes P and dS straight into the bf16 pairs and rows the products read
// (same bits as the fp32 passes and the rounding after them; 7% less backward time for (d)'s
// 24 heads of 256 tokens, in one process, alternating).
//
// The products run through detail::TileProducts (rows of A, pack_bf16's B); the bits do not
// depend on the thread count (heads are split over threads, each head's sums in one order).
// Operands are rounded as the flash path rounds them: q, k, v, dout, P and dS to bf16, products
// summed in fp32, softmax and D in fp32.
#include "kernels/attention_impl.h"
#if ATTO_ATTN_BF16_ROWS  // x86-64 (not clang without AVX-512: attention_impl.h); else bf16_absent.cpp
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/bf16_impl.h"
#include "kernels/parallel.h"

namespace ATTO_KERNELS_NS::attn {

namespace {

constexpr int64_t RB = 32;  // query rows per block (the pairs of the backward's sums need 32)
constexpr int64_t KC = 64;  // keys per chunk of dV^T and dK^T (4 vectors of the product)
using detail::round_rows_bf16;
using detail::TileProducts;

// Padded sizes: head size as a sum index (HSk, 32) and as an output width (HSp, 16); query rows
// to whole blocks (Tqp); keys to whole chunks (Tkc).
struct Dims {
  int64_t HSk, HSp, Tqp, Tkc;
  explicit Dims(const Problem& p)
      : HSk(round_up(p.d.HS, 32)),
        HSp(p.HSp),
        Tqp(round_up(std::max<int64_t>(p.d.Tq, 1), RB)),
        Tkc(round_up(std::max<int64_t>(p.d.Tk, 1), KC)) {}
};

// A thread's scratch, kept from call to call: grown, never shrunk.
template <class V>
void grow(V& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
}

// Keys that query rows [i0, i0 + nq) see: all, or causally up to the last row's.
int64_t visible_keys(const Problem& p, int64_t i0, int64_t nq) {
  if (!p.d.causal) return p.d.Tk;
  return std::clamp<int64_t>(i0 + nq + p.off, 0, p.d.Tk);
}

// S [rows, kk] (row stride lds) = scale * Qb Kt^T, masked: the one definition of the scores,
// shared by forward and backward so that the backward's exp(S - lse) sees the forward's scores.
// Qb: the block's rows of bf16(q) (row stride HSk); Kt: pack_bf16(transB) of the head's keys.
void scores(const TileProducts& mm, float* S, int64_t lds, const uint16_t* Qb, const PackedBf16& Kt,
            const float* kbias, const Problem& p, const Dims& z, int64_t i0, int64_t nq, int64_t rows, int64_t kk) {
  mm(rows, kk, z.HSk, Qb, z.HSk, Kt.data.data(), Kt.Kp * 16, S, lds, false);
  const vf16 sc = splat(p.d.scale);
  for (int64_t i = 0; i < nq; i++) {
    float* s = S + i * lds;
    for (int64_t j = 0; j < kk; j += W) store(s + j, load(s + j) * sc + load(kbias + j));
    if (p.d.causal) {
      const int64_t visible = std::clamp<int64_t>(i0 + i + p.off + 1, 0, kk);
      std::fill(s + visible, s + kk, kNegInf);
    }
  }
}

// ---- Softmax passes that write the products' bf16 operands directly ----------------------------
// vf16 <-> __m512: the same 16 floats (simd.h's vector type is GCC's, __m512 the intrinsics').
ATTO_BF16_TARGET inline __m512 as_m512(vf16 v) {
  __m512 r;
  std::memcpy(&r, &v, sizeof(r));
  return r;
}

// One row of the forward: pb[0, n) = bf16(exp(s - shift)) (n a multiple of 16); returns the sum
// of the fp32 exps in row_exp_sum's order (lane partial sums, then the fixed tree). The bits of
// row_exp_sum then round_rows_bf16, without the fp32 row written and read again.
ATTO_BF16_TARGET float exp_sum_round_row(uint16_t* pb, const float* s, int64_t n, float shift) {
  const vf16 sh = splat(shift);
  vf16 acc = splat(0.0f);
  for (int64_t j = 0; j < n; j += W) {
    const vf16 e = vexp(load(s + j) - sh);
    acc += e;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(pb + j), (__m256i)_mm512_cvtneps_pbh(as_m512(e)));
  }
  return hsum(acc);
}

// The backward's block of RB query rows: from the scores S (in P) and dP (in dS), row stride ld,
// P = exp(S - lse_i) and dS = scale P (dP - D_i) for the first kk columns, zeros from kk to kc
// and in rows from nq on or with nothing visible (lse -inf); written only in bf16, as the
// products read them: P and dS paired by rows (pack_row_pairs_bf16's layout, blocks blk_stride
// apart) and dS's rows (dSb, row stride kc). The bits of softmax_backward_rows, the zero fills
// and the two pack_row_pairs_bf16 calls.
ATTO_BF16_TARGET void softmax_backward_pairs(uint16_t* Pp, uint16_t* dSp, int64_t blk_stride, uint16_t* dSb,
                                             const float* P, const float* dS, int64_t ld, int64_t kk, int64_t kc,
                                             int64_t nq, const float* lse, const float* D, float scale) {
  const vf16 sc = splat(scale);
  for (int64_t i = 0; i < RB; i += 2) {
    const bool live0 = i < nq && lse[i] != kNegInf, live1 = i + 1 < nq && lse[i + 1] != kNegInf;
    const vf16 l0 = splat(live0 ? lse[i] : 0.0f), l1 = splat(live1 ? lse[i + 1] : 0.0f);
    const vf16 D0 = splat(live0 ? D[i] : 0.0f), D1 = splat(live1 ? D[i + 1] : 0.0f);
    for (int64_t j = 0; j < kc; j += W) {
      __m512 p0 = _mm512_setzero_ps(), p1 = p0, g0 = p0, g1 = p0;
      if (j < kk) {
        if (live0) {
          const vf16 pv = vexp(load(P + i * ld + j) - l0);
          p0 = as_m512(pv);
          g0 = as_m512(sc * pv * (load(dS + i * ld + j) - D0));
        }
        if (live1) {
          const vf16 pv = vexp(load(P + (i + 1) * ld + j) - l1);
          p1 = as_m512(pv);
          g1 = as_m512(sc * pv * (load(dS + (i + 1) * ld + j) - D1));
        }
      }
      _mm512_storeu_si512(Pp + (j / 16) * blk_stride + (i / 2) * 32, detail::pair_rows_avx(p0, p1));
      _mm512_storeu_si512(dSp + (j / 16) * blk_stride + (i / 2) * 32, detail::pair_rows_avx(g0, g1));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dSb + i * kc + j), (__m256i)_mm512_cvtneps_pbh(g0));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dSb + (i + 1) * kc + j), (__m256i)_mm512_cvtneps_pbh(g1));
    }
  }
}

// ---- Forward ------------------------------------------------------------------------------------

struct FwdScratch {
  PackedBf16 Kt, Vp;
  Bf16Buffer Qb, Pb;
  AlignedVector<float> S, O, kbias, m, l;
  void resize(const Dims& z) {
    grow(Qb, RB * z.HSk);
    grow(Pb, RB * z.Tkc);
    grow(S, RB * z.Tkc);
    grow(O, RB * z.HSp);
    grow(kbias, z.Tkc);
    grow(m, RB);
    grow(l, RB);
  }
};

void forward_head(const TileProducts& mm, float* out, float* lse, const float* q, const float* k, const float* v,
                  const Problem& p, const Dims& z, int64_t b, int64_t h, FwdScratch& w) {
  const AttentionDims& d = p.d;
  const float* qh = q + b * d.Tq * d.ldq + h * d.HS;
  pack_bf16(w.Kt, true, d.HS, d.Tk, k + b * d.Tk * d.ldk + h * d.HS, d.ldk);
  pack_bf16(w.Vp, false, d.Tk, d.HS, v + b * d.Tk * d.ldv + h * d.HS, d.ldv);
  key_bias(w.kbias.data(), p, b, 0, d.Tk);  // p.bk = Tkc: padding keys -inf
  for (int64_t i0 = 0; i0 < d.Tq; i0 += RB) {
    const int64_t nq = std::min(RB, d.Tq - i0), rows = round_up(nq, 16);
    const int64_t kk = round_up(visible_keys(p, i0, nq), 32);
    std::fill(w.m.begin(), w.m.end(), kNegInf);
    std::fill(w.l.begin(), w.l.end(), 0.0f);
    if (kk == 0) {  // no key visible to any row of the block: out 0, lse -inf
      std::fill(w.O.begin(), w.O.end(), 0.0f);
      finish_rows(out, lse, w.O.data(), z.HSp, w.m.data(), w.l.data(), p, b, h, i0, nq);
      continue;
    }
    round_rows_bf16(w.Qb.data(), z.HSk, qh + i0 * d.ldq, d.ldq, nq, d.HS, rows, z.HSk);
    scores(mm, w.S.data(), z.Tkc, w.Qb.data(), w.Kt, w.kbias.data(), p, z, i0, nq, rows, kk);
    for (int64_t i = 0; i < rows; i++) {  // bf16(P), P = exp(S - m); padding rows zeros
      uint16_t* pb = w.Pb.data() + i * kk;
      const float* s = w.S.data() + i * z.Tkc;
      const float mx = i < nq ? row_max(s, kk) : kNegInf;
      if (mx == kNegInf) {  // nothing visible (or a padding row): P = 0, l = 0
        std::fill(pb, pb + kk, uint16_t{0});
        continue;
      }
      w.m[i] = mx;
      w.l[i] = exp_sum_round_row(pb, s, kk, mx);
    }
    mm(rows, z.HSp, kk, w.Pb.data(), kk, w.Vp.data.data(), w.Vp.Kp * 16, w.O.data(), z.HSp, false);
    finish_rows(out, lse, w.O.data(), z.HSp, w.m.data(), w.l.data(), p, b, h, i0, nq);
  }
}

// ---- Backward -----------------------------------------------------------------------------------

struct BwdScratch {
  PackedBf16 Kt, Vt, Kn;
  Bf16Buffer Qb, dOb, QTb, dOTb, Pp, dSp, dSb;
  AlignedVector<float> D, P, dS, dQ, dKT, dVT, T, kbias;
  AlignedVector<uint32_t> bits;
  std::vector<int64_t> block_keys;  // each query block's kk
  void resize(const Dims& z) {
    for (Bf16Buffer* x : {&Qb, &dOb}) grow(*x, z.Tqp * z.HSk);
    for (Bf16Buffer* x : {&QTb, &dOTb}) grow(*x, z.HSp * z.Tqp);
    for (Bf16Buffer* x : {&Pp, &dSp}) grow(*x, z.Tqp * z.Tkc);
    grow(dSb, RB * z.Tkc);
    grow(D, z.Tqp);
    for (AlignedVector<float>* x : {&P, &dS}) grow(*x, RB * z.Tkc);
    grow(dQ, RB * z.HSp);
    for (AlignedVector<float>* x : {&dKT, &dVT}) grow(*x, z.HSp * z.Tkc);
    grow(T, std::max(z.HSp * z.Tqp, z.Tkc * z.HSp));
    grow(kbias, z.Tkc);
    grow(bits, z.HSk);
    grow(block_keys, z.Tqp / RB);
  }
};

void backward_head(const TileProducts& mm, float* dq, float* dk, float* dv, const float* dout, const float* out,
                   const float* lse, const float* q, const float* k, const float* v, const Problem& p, const Dims& z,
                   int64_t b, int64_t h, BwdScratch& w) {
  const AttentionDims& d = p.d;
  const float* qh = q + b * d.Tq * d.ldq + h * d.HS;
  const float* dh = dout + b * d.Tq * d.ldo + h * d.HS;
  const float* kh = k + b * d.Tk * d.ldk + h * d.HS;
  round_rows_bf16(w.Qb.data(), z.HSk, qh, d.ldq, d.Tq, d.HS, z.Tqp, z.HSk);
  round_rows_bf16(w.dOb.data(), z.HSk, dh, d.ldo, d.Tq, d.HS, z.Tqp, z.HSk);
  rounded_dout_dots(w.D.data(), w.dOb.data(), z.HSk, out + b * d.Tq * d.ldo + h * d.HS, d.ldo, d.Tq, d.HS,
                    w.bits.data(), w.T.data());
  transposed_bf16(w.QTb.data(), z.Tqp, z.HSp, w.T.data(), qh, d.ldq, d.Tq, d.HS);
  transposed_bf16(w.dOTb.data(), z.Tqp, z.HSp, w.T.data(), dh, d.ldo, d.Tq, d.HS);
  pack_bf16(w.Kt, true, d.HS, d.Tk, kh, d.ldk);
  pack_bf16(w.Kn, false, d.Tk, d.HS, kh, d.ldk);
  pack_bf16(w.Vt, true, d.HS, d.Tk, v + b * d.Tk * d.ldv + h * d.HS, d.ldv);
  key_bias(w.kbias.data(), p, b, 0, d.Tk);
  const float* lse_h = lse + (b * d.NH + h) * d.Tq;
  float* dq_h = dq != nullptr ? dq + b * d.Tq * d.ldq + h * d.HS : nullptr;
  for (int64_t i0 = 0; i0 < z.Tqp; i0 += RB) {
    const int64_t nq = std::clamp<int64_t>(d.Tq - i0, 0, RB);
    const int64_t kk = nq > 0 ? round_up(visible_keys(p, i0, nq), 32) : 0, kc = round_up(kk, KC);
    w.block_keys[static_cast<size_t>(i0 / RB)] = kk;
    if (kk == 0) {  // no key visible: no gradient; no later product reads this block's pairs
      if (dq_h != nullptr && !d.accumulate)
        for (int64_t i = 0; i < nq; i++) std::fill(dq_h + (i0 + i) * d.ldq, dq_h + (i0 + i) * d.ldq + d.HS, 0.0f);
      continue;
    }
    float* P = w.P.data();
    float* dS = w.dS.data();
    scores(mm, P, z.Tkc, w.Qb.data() + i0 * z.HSk, w.Kt, w.kbias.data(), p, z, i0, nq, RB, kk);
    mm(RB, kk, z.HSk, w.dOb.data() + i0 * z.HSk, z.HSk, w.Vt.data.data(), w.Vt.Kp * 16, dS, z.Tkc, false);  // dP
    // P and dS in bf16 only: paired for dV^T and dK^T (the chunk's keys past kk zeros), dS's
    // rows for dQ.
    softmax_backward_pairs(w.Pp.data() + (i0 / 2) * 32, w.dSp.data() + (i0 / 2) * 32, z.Tqp * 16, w.dSb.data(), P,
                           dS, z.Tkc, kk, kc, nq, lse_h + i0, w.D.data() + i0, d.scale);
    if (dq_h != nullptr) {  // dQ = dS K
      mm(RB, z.HSp, kk, w.dSb.data(), kc, w.Kn.data.data(), w.Kn.Kp * 16, w.dQ.data(), z.HSp, false);
      add_rows(dq_h + i0 * d.ldq, d.ldq, w.dQ.data(), nq, d.HS, z.HSp, d.accumulate);
    }
  }
  if (dk == nullptr && dv == nullptr) return;
  // dV^T = dO^T P and dK^T = Q^T dS, 64 keys at a time, over the query rows from the first block
  // that sees the chunk (every later block wrote its pairs for it).
  for (int64_t j0 = 0; j0 < z.Tkc; j0 += KC) {
    int64_t qb = 0;
    while (qb < z.Tqp / RB && w.block_keys[static_cast<size_t>(qb)] <= j0) qb++;
    const int64_t i0s = qb * RB, K = z.Tqp - i0s;
    if (K == 0) {
      for (int64_t e = 0; e < z.HSp; e++) {
        std::fill(w.dVT.data() + e * z.Tkc + j0, w.dVT.data() + e * z.Tkc + j0 + KC, 0.0f);
        std::fill(w.dKT.data() + e * z.Tkc + j0, w.dKT.data() + e * z.Tkc + j0 + KC, 0.0f);
      }
      continue;
    }
    const int64_t boff = (j0 / 16) * z.Tqp * 16 + (i0s / 2) * 32;
    if (dv != nullptr)
      mm(z.HSp, KC, K, w.dOTb.data() + i0s, z.Tqp, w.Pp.data() + boff, z.Tqp * 16, w.dVT.data() + j0, z.Tkc, false);
    if (dk != nullptr)
      mm(z.HSp, KC, K, w.QTb.data() + i0s, z.Tqp, w.dSp.data() + boff, z.Tqp * 16, w.dKT.data() + j0, z.Tkc, false);
  }
  if (dk != nullptr)
    add_transposed(dk + b * d.Tk * d.ldk + h * d.HS, d.ldk, w.dKT.data(), z.Tkc, w.T.data(), d.Tk, d.HS, z.HSp,
                   d.accumulate);
  if (dv != nullptr)
    add_transposed(dv + b * d.Tk * d.ldv + h * d.HS, d.ldv, w.dVT.data(), z.Tkc, w.T.data(), d.Tk, d.HS, z.HSp,
                   d.accumulate);
}

// f(mm, z, b, h, scratch) for every head, the heads split over threads (threads when the work
// reaches min_work), each thread with its own products and scratch. The scratch is kept from call
// to call (grown, never shrunk): fresh pages on every call cost more than the products.
template <class Scratch, class F>
void over_heads(Problem& p, int64_t min_work, F f) {
  const Dims z(p);
  p.bk = z.Tkc;  // the width key_bias writes: the whole row of keys
  const AttentionDims& d = p.d;
  const int64_t heads = d.B * d.NH;
  parallel_region(heads > 1 && d.Tq * d.Tk * d.HS * heads >= min_work, [&](int64_t t, int64_t nt) {
    const auto [h0, h1] = static_range(heads, t, nt);
    if (h0 == h1) return;
    thread_local Scratch w;
    w.resize(z);
    const TileProducts mm;
    for (int64_t bh = h0; bh < h1; bh++) f(mm, z, bh / d.NH, bh % d.NH, w);
  });
}

}  // namespace

bool rows_bf16_fits(const AttentionDims& d) {
  return d.Tk >= 1 && d.Tk <= kRowsMaxKeys && bf16_backend() == Bf16Backend::Avx512Bf16;
}

void rows_forward_bf16(float* out, float* lse, const float* q, const float* k, const float* v, const Problem& p0) {
  Problem p = p0;
  over_heads<FwdScratch>(p, 1 << 16, [&](const TileProducts& mm, const Dims& z, int64_t b, int64_t h, FwdScratch& w) {
    forward_head(mm, out, lse, q, k, v, p, z, b, h, w);
  });
}

void rows_backward_bf16(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                        const float* q, const float* k, const float* v, const Problem& p0) {
  Problem p = p0;
  over_heads<BwdScratch>(p, 1 << 15, [&](const TileProducts& mm, const Dims& z, int64_t b, int64_t h, BwdScratch& w) {
    backward_head(mm, dq, dk, dv, dout, out, lse, q, k, v, p, z, b, h, w);
  });
}

}  // namespace atto::kernels::attn
#endif  // ATTO_ATTN_BF16_ROWS
