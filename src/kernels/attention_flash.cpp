// atto/kernels/attention_flash.cpp: tiled flash attention, forward and backward (the general
// path: anything the decode, tiny and short paths do not take; see attention_impl.h).
//
//   attn::flash_forward(out, lse, q, k, v, p);
//   attn::flash_backward(dq, dk, dv, dout, out, lse, q, k, v, p);
//
// Forward: one task per (b, h, query tile of BQ rows), each thread taking a contiguous run of
// tasks and packing each of its heads' keys and values once. For each key tile of bk keys the
// task computes the BQ x bk scores, applies the masks, and folds them into running row maxima m,
// sums l and output accumulators O (online softmax); at the end out = O / l, lse = m + log l.
// Only one tile of scores per thread ever exists.
//
// Backward (FlashAttention-2): one task per (b, h), so each thread owns the dq, dk, dv columns
// of its heads and the sums run in a fixed order; the head's q and dout are packed once.
// Per key tile (outer) and query tile (inner):
//   P = exp(S - lse);  dV += P^T dO;  dP = dO V^T;  dS = P (dP - D), D_i = <dO_i, O_i>;
//   dQ += scale dS K;  dK += scale dS^T Q.
//
// All tile products go through one register-blocked micro-kernel on zero-padded copies
// (head size rounded up to 16 lanes), so any HS, Tq, Tk and leading dimension work. Forward and
// backward compute the scores with one function (score_tile).

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/attention_impl.h"
#include "kernels/parallel.h"

