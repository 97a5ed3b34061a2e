// atto/kernels/attention_bf16.cpp: the flash path with its products in bf16, taken under a
// BF16 PrecisionScope (attention.cpp). The algorithm, tiling and task split are the flash
// path's (attention_flash.cpp); what changes is where the arithmetic runs:
//
//   forward   S = bf16(Q) bf16(K)^T            fp32 sums on AMX tiles or vdpbf16ps
//             online softmax of S              fp32 (row max, exp, row sums l)
//             O += bf16(P) bf16(V)             P = exp(S - m) rounded after l took its fp32 sum
//   backward  S, dP = bf16(dO) bf16(V)^T       P = exp(S - lse), dS = scale P (dP - D) in fp32,
//                                              D = <bf16(dO), O> (so sum_j P dS = 0, as in fp32)
//             dV^T += bf16(dO)^T bf16(P)       kept transposed ([HS, keys]) so that P and dS
//             dK^T += bf16(Q)^T bf16(dS)       only need their rows paired, not transposed
//             dQ += bf16(dS) bf16(K)
//
// as torch.autocast does for q @ k^T and att @ v (it also rounds the products' outputs; these
// stay fp32). Operands are rounded and packed once per head (q, k, v, dout, and the transposes
// of q and dout) or once per tile (P, dS); products run through detail::TileProducts, so one
// binary uses AMX where the CPU has it and vdpbf16ps otherwise.
//
// Dimensions are padded for the tiles: head size to 32 as a sum index (HSk) and 16 as an output
// width (HSp), query rows to 32, keys per tile to 32 (kk). Padding is zeros in every operand, and
// padded score columns are -inf, so padding costs work, never bits. Work is split as in the fp32
// flash path (query tiles forward, heads backward) and every sum runs in one fixed order: the
// bits do not depend on the thread count.
#if defined(__x86_64__)  // the bf16 kernels are x86-64 only; elsewhere bf16_absent.cpp stands in
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/attention_impl.h"
#include "kernels/bf16_impl.h"
#include "kernels/parallel.h"

