// atto/kernels/attention.cpp: fused flash-attention style forward and backward on the CPU.
//
// Forward: one task per (b, h, query tile of BQ rows). For each key tile of BK keys the task
// computes the BQ x BK scores, applies the masks, and folds them into running row maxima m,
// sums l and output accumulators O (online softmax); at the end out = O / l, lse = m + log l.
// Only one tile of scores per thread ever exists.
//
// Backward (FlashAttention-2): one task per (b, h), so each thread owns the dq, dk, dv columns
// of its heads and the sums run in a fixed order. Per key tile (outer) and query tile (inner):
//   P = exp(S - lse);  dV += P^T dO;  dP = dO V^T;  dS = P (dP - D), D_i = <dO_i, O_i>;
//   dQ += scale dS K;  dK += scale dS^T Q.
//
// All tile products go through one register-blocked micro-kernel on zero-padded copies
// (head size rounded up to 16 lanes), so any HS, Tq, Tk and leading dimension work.

// 64-byte vectors never cross a call here (helpers are always inlined); without AVX-512, GCC
// would still warn that their calling convention differs between targets.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/kernels.h"

namespace atto::kernels {

namespace {

typedef float vf16 __attribute__((vector_size(64)));
#define VINLINE inline __attribute__((always_inline))
constexpr int64_t W = 16;
constexpr int64_t BQ = 64;  // query rows per tile
constexpr int64_t BK = 64;  // keys per tile
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

VINLINE vf16 load(const float* p) {
  vf16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
VINLINE void store(float* p, vf16 v) { std::memcpy(p, &v, sizeof(v)); }

// ---- Micro-kernel: C[M, N] (+)= A[M, K] B[K, N] ------------------------------------------------
// A(r, k) = A[r * ars + k * aks] (so A can be read transposed); B row-major with ldb; C row-major
// with ldc. M is a multiple of 4 and N of 16 (callers use padded buffers).
template <int NV>
void mm_block(int64_t M, int64_t K, const float* A, int64_t ars, int64_t aks, const float* B,
              int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  for (int64_t r = 0; r < M; r += 4) {
    vf16 c[4][NV];
    for (int i = 0; i < 4; i++)
      for (int v = 0; v < NV; v++) c[i][v] = accumulate ? load(C + (r + i) * ldc + v * W) : vf16{};
    const float* a = A + r * ars;
    for (int64_t k = 0; k < K; k++) {
      vf16 b[NV];
      for (int v = 0; v < NV; v++) {
        b[v] = load(B + k * ldb + v * W);
#ifdef __AVX512F__
        asm("" : "+v"(b[v]));  // keep b in a register: one load per vector, not one per FMA
#endif
      }
      for (int i = 0; i < 4; i++) {
        const float ai = a[i * ars + k * aks];
        for (int v = 0; v < NV; v++) c[i][v] += ai * b[v];
      }
    }
    for (int i = 0; i < 4; i++)
      for (int v = 0; v < NV; v++) store(C + (r + i) * ldc + v * W, c[i][v]);
  }
}

void mm(int64_t M, int64_t N, int64_t K, const float* A, int64_t ars, int64_t aks, const float* B,
        int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  for (int64_t n0 = 0; n0 < N; n0 += 4 * W) {
    switch (std::min<int64_t>(4, (N - n0) / W)) {
      case 4:
        mm_block<4>(M, K, A, ars, aks, B + n0, ldb, C + n0, ldc, accumulate);
        break;
      case 3:
        mm_block<3>(M, K, A, ars, aks, B + n0, ldb, C + n0, ldc, accumulate);
        break;
      case 2:
        mm_block<2>(M, K, A, ars, aks, B + n0, ldb, C + n0, ldc, accumulate);
        break;
      default:
        mm_block<1>(M, K, A, ars, aks, B + n0, ldb, C + n0, ldc, accumulate);
        break;
    }
  }
}

// ---- Problem description ----------------------------------------------------------------------

struct Problem {
  AttentionDims d;  // ld and scale resolved
  int64_t HSp = 0;  // HS rounded up to 16
  int64_t off = 0;  // causal: row i sees keys j <= i + off
  const uint8_t* key_mask = nullptr;
};

Problem make_problem(const AttentionDims& dims, const uint8_t* key_mask) {
  Problem p;
  p.d = dims;
  const int64_t C = dims.NH * dims.HS;
  if (p.d.ldq == 0) p.d.ldq = C;
  if (p.d.ldk == 0) p.d.ldk = C;
  if (p.d.ldv == 0) p.d.ldv = C;
  if (p.d.ldo == 0) p.d.ldo = C;
  if (p.d.scale == 0.0f) p.d.scale = 1.0f / std::sqrt(static_cast<float>(dims.HS));
  p.HSp = round_up(dims.HS, W);
  p.off = dims.Tk - dims.Tq;
  p.key_mask = key_mask;
  return p;
}

// Copies n rows of HS floats (row stride ld) into dst[rows_pad, HSp], zero padding.
void pack_rows(float* dst, const float* src, int64_t ld, int64_t n, int64_t rows_pad, int64_t HS,
               int64_t HSp) {
  std::fill(dst, dst + rows_pad * HSp, 0.0f);
  for (int64_t r = 0; r < n; r++) std::memcpy(dst + r * HSp, src + r * ld, sizeof(float) * HS);
}

// dst[HS, BK] = the transpose of n rows of HS floats (row stride ld), zero padding.
void pack_transposed(float* dst, const float* src, int64_t ld, int64_t n, int64_t HS) {
  std::fill(dst, dst + HS * BK, 0.0f);
  for (int64_t j = 0; j < n; j++)
    for (int64_t e = 0; e < HS; e++) dst[e * BK + j] = src[j * ld + e];
}

// Key tile [j0, j0 + nk) of batch b: kbias[j] = 0, or -inf for padding and masked keys.
void key_bias(float* kbias, const Problem& p, int64_t b, int64_t j0, int64_t nk) {
  for (int64_t j = 0; j < BK; j++) {
    const bool pad = j >= nk;
    const bool masked = !pad && p.key_mask != nullptr && p.key_mask[b * p.d.Tk + j0 + j] == 0;
    kbias[j] = pad || masked ? kNegInf : 0.0f;
  }
}

// S[BQ, BK] = scale * Qs[BQ, HS] KT[HS, BK], masked to -inf: the one definition of the scores,
// shared by forward and backward so that backward's exp(S - lse) matches forward exactly.
void score_tile(float* S, const float* Qs, const float* KT, const float* kbias, const Problem& p,
                int64_t i0, int64_t nq, int64_t j0) {
  const int64_t rows = round_up(nq, 4);
  mm(rows, BK, p.d.HS, Qs, p.HSp, 1, KT, BK, S, BK, false);
  for (int64_t i = 0; i < nq; i++) {
    float* s = S + i * BK;
    for (int64_t j = 0; j < BK; j++) s[j] = s[j] * p.d.scale + kbias[j];
    if (p.d.causal) {
      const int64_t visible = std::clamp<int64_t>(i0 + i + p.off - j0 + 1, 0, BK);
      for (int64_t j = visible; j < BK; j++) s[j] = kNegInf;
    }
  }
}

// Query tile [i0, i0 + nq) sees key tiles [0, key_tiles_end) (fewer under a causal mask).
int64_t key_tiles_end(const Problem& p, int64_t i0, int64_t nq) {
  const int64_t ntiles = (p.d.Tk + BK - 1) / BK;
  if (!p.d.causal) return ntiles;
  const int64_t last_key = i0 + nq - 1 + p.off;  // the last query row's last visible key
  if (last_key < 0) return 0;
  return std::min(ntiles, last_key / BK + 1);
}

// ---- Forward ------------------------------------------------------------------------------------

struct FwdScratch {
  std::vector<float> Qs, KT, Vs, S, O, m, l, kbias;
  explicit FwdScratch(int64_t HS, int64_t HSp)
      : Qs(BQ * HSp), KT(HS * BK), Vs(BK * HSp), S(BQ * BK), O(BQ * HSp), m(BQ), l(BQ), kbias(BK) {}
};

// Folds one tile of scores into the running (m, l, O) of each row; S becomes P.
void online_softmax_tile(FwdScratch& w, int64_t nq, int64_t HSp) {
  for (int64_t i = 0; i < nq; i++) {
    float* s = w.S.data() + i * BK;
    const float m_new = std::max(w.m[i], max_of(s, BK));
    if (m_new == kNegInf) {  // nothing visible yet in this row
      std::fill(s, s + BK, 0.0f);
      continue;
    }
    const float corr = std::exp(w.m[i] - m_new);  // 0 when m was -inf
    const float sum = exp_shift_sum(s, s, BK, m_new);
    w.l[i] = w.l[i] * corr + sum;
    w.m[i] = m_new;
    float* o = w.O.data() + i * HSp;
    if (corr != 1.0f)
      for (int64_t e = 0; e < HSp; e++) o[e] *= corr;
  }
  // Padding rows (up to a multiple of 4) take no part in P V.
  std::fill(w.S.data() + nq * BK, w.S.data() + round_up(nq, 4) * BK, 0.0f);
}

void forward_tile(float* out, float* lse, const float* q, const float* k, const float* v,
                  const Problem& p, int64_t b, int64_t h, int64_t i0, FwdScratch& w) {
  const AttentionDims& d = p.d;
  const int64_t nq = std::min(BQ, d.Tq - i0), HSp = p.HSp;
  pack_rows(w.Qs.data(), q + (b * d.Tq + i0) * d.ldq + h * d.HS, d.ldq, nq, BQ, d.HS, HSp);
  std::fill(w.O.begin(), w.O.end(), 0.0f);
  std::fill(w.m.begin(), w.m.end(), kNegInf);
  std::fill(w.l.begin(), w.l.end(), 0.0f);
  const int64_t kt_end = key_tiles_end(p, i0, nq);
  for (int64_t kt = 0; kt < kt_end; kt++) {
    const int64_t j0 = kt * BK, nk = std::min(BK, d.Tk - j0);
    const float* kp = k + (b * d.Tk + j0) * d.ldk + h * d.HS;
    const float* vp = v + (b * d.Tk + j0) * d.ldv + h * d.HS;
    pack_transposed(w.KT.data(), kp, d.ldk, nk, d.HS);
    pack_rows(w.Vs.data(), vp, d.ldv, nk, BK, d.HS, HSp);
    key_bias(w.kbias.data(), p, b, j0, nk);
    score_tile(w.S.data(), w.Qs.data(), w.KT.data(), w.kbias.data(), p, i0, nq, j0);
    online_softmax_tile(w, nq, HSp);
    mm(round_up(nq, 4), HSp, nk, w.S.data(), BK, 1, w.Vs.data(), HSp, w.O.data(), HSp, true);
  }
  for (int64_t i = 0; i < nq; i++) {
    float* o = out + (b * d.Tq + i0 + i) * d.ldo + h * d.HS;
    const float l = w.l[i];
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;  // fully masked row: out = 0
    for (int64_t e = 0; e < d.HS; e++) o[e] = w.O[i * HSp + e] * inv;
    lse[(b * d.NH + h) * d.Tq + i0 + i] = l > 0.0f ? w.m[i] + std::log(l) : kNegInf;
  }
}

}  // namespace

void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       const uint8_t* key_mask, const AttentionDims& dims) {
  const Problem p = make_problem(dims, key_mask);
  const AttentionDims& d = p.d;
  const int64_t qtiles = (d.Tq + BQ - 1) / BQ, units = d.B * d.NH * qtiles;
  const bool par = units > 1 && d.Tq * d.Tk * d.HS * d.B * d.NH >= (1 << 16);
#pragma omp parallel if (par)
  {
    FwdScratch w(d.HS, p.HSp);
    // Round-robin over (b, h, query tile): under a causal mask later tiles cost more.
#pragma omp for schedule(static, 1)
    for (int64_t u = 0; u < units; u++) {
      const int64_t bh = u / qtiles, qt = u % qtiles;
      forward_tile(out, lse, q, k, v, p, bh / d.NH, bh % d.NH, qt * BQ, w);
    }
  }
}

// ---- Backward -----------------------------------------------------------------------------------

namespace {

struct BwdScratch {
  std::vector<float> D, dQ, Ks, KT, VT, dK, dV, Qs, dOs, P, dS, kbias;
  BwdScratch(int64_t Tq, int64_t HS, int64_t HSp)
      : D(round_up(Tq, BQ)),
        dQ(round_up(Tq, BQ) * HSp),
        Ks(BK * HSp),
        KT(HS * BK),
        VT(HS * BK),
        dK(BK * HSp),
        dV(BK * HSp),
        Qs(BQ * HSp),
        dOs(BQ * HSp),
        P(BQ * BK),
        dS(BQ * BK),
        kbias(BK) {}
};

// One (key tile, query tile) step; w.Ks/KT/VT/kbias hold key tile j0.
void backward_step(const float* q, const float* dout, const float* lse, const Problem& p, int64_t b,
                   int64_t h, int64_t i0, int64_t j0, int64_t nk, BwdScratch& w) {
  const AttentionDims& d = p.d;
  const int64_t nq = std::min(BQ, d.Tq - i0), HSp = p.HSp, rows = round_up(nq, 4);
  pack_rows(w.Qs.data(), q + (b * d.Tq + i0) * d.ldq + h * d.HS, d.ldq, nq, BQ, d.HS, HSp);
  pack_rows(w.dOs.data(), dout + (b * d.Tq + i0) * d.ldo + h * d.HS, d.ldo, nq, BQ, d.HS, HSp);
  score_tile(w.P.data(), w.Qs.data(), w.KT.data(), w.kbias.data(), p, i0, nq, j0);
  // dP = dO V^T
  mm(rows, BK, d.HS, w.dOs.data(), HSp, 1, w.VT.data(), BK, w.dS.data(), BK, false);
  for (int64_t i = 0; i < rows; i++) {
    float* pr = w.P.data() + i * BK;
    float* ds = w.dS.data() + i * BK;
    const float l = i < nq ? lse[(b * d.NH + h) * d.Tq + i0 + i] : kNegInf;
    if (l == kNegInf) {  // padding row or fully masked row: no gradient
      std::fill(pr, pr + BK, 0.0f);
      std::fill(ds, ds + BK, 0.0f);
      continue;
    }
    exp_shift_sum(pr, pr, BK, l);  // P = exp(S - lse)
    const float Di = w.D[i0 + i];
    for (int64_t j = 0; j < BK; j++) ds[j] = d.scale * pr[j] * (ds[j] - Di);
  }
  const int64_t krows = round_up(nk, 4);
  // dV[BK, HS] += P^T dO;  dK += dS^T Q   (A read transposed: A(r, k) = P[k, r])
  mm(krows, HSp, nq, w.P.data(), 1, BK, w.dOs.data(), HSp, w.dV.data(), HSp, true);
  mm(krows, HSp, nq, w.dS.data(), 1, BK, w.Qs.data(), HSp, w.dK.data(), HSp, true);
  // dQ[BQ, HS] += dS K
  mm(rows, HSp, nk, w.dS.data(), BK, 1, w.Ks.data(), HSp, w.dQ.data() + i0 * HSp, HSp, true);
}

// dst rows (stride ld) += src rows [n, HSp] (first HS columns).
void add_rows(float* dst, int64_t ld, const float* src, int64_t n, int64_t HS, int64_t HSp) {
  if (dst == nullptr) return;
  for (int64_t r = 0; r < n; r++)
    for (int64_t e = 0; e < HS; e++) dst[r * ld + e] += src[r * HSp + e];
}

void backward_head(float* dq, float* dk, float* dv, const float* dout, const float* out,
                   const float* lse, const float* q, const float* k, const float* v,
                   const Problem& p, int64_t b, int64_t h, BwdScratch& w) {
  const AttentionDims& d = p.d;
  const int64_t HSp = p.HSp;
  for (int64_t i = 0; i < d.Tq; i++) {  // D_i = <dout_i, out_i>
    const float* o = out + (b * d.Tq + i) * d.ldo + h * d.HS;
    const float* g = dout + (b * d.Tq + i) * d.ldo + h * d.HS;
    float s = 0.0f;
    for (int64_t e = 0; e < d.HS; e++) s += o[e] * g[e];
    w.D[i] = s;
  }
  std::fill(w.dQ.begin(), w.dQ.end(), 0.0f);
  const int64_t qtiles = (d.Tq + BQ - 1) / BQ, ktiles = (d.Tk + BK - 1) / BK;
  for (int64_t kt = 0; kt < ktiles; kt++) {
    const int64_t j0 = kt * BK, nk = std::min(BK, d.Tk - j0);
    const float* kp = k + (b * d.Tk + j0) * d.ldk + h * d.HS;
    const float* vp = v + (b * d.Tk + j0) * d.ldv + h * d.HS;
    pack_rows(w.Ks.data(), kp, d.ldk, nk, BK, d.HS, HSp);
    pack_transposed(w.KT.data(), kp, d.ldk, nk, d.HS);
    pack_transposed(w.VT.data(), vp, d.ldv, nk, d.HS);
    key_bias(w.kbias.data(), p, b, j0, nk);
    std::fill(w.dK.begin(), w.dK.end(), 0.0f);
    std::fill(w.dV.begin(), w.dV.end(), 0.0f);
    for (int64_t qt = 0; qt < qtiles; qt++) {
      const int64_t i0 = qt * BQ;
      if (key_tiles_end(p, i0, std::min(BQ, d.Tq - i0)) <= kt) continue;  // all masked
      backward_step(q, dout, lse, p, b, h, i0, j0, nk, w);
    }
    add_rows(dk ? dk + (b * d.Tk + j0) * d.ldk + h * d.HS : nullptr, d.ldk, w.dK.data(), nk, d.HS,
             HSp);
    add_rows(dv ? dv + (b * d.Tk + j0) * d.ldv + h * d.HS : nullptr, d.ldv, w.dV.data(), nk, d.HS,
             HSp);
  }
  add_rows(dq ? dq + b * d.Tq * d.ldq + h * d.HS : nullptr, d.ldq, w.dQ.data(), d.Tq, d.HS, HSp);
}

}  // namespace

void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* out,
                        const float* lse, const float* q, const float* k, const float* v,
                        const uint8_t* key_mask, const AttentionDims& dims) {
  if (dq == nullptr && dk == nullptr && dv == nullptr) return;
  const Problem p = make_problem(dims, key_mask);
  const AttentionDims& d = p.d;
  const int64_t heads = d.B * d.NH;
  const bool par = heads > 1 && d.Tq * d.Tk * d.HS * heads >= (1 << 15);
#pragma omp parallel if (par)
  {
    BwdScratch w(d.Tq, d.HS, p.HSp);
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < heads; bh++)
      backward_head(dq, dk, dv, dout, out, lse, q, k, v, p, bh / d.NH, bh % d.NH, w);
  }
}

}  // namespace atto::kernels