namespace ATTO_KERNELS_NS::attn {

namespace {

constexpr int64_t BQ = 64;  // query rows per tile (at most)

// ---- Micro-kernel: C[M, N] (+)= A[M, K] B[K, N] -------------------------------------------------
// A(r, k) = A[r * ars + k * aks] (so A can be read transposed); B row-major with ldb; C row-major
// with ldc. M is a multiple of 4 and N of 16 (callers use padded buffers).
template <int NV>
void mm_block(int64_t M, int64_t K, const float* A, int64_t ars, int64_t aks, const float* B, int64_t ldb, float* C,
              int64_t ldc, bool accumulate) {
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

#if defined(__AVX2__) && !defined(__AVX512F__)
// AVX2: 4 rows x NV 8-lane vectors (12 accumulators at most, of 16 registers). The 16-lane
// blocks above hold up to 16 of GCC's split vectors (32 halves) and spilled them on every k,
// which made the AVX2 build's attention ~25x slower than AVX-512's. Each C element is still one
// in-order FMA chain over k: the same bits as the 16-lane form.
template <int NV>
void mm_block8(int64_t M, int64_t K, const float* A, int64_t ars, int64_t aks, const float* B, int64_t ldb, float* C,
               int64_t ldc, bool accumulate) {
  for (int64_t r = 0; r < M; r += 4) {
    vf8 c[4][NV];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) c[i][v] = accumulate ? load8(C + (r + i) * ldc + v * 8) : vf8{};
    const float* a = A + r * ars;
#pragma GCC unroll 1
    for (int64_t k = 0; k < K; k++) {
      vf8 b[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) b[v] = load8(B + k * ldb + v * 8);
#pragma GCC unroll 4
      for (int i = 0; i < 4; i++) {
        const vf8 ai = splat8(a[i * ars + k * aks]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) c[i][v] += ai * b[v];
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) store8(C + (r + i) * ldc + v * 8, c[i][v]);
  }
}

void mm(int64_t M, int64_t N, int64_t K, const float* A, int64_t ars, int64_t aks, const float* B, int64_t ldb,
        float* C, int64_t ldc, bool accumulate) {
  int64_t n0 = 0;  // N is a multiple of 16: blocks of 24 columns, then 16 or 8
  for (; n0 + 24 <= N; n0 += 24) mm_block8<3>(M, K, A, ars, aks, B + n0, ldb, C + n0, ldc, accumulate);
  if (N - n0 == 16) mm_block8<2>(M, K, A, ars, aks, B + n0, ldb, C + n0, ldc, accumulate);
  if (N - n0 == 8) mm_block8<1>(M, K, A, ars, aks, B + n0, ldb, C + n0, ldc, accumulate);
}
#elif defined(__aarch64__)
// ARM64: 4 rows x 4 NEON vectors of 4 lanes (16 accumulators of 32 registers). A 16-lane block
// is four registers a vector, and GCC kept mm_block's 4 x 4 of them on the stack; each C element
// is still one in-order FMA chain over k: the same bits as the 16-lane form.
void mm_block4(int64_t M, int64_t K, const float* A, int64_t ars, int64_t aks, const float* B, int64_t ldb, float* C,
               int64_t ldc, bool accumulate) {
  for (int64_t r = 0; r < M; r += 4) {
    float32x4_t c[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
#pragma GCC unroll 4
      for (int v = 0; v < 4; v++) c[i][v] = accumulate ? vld1q_f32(C + (r + i) * ldc + v * 4) : vdupq_n_f32(0.0f);
    const float* a = A + r * ars;
#pragma GCC unroll 1
    for (int64_t k = 0; k < K; k++) {
      float32x4_t b[4];
#pragma GCC unroll 4
      for (int v = 0; v < 4; v++) b[v] = vld1q_f32(B + k * ldb + v * 4);
#pragma GCC unroll 4
      for (int i = 0; i < 4; i++) {
        const float32x4_t ai = vdupq_n_f32(a[i * ars + k * aks]);
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) c[i][v] = vfmaq_f32(c[i][v], ai, b[v]);
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
#pragma GCC unroll 4
      for (int v = 0; v < 4; v++) vst1q_f32(C + (r + i) * ldc + v * 4, c[i][v]);
  }
}

void mm(int64_t M, int64_t N, int64_t K, const float* A, int64_t ars, int64_t aks, const float* B, int64_t ldb,
        float* C, int64_t ldc, bool accumulate) {
  for (int64_t n0 = 0; n0 < N; n0 += 16) mm_block4(M, K, A, ars, aks, B + n0, ldb, C + n0, ldc, accumulate);
}
#else
void mm(int64_t M, int64_t N, int64_t K, const float* A, int64_t ars, int64_t aks, const float* B, int64_t ldb,
        float* C, int64_t ldc, bool accumulate) {
  for (int64_t n0 = 0; n0 < N; n0 += 4 * W) {
    switch (std::min<int64_t>(4, (N - n0) / W)) {
      case 4: mm_block<4>(M, K, A, ars, aks, B + n0, ldb, C + n0, ldc, accumulate); break;
      case 3: mm_block<3>(M, K, A, ars, aks, B + n0, ldb, C + n0, ldc, accumulate); break;
      case 2: mm_block<2>(M, K, A, ars, aks, B + n0, ldb, C + n0, ldc, accumulate); break;
      default: mm_block<1>(M, K, A, ars, aks, B + n0, ldb, C + n0, ldc, accumulate); break;
    }
  }
}
#endif

// ---- Packing and scores -------------------------------------------------------------------------

// dst[0, 16 * ceil(n / 16)) = src[0, n) then zeros. Rows here are a few dozen floats: a libc
// memcpy call per row cost more than the copy, so AVX-512 masked loads do it inline (lanes
// past n are neither read nor faulted on).
VINLINE void copy_row_padded(float* dst, const float* src, int64_t n) {
#ifdef __AVX512F__
  int64_t e = 0;
  for (; e + W <= n; e += W) _mm512_storeu_ps(dst + e, _mm512_loadu_ps(src + e));
  if (e < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - e)) - 1u);
    _mm512_storeu_ps(dst + e, _mm512_maskz_loadu_ps(m, src + e));
  }
#elif defined(__aarch64__)
  int64_t e = 0;  // whole vectors, then the last 1-3 floats lane by lane (none read past n)
  for (; e < n; e += 4) vst1q_f32(dst + e, simd::load4_part(src + e, n - e));
  for (; e < round_up(n, W); e += 4) vst1q_f32(dst + e, vdupq_n_f32(0.0f));
#elif defined(__AVX2__)
  int64_t e = 0;
  for (; e + 8 <= n; e += 8) _mm256_storeu_ps(dst + e, _mm256_loadu_ps(src + e));
  if (e < n) {  // a masked load reads (and faults on) lanes below n only
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - e)), iota);
    _mm256_storeu_ps(dst + e, _mm256_maskload_ps(src + e, m));
    e += 8;
  }
  for (; e < round_up(n, W); e += 8) _mm256_storeu_ps(dst + e, _mm256_setzero_ps());