namespace ATTO_KERNELS_NS::attn {

namespace {

constexpr int64_t BQ = 64;  // query rows per tile (at most)
using detail::pack_row_pairs_bf16;
using detail::round_rows_bf16;
using detail::TileProducts;

// The padded sizes of one problem.
struct Sizes {
  int64_t HSk, HSp, bk, ktiles, Tqp;
  explicit Sizes(const Problem& p)
      : HSk(round_up(p.d.HS, 32)),
        HSp(p.HSp),
        bk(std::min(BK, round_up(std::max<int64_t>(p.d.Tk, 1), 32))),
        ktiles((p.d.Tk + bk - 1) / bk),
        Tqp(round_up(std::max<int64_t>(p.d.Tq, 1), 32)) {}
};

// S[rows, bk] = scale * Qb Kb^T for key tile j0 (kk of its columns computed, the rest -inf),
// masked: the one definition of the scores, shared by forward and backward so that backward's
// exp(S - lse) matches forward exactly. Kb is pack_bf16(transB) of the head's keys (K = HS).
void score_tile(const TileProducts& mm, float* S, const uint16_t* Qb, const uint16_t* Kb, const float* kbias,
                const Problem& p, const Sizes& z, int64_t i0, int64_t nq, int64_t rows, int64_t j0, int64_t kk) {
  const int64_t bk = z.bk;
  mm(rows, kk, z.HSk, Qb, z.HSk, Kb + (j0 / 16) * z.HSk * 16, z.HSk * 16, S, bk, false);
  for (int64_t i = 0; i < rows; i++) {
    float* s = S + i * bk;
    for (int64_t j = 0; j < kk; j++) s[j] = s[j] * p.d.scale + kbias[j];
    std::fill(s + kk, s + bk, kNegInf);
    if (p.d.causal) {
      const int64_t visible = std::clamp<int64_t>(i0 + i + p.off - j0 + 1, 0, bk);
      for (int64_t j = visible; j < bk; j++) s[j] = kNegInf;
    }
  }
}

// The bf16 packs of one head's keys and values (pack_bf16 layouts).
// As the B of S = Q K^T (K = head size) and of dP = dO V^T; and as the B of dQ = dS K and
// O = P V (K = keys).
void pack_head_keys(PackedBf16& KT, PackedBf16* KN, const float* k, int64_t ldk, int64_t Tk, int64_t HS) {
  pack_bf16(KT, true, HS, Tk, k, ldk);
  if (KN != nullptr) pack_bf16(*KN, false, Tk, HS, k, ldk);
}

// ---- Forward ------------------------------------------------------------------------------------

struct FwdScratch {
  Bf16Buffer Qb, Pb;
  PackedBf16 Kb, Vb;
  AlignedVector<float> S, O, m, l, kbias;
  int64_t bh = -1;
  explicit FwdScratch(const Sizes& z)
      : Qb(BQ * z.HSk), Pb(BQ * z.bk), S(BQ * z.bk), O(BQ * z.HSp), m(BQ), l(BQ), kbias(z.bk) {}
};

void forward_tile(const TileProducts& mm, float* out, float* lse, const float* q, const float* k, const float* v,
                  const Problem& p, const Sizes& z, int64_t b, int64_t h, int64_t i0, FwdScratch& w) {
  const AttentionDims& d = p.d;
  const int64_t nq = std::min(BQ, d.Tq - i0), rows = round_up(nq, 16), HSp = z.HSp, bk = z.bk;
  round_rows_bf16(w.Qb.data(), z.HSk, q + (b * d.Tq + i0) * d.ldq + h * d.HS, d.ldq, nq, d.HS, rows, z.HSk);
  std::fill(w.O.begin(), w.O.begin() + rows * HSp, 0.0f);
  std::fill(w.m.begin(), w.m.end(), kNegInf);
  std::fill(w.l.begin(), w.l.end(), 0.0f);
  if (w.bh != b * d.NH + h) {
    w.bh = b * d.NH + h;
    pack_head_keys(w.Kb, nullptr, k + b * d.Tk * d.ldk + h * d.HS, d.ldk, d.Tk, d.HS);
    pack_bf16(w.Vb, false, d.Tk, d.HS, v + b * d.Tk * d.ldv + h * d.HS, d.ldv);
  }
  const int64_t kt_end = key_tiles_end(p, i0, nq);
  for (int64_t kt = 0; kt < kt_end; kt++) {
    const int64_t j0 = kt * bk, nk = std::min(bk, d.Tk - j0), kk = round_up(nk, 32);
    key_bias(w.kbias.data(), p, b, j0, nk);
    score_tile(mm, w.S.data(), w.Qb.data(), w.Kb.data.data(), w.kbias.data(), p, z, i0, nq, rows, j0, kk);
    online_softmax_rows(w.S.data(), bk, kk, nq, w.m.data(), w.l.data(), w.O.data(), HSp);  // S becomes P
    round_rows_bf16(w.Pb.data(), kk, w.S.data(), bk, nq, kk, rows, kk);  // padding rows: zeros
    mm(rows, HSp, kk, w.Pb.data(), kk, w.Vb.data.data() + (j0 / 2) * 32, w.Vb.Kp * 16, w.O.data(), HSp, true);
  }
  finish_rows(out, lse, w.O.data(), HSp, w.m.data(), w.l.data(), p, b, h, i0, nq);
}

// ---- Backward -----------------------------------------------------------------------------------

struct BwdScratch {
  AlignedVector<float> D, dQ, T, P, dS, dKT, dVT, kbias;
  Bf16Buffer Qb, dOb, QTb, dOTb, dSb, Pp, dSp;
  AlignedVector<uint32_t> bits;
  PackedBf16 Kb, Kn, Vb;
  explicit BwdScratch(const Sizes& z)
      : D(z.Tqp),
        dQ(z.Tqp * z.HSp),
        T(std::max(z.HSp * z.Tqp, z.bk * z.HSp)),
        P(BQ * z.bk),
        dS(BQ * z.bk),
        dKT(z.HSp * z.bk),
        dVT(z.HSp * z.bk),
        kbias(z.bk),
        Qb(z.Tqp * z.HSk),
        dOb(z.Tqp * z.HSk),
        QTb(z.HSp * z.Tqp),
        dOTb(z.HSp * z.Tqp),
        dSb(BQ * z.bk),
        Pp(BQ * z.bk),
        dSp(BQ * z.bk),
        bits(z.HSk) {}
};

// One (key tile, query tile) step.
void backward_step(const TileProducts& mm, const float* lse, const Problem& p, const Sizes& z, int64_t b, int64_t h,
                   int64_t i0, int64_t j0, int64_t nk, BwdScratch& w) {
  const AttentionDims& d = p.d;
  const int64_t nq = std::min(BQ, d.Tq - i0), rows = round_up(nq, 32), bk = z.bk, kk = round_up(nk, 32);
  const int64_t HSp = z.HSp, HSk = z.HSk;
  score_tile(mm, w.P.data(), w.Qb.data() + i0 * HSk, w.Kb.data.data(), w.kbias.data(), p, z, i0, nq, rows, j0, kk);
  // dP = dO V^T
  mm(rows, kk, HSk, w.dOb.data() + i0 * HSk, HSk, w.Vb.data.data() + (j0 / 16) * HSk * 16, HSk * 16, w.dS.data(),
     bk, false);
  softmax_backward_rows(w.P.data(), w.dS.data(), bk, kk, rows, nq, lse + (b * d.NH + h) * d.Tq + i0, w.D.data() + i0,
                        d.scale);
  // P and dS as the B of products over query rows (pairs of rows), dS also as rows.
  pack_row_pairs_bf16(w.Pp.data(), rows * 16, nullptr, 0, w.P.data(), bk, rows, kk);
  pack_row_pairs_bf16(w.dSp.data(), rows * 16, w.dSb.data(), kk, w.dS.data(), bk, rows, kk);
  // dV^T[HS, keys] += dO^T P;  dK^T += Q^T dS;  dQ += dS K
  mm(HSp, kk, rows, w.dOTb.data() + i0, z.Tqp, w.Pp.data(), rows * 16, w.dVT.data(), bk, true);
  mm(HSp, kk, rows, w.QTb.data() + i0, z.Tqp, w.dSp.data(), rows * 16, w.dKT.data(), bk, true);
  mm(rows, HSp, kk, w.dSb.data(), kk, w.Kn.data.data() + (j0 / 2) * 32, w.Kn.Kp * 16, w.dQ.data() + i0 * HSp, HSp,
     true);
}

void backward_head(const TileProducts& mm, float* dq, float* dk, float* dv, const float* dout, const float* out,
                   const float* lse, const float* q, const float* k, const float* v, const Problem& p, const Sizes& z,
                   int64_t b, int64_t h, BwdScratch& w) {
  const AttentionDims& d = p.d;
  std::fill(w.dQ.begin(), w.dQ.end(), 0.0f);
  const float* qh = q + b * d.Tq * d.ldq + h * d.HS;
  const float* dh = dout + b * d.Tq * d.ldo + h * d.HS;
  round_rows_bf16(w.Qb.data(), z.HSk, qh, d.ldq, d.Tq, d.HS, z.Tqp, z.HSk);
  round_rows_bf16(w.dOb.data(), z.HSk, dh, d.ldo, d.Tq, d.HS, z.Tqp, z.HSk);
  rounded_dout_dots(w.D.data(), w.dOb.data(), z.HSk, out + b * d.Tq * d.ldo + h * d.HS, d.ldo, d.Tq, d.HS,
                    w.bits.data(), w.T.data());
  transposed_bf16(w.QTb.data(), z.Tqp, z.HSp, w.T.data(), qh, d.ldq, d.Tq, d.HS);
  transposed_bf16(w.dOTb.data(), z.Tqp, z.HSp, w.T.data(), dh, d.ldo, d.Tq, d.HS);
  pack_head_keys(w.Kb, &w.Kn, k + b * d.Tk * d.ldk + h * d.HS, d.ldk, d.Tk, d.HS);
  pack_bf16(w.Vb, true, d.HS, d.Tk, v + b * d.Tk * d.ldv + h * d.HS, d.ldv);
  const int64_t qtiles = (d.Tq + BQ - 1) / BQ;
  for (int64_t kt = 0; kt < z.ktiles; kt++) {
    const int64_t j0 = kt * z.bk, nk = std::min(z.bk, d.Tk - j0);
    key_bias(w.kbias.data(), p, b, j0, nk);
    std::fill(w.dKT.begin(), w.dKT.end(), 0.0f);
    std::fill(w.dVT.begin(), w.dVT.end(), 0.0f);
    for (int64_t qt = 0; qt < qtiles; qt++) {
      const int64_t i0 = qt * BQ;
      if (key_tiles_end(p, i0, std::min(BQ, d.Tq - i0)) <= kt) continue;  // all masked
      backward_step(mm, lse, p, z, b, h, i0, j0, nk, w);
    }
    if (dk != nullptr)
      add_transposed(dk + (b * d.Tk + j0) * d.ldk + h * d.HS, d.ldk, w.dKT.data(), z.bk, w.T.data(), nk, d.HS, z.HSp,
                     d.accumulate);
    if (dv != nullptr)
      add_transposed(dv + (b * d.Tk + j0) * d.ldv + h * d.HS, d.ldv, w.dVT.data(), z.bk, w.T.data(), nk, d.HS, z.HSp,
                     d.accumulate);
  }
  add_rows(dq ? dq + b * d.Tq * d.ldq + h * d.HS : nullptr, d.ldq, w.dQ.data(), d.Tq, d.HS, z.HSp, d.accumulate);
}

}  // namespace

void transposed_bf16(uint16_t* dst, int64_t ldd, int64_t rows_pad, float* tmp, const float* src, int64_t ld,
                     int64_t n, int64_t HS) {
  pack_transposed(tmp, ldd, src, ld, n, HS, ldd);
  round_rows_bf16(dst, ldd, tmp, ldd, HS, ldd, rows_pad, ldd);
}

void add_transposed(float* dst, int64_t ld, const float* src, int64_t lds, float* tmp, int64_t n, int64_t HS,
                    int64_t HSp, bool accumulate) {
  pack_transposed(tmp, HSp, src, lds, HS, round_up(n, W), HSp);
  add_rows(dst, ld, tmp, n, HS, HSp, accumulate);
}

void rounded_dout_dots(float* D, const uint16_t* dout_bf16, int64_t ldb, const float* out, int64_t ldo, int64_t n,
                       int64_t HS, uint32_t* bits, float* row) {
  for (int64_t i = 0; i < n; i++) {
    if (i + kPrefetchRows < n) prefetch_run(out + (i + kPrefetchRows) * ldo, HS);
    // bf16 -> fp32: the 16 bits on top (a loop that vectorises)
    for (int64_t e = 0; e < HS; e++) bits[e] = uint32_t{dout_bf16[i * ldb + e]} << 16;
    std::memcpy(row, bits, sizeof(float) * HS);
    D[i] = dot_hs(out + i * ldo, row, HS);
  }
}

void flash_forward_bf16(float* out, float* lse, const float* q, const float* k, const float* v, const Problem& p0) {
  Problem p = p0;
  const Sizes z(p);
  p.bk = z.bk;  // the tile width key_bias and key_tiles_end use
  const AttentionDims& d = p.d;
  const int64_t qtiles = (d.Tq + BQ - 1) / BQ, units = d.B * d.NH * qtiles;
  const bool par = units > 1 && d.Tq * d.Tk * d.HS * d.B * d.NH >= (1 << 16);
  parallel_region(par, [&](int64_t t, int64_t nt) {
    const auto [u0, u1] = static_range(units, t, nt);
    if (u0 == u1) return;
    FwdScratch w(z);
    const TileProducts mm;
    for (int64_t u = u0; u < u1; u++) {
      const int64_t bh = u / qtiles, qt = u % qtiles;
      forward_tile(mm, out, lse, q, k, v, p, z, bh / d.NH, bh % d.NH, qt * BQ, w);
    }
  });
}

void flash_backward_bf16(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                         const float* q, const float* k, const float* v, const Problem& p0) {
  Problem p = p0;
  const Sizes z(p);
  p.bk = z.bk;
  const AttentionDims& d = p.d;
  const int64_t heads = d.B * d.NH;
  const bool par = heads > 1 && d.Tq * d.Tk * d.HS * heads >= (1 << 15);
  parallel_region(par, [&](int64_t t, int64_t nt) {
    const auto [h0, h1] = static_range(heads, t, nt);
    if (h0 == h1) return;
    BwdScratch w(z);
    const TileProducts mm;
    for (int64_t bh = h0; bh < h1; bh++)
      backward_head(mm, dq, dk, dv, dout, out, lse, q, k, v, p, z, bh / d.NH, bh % d.NH, w);
  });
}

}  // namespace atto::kernels::attn
#endif  // __x86_64__