#else
  std::memcpy(dst, src, sizeof(float) * n);
  std::fill(dst + n, dst + round_up(n, W), 0.0f);
#endif
}

// Copies n rows of HS floats (row stride ld) into dst[rows_pad, HSp], zero padding.
void pack_rows(float* dst, const float* src, int64_t ld, int64_t n, int64_t rows_pad, int64_t HS, int64_t HSp) {
  for (int64_t r = 0; r < n; r++) {
    copy_row_padded(dst + r * HSp, src + r * ld, HS);
    if (HSp > round_up(HS, W)) std::fill(dst + r * HSp + round_up(HS, W), dst + (r + 1) * HSp, 0.0f);
  }
  std::fill(dst + n * HSp, dst + rows_pad * HSp, 0.0f);
}

// S[BQ, bk] = scale * Qs[BQ, HS] KT[HS, bk] (KT's row stride ldkt), masked to -inf: the one
// definition of the scores, shared by forward and backward so that backward's exp(S - lse)
// matches forward exactly.
void score_tile(float* S, const float* Qs, const float* KT, int64_t ldkt, const float* kbias, const Problem& p,
                int64_t i0, int64_t nq, int64_t j0) {
  const int64_t rows = round_up(nq, 4), bk = p.bk;
  mm(rows, bk, p.d.HS, Qs, p.HSp, 1, KT, ldkt, S, bk, false);
  for (int64_t i = 0; i < nq; i++) {
    float* s = S + i * bk;
    for (int64_t j = 0; j < bk; j++) s[j] = s[j] * p.d.scale + kbias[j];
    if (p.d.causal) {
      const int64_t visible = std::clamp<int64_t>(i0 + i + p.off - j0 + 1, 0, bk);
      for (int64_t j = visible; j < bk; j++) s[j] = kNegInf;
    }
  }
}

// ---- Forward ------------------------------------------------------------------------------------

// KT and Vs hold the keys (transposed, row stride ldkt) and values of one head, packed one key
// tile at a time as query tiles first need them (tiles [0, packed) of head `bh` are there), so
// a head's keys are packed once, not once per query tile.
struct FwdScratch {
  int64_t ldkt;
  AlignedVector<float> Qs, KT, Vs, S, O, m, l, kbias;
  int64_t bh = -1, packed = 0;
  FwdScratch(int64_t HS, int64_t HSp, int64_t ktiles, int64_t bk)
      : ldkt(ktiles * bk),
        Qs(BQ * HSp),
        KT(HS * ktiles * bk),
        Vs(ktiles * bk * HSp),
        S(BQ * BK),
        O(BQ * HSp),
        m(BQ),
        l(BQ),
        kbias(BK) {}
};

// Folds one tile of scores into the running (m, l, O) of each row; S becomes P.
void online_softmax_tile(FwdScratch& w, int64_t nq, int64_t HSp, int64_t bk) {
  online_softmax_rows(w.S.data(), bk, bk, nq, w.m.data(), w.l.data(), w.O.data(), HSp);
  // Padding rows (up to a multiple of 4) take no part in P V.
  std::fill(w.S.data() + nq * bk, w.S.data() + round_up(nq, 4) * bk, 0.0f);
}

void forward_tile(float* out, float* lse, const float* q, const float* k, const float* v, const Problem& p, int64_t b,
                  int64_t h, int64_t i0, FwdScratch& w) {
  const AttentionDims& d = p.d;
  const int64_t nq = std::min(BQ, d.Tq - i0), HSp = p.HSp, bk = p.bk, rows = round_up(nq, 4);
  pack_rows(w.Qs.data(), q + (b * d.Tq + i0) * d.ldq + h * d.HS, d.ldq, nq, rows, d.HS, HSp);
  std::fill(w.O.begin(), w.O.begin() + rows * HSp, 0.0f);
  std::fill(w.m.begin(), w.m.end(), kNegInf);
  std::fill(w.l.begin(), w.l.end(), 0.0f);
  const int64_t kt_end = key_tiles_end(p, i0, nq);
  if (w.bh != b * d.NH + h) {
    w.bh = b * d.NH + h;
    w.packed = 0;
  }
  for (; w.packed < kt_end; w.packed++) {
    const int64_t j0 = w.packed * bk, nk = std::min(bk, d.Tk - j0);
    pack_transposed(w.KT.data() + j0, w.ldkt, k + (b * d.Tk + j0) * d.ldk + h * d.HS, d.ldk, nk, d.HS, bk);
    pack_rows(w.Vs.data() + j0 * HSp, v + (b * d.Tk + j0) * d.ldv + h * d.HS, d.ldv, nk, bk, d.HS, HSp);
  }
  for (int64_t kt = 0; kt < kt_end; kt++) {
    const int64_t j0 = kt * bk, nk = std::min(bk, d.Tk - j0);
    key_bias(w.kbias.data(), p, b, j0, nk);
    score_tile(w.S.data(), w.Qs.data(), w.KT.data() + j0, w.ldkt, w.kbias.data(), p, i0, nq, j0);
    online_softmax_tile(w, nq, HSp, bk);
    mm(rows, HSp, nk, w.S.data(), bk, 1, w.Vs.data() + j0 * HSp, HSp, w.O.data(), HSp, true);
  }
  finish_rows(out, lse, w.O.data(), HSp, w.m.data(), w.l.data(), p, b, h, i0, nq);
}

// ---- Backward -----------------------------------------------------------------------------------

// Qs and dOs hold all Tq rows of the head's queries and output gradients (packed once per head),
// padded to a multiple of 4 rows: a query tile [i0, i0 + nq) uses rows up to i0 + round_up(nq, 4).
struct BwdScratch {
  AlignedVector<float> D, dQ, Ks, KT, VT, dK, dV, Qs, dOs, P, dS, kbias;
  BwdScratch(int64_t Tq, int64_t HS, int64_t HSp)
      : D(round_up(Tq, 4)),
        dQ(round_up(Tq, 4) * HSp),
        Ks(BK * HSp),
        KT(HS * BK),
        VT(HS * BK),
        dK(BK * HSp),
        dV(BK * HSp),
        Qs(round_up(Tq, 4) * HSp),
        dOs(round_up(Tq, 4) * HSp),
        P(BQ * BK),
        dS(BQ * BK),
        kbias(BK) {}
};

// One (key tile, query tile) step; w.Ks/KT/VT/kbias hold key tile j0.
void backward_step(const float* q, const float* dout, const float* lse, const Problem& p, int64_t b, int64_t h,
                   int64_t i0, int64_t j0, int64_t nk, BwdScratch& w) {
  const AttentionDims& d = p.d;
  const int64_t nq = std::min(BQ, d.Tq - i0), HSp = p.HSp, rows = round_up(nq, 4), bk = p.bk;
  const float* Qs = w.Qs.data() + i0 * HSp;
  const float* dOs = w.dOs.data() + i0 * HSp;
  score_tile(w.P.data(), Qs, w.KT.data(), bk, w.kbias.data(), p, i0, nq, j0);
  // dP = dO V^T
  mm(rows, bk, d.HS, dOs, HSp, 1, w.VT.data(), bk, w.dS.data(), bk, false);
  softmax_backward_rows(w.P.data(), w.dS.data(), bk, bk, rows, nq, lse + (b * d.NH + h) * d.Tq + i0, w.D.data() + i0,
                        d.scale);
  const int64_t krows = round_up(nk, 4);
  // dV[bk, HS] += P^T dO;  dK += dS^T Q   (A read transposed: A(r, k) = P[k, r])
  mm(krows, HSp, nq, w.P.data(), 1, bk, dOs, HSp, w.dV.data(), HSp, true);
  mm(krows, HSp, nq, w.dS.data(), 1, bk, Qs, HSp, w.dK.data(), HSp, true);
  // dQ[BQ, HS] += dS K
  mm(rows, HSp, nk, w.dS.data(), bk, 1, w.Ks.data(), HSp, w.dQ.data() + i0 * HSp, HSp, true);
}

void backward_head(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                   const float* q, const float* k, const float* v, const Problem& p, int64_t b, int64_t h,
                   BwdScratch& w) {
  const AttentionDims& d = p.d;
  const int64_t HSp = p.HSp;
  for (int64_t i = 0; i < d.Tq; i++) {  // D_i = <dout_i, out_i>
    const int64_t at = (b * d.Tq + i) * d.ldo + h * d.HS;
    w.D[i] = dot_hs(out + at, dout + at, d.HS);
  }
  std::fill(w.dQ.begin(), w.dQ.end(), 0.0f);
  const int64_t Tqp = round_up(d.Tq, 4);
  pack_rows(w.Qs.data(), q + b * d.Tq * d.ldq + h * d.HS, d.ldq, d.Tq, Tqp, d.HS, HSp);
  pack_rows(w.dOs.data(), dout + b * d.Tq * d.ldo + h * d.HS, d.ldo, d.Tq, Tqp, d.HS, HSp);
  const int64_t bk = p.bk, qtiles = (d.Tq + BQ - 1) / BQ, ktiles = (d.Tk + bk - 1) / bk;
  for (int64_t kt = 0; kt < ktiles; kt++) {
    const int64_t j0 = kt * bk, nk = std::min(bk, d.Tk - j0);
    const float* kp = k + (b * d.Tk + j0) * d.ldk + h * d.HS;
    const float* vp = v + (b * d.Tk + j0) * d.ldv + h * d.HS;
    pack_rows(w.Ks.data(), kp, d.ldk, nk, bk, d.HS, HSp);
    pack_transposed(w.KT.data(), bk, kp, d.ldk, nk, d.HS, bk);
    pack_transposed(w.VT.data(), bk, vp, d.ldv, nk, d.HS, bk);
    key_bias(w.kbias.data(), p, b, j0, nk);
    std::fill(w.dK.begin(), w.dK.begin() + round_up(nk, 4) * HSp, 0.0f);
    std::fill(w.dV.begin(), w.dV.begin() + round_up(nk, 4) * HSp, 0.0f);
    for (int64_t qt = 0; qt < qtiles; qt++) {
      const int64_t i0 = qt * BQ;
      if (key_tiles_end(p, i0, std::min(BQ, d.Tq - i0)) <= kt) continue;  // all masked
      backward_step(q, dout, lse, p, b, h, i0, j0, nk, w);
    }
    add_rows(dk ? dk + (b * d.Tk + j0) * d.ldk + h * d.HS : nullptr, d.ldk, w.dK.data(), nk, d.HS, HSp, d.accumulate);
    add_rows(dv ? dv + (b * d.Tk + j0) * d.ldv + h * d.HS : nullptr, d.ldv, w.dV.data(), nk, d.HS, HSp, d.accumulate);
  }
  add_rows(dq ? dq + b * d.Tq * d.ldq + h * d.HS : nullptr, d.ldq, w.dQ.data(), d.Tq, d.HS, HSp, d.accumulate);
}

}  // namespace

void flash_forward(float* out, float* lse, const float* q, const float* k, const float* v, const Problem& p) {
  const AttentionDims& d = p.d;
  const int64_t qtiles = (d.Tq + BQ - 1) / BQ, units = d.B * d.NH * qtiles;
  const bool par = units > 1 && d.Tq * d.Tk * d.HS * d.B * d.NH >= (1 << 16);
  parallel_region(par, [&](int64_t t, int64_t nt) {
    FwdScratch w(d.HS, p.HSp, (d.Tk + p.bk - 1) / p.bk, p.bk);
    // Contiguous runs of (b, h, query tile): a thread packs each of its heads' keys once. Every
    // head costs the same, so only the head at the split is shared.
    const auto [u0, u1] = static_range(units, t, nt);
    for (int64_t u = u0; u < u1; u++) {
      const int64_t bh = u / qtiles, qt = u % qtiles;
      forward_tile(out, lse, q, k, v, p, bh / d.NH, bh % d.NH, qt * BQ, w);
    }
  });
}

void flash_backward(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                    const float* q, const float* k, const float* v, const Problem& p) {
  const AttentionDims& d = p.d;
  const int64_t heads = d.B * d.NH;
  const bool par = heads > 1 && d.Tq * d.Tk * d.HS * heads >= (1 << 15);
  parallel_region(par, [&](int64_t t, int64_t nt) {
    BwdScratch w(d.Tq, d.HS, p.HSp);
    const auto [h0, h1] = static_range(heads, t, nt);
    for (int64_t bh = h0; bh < h1; bh++) backward_head(dq, dk, dv, dout, out, lse, q, k, v, p, bh / d.NH, bh % d.NH, w);
  });
}

}  // namespace atto::kernels::attn
