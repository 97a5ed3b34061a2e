// atto/kernels/attention.cpp: fused flash-attention style forward and backward on the CPU.
//
// Forward: one task per (b, h, query tile of BQ rows), each thread taking a contiguous run of
// tasks and packing each of its heads' keys and values once. For each key tile of BK keys the
// task computes the BQ x BK scores, applies the masks, and folds them into running row maxima m,
// sums l and output accumulators O (online softmax); at the end out = O / l, lse = m + log l.
// Only one tile of scores per thread ever exists. Up to 4 query rows (decoding) skip the tiles:
// each row's scores, softmax and weighted sum of values are computed directly (forward_row).
//
// Backward (FlashAttention-2): one task per (b, h), so each thread owns the dq, dk, dv columns
// of its heads and the sums run in a fixed order; the head's q and dout are packed once.
// Per key tile (outer) and query tile (inner):
//   P = exp(S - lse);  dV += P^T dO;  dP = dO V^T;  dS = P (dP - D), D_i = <dO_i, O_i>;
//   dQ += scale dS K;  dK += scale dS^T Q.
//
// All tile products go through one register-blocked micro-kernel on zero-padded copies
// (head size rounded up to 16 lanes), so any HS, Tq, Tk and leading dimension work.
//
// Short sequences (Tk <= 64, HS <= 64) skip the tiles in both directions: one head at a time
// with the keys in vector lanes and query rows in small groups (forward_small, backward_small).

// 64-byte vectors never cross a call here (helpers are always inlined); without AVX-512, GCC
// would still warn that their calling convention differs between targets.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/parallel.h"
#include "kernels/simd.h"

namespace atto::kernels {

namespace {

using namespace simd;
constexpr int64_t BQ = 64;  // query rows per tile (at most)
constexpr int64_t BK = 64;  // keys per tile (at most; Problem::bk is the width in use)
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

// Rows of scores are bk floats, a multiple of 16: whole vectors, no tails. Inlined so that the
// exps of consecutive rows overlap in the pipeline (a call per row left them serialised).
VINLINE float row_max(const float* s, int64_t n) {
  vf16 m = load(s);
  for (int64_t j = W; j < n; j += W) m = vmax(m, load(s + j));
  return hmax(m);
}
// s = exp(s - shift) in place; returns the sum (lane partial sums, then the fixed tree).
VINLINE float row_exp_sum(float* s, int64_t n, float shift) {
  const vf16 sh = splat(shift);
  vf16 acc = splat(0.0f);
  for (int64_t j = 0; j < n; j += W) {
    const vf16 e = vexp(load(s + j) - sh);
    store(s + j, e);
    acc += e;
  }
  return hsum(acc);
}

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
  // Keys per tile: BK, or Tk rounded up to 16 when shorter (T = 16 scores 16 columns, not 64).
  // With Tk < BK there is one key tile either way, and the extra columns were -inf scores whose
  // exp adds exact zeros, so the width changes the work, not the results.
  int64_t bk = BK;
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
  p.bk = std::min(BK, round_up(std::max<int64_t>(dims.Tk, 1), W));
  p.key_mask = key_mask;
  return p;
}

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
#else
  std::memcpy(dst, src, sizeof(float) * n);
  std::fill(dst + n, dst + round_up(n, W), 0.0f);
#endif
}

// Copies n rows of HS floats (row stride ld) into dst[rows_pad, HSp], zero padding.
void pack_rows(float* dst, const float* src, int64_t ld, int64_t n, int64_t rows_pad, int64_t HS,
               int64_t HSp) {
  for (int64_t r = 0; r < n; r++) {
    copy_row_padded(dst + r * HSp, src + r * ld, HS);
    if (HSp > round_up(HS, W)) std::fill(dst + r * HSp + round_up(HS, W), dst + (r + 1) * HSp, 0.0f);
  }
  std::fill(dst + n * HSp, dst + rows_pad * HSp, 0.0f);
}


// dst[HS, bk] (row stride ldd) = the transpose of n rows of HS floats (row stride ld), zero
// padding (bk is a multiple of 16).
void pack_transposed(float* dst, int64_t ldd, const float* src, int64_t ld, int64_t n, int64_t HS,
                     int64_t bk) {
  for (int64_t j0 = 0; j0 < bk; j0 += W) {
    const int64_t nr = std::clamp<int64_t>(n - j0, 0, W);
    for (int64_t e0 = 0; e0 < HS; e0 += W)
      transpose16(dst + e0 * ldd + j0, ldd, src + j0 * ld + e0, ld, nr, std::min<int64_t>(W, HS - e0));
  }
}

// Key tile [j0, j0 + nk) of batch b: kbias[j] = 0, or -inf for padding and masked keys.
void key_bias(float* kbias, const Problem& p, int64_t b, int64_t j0, int64_t nk) {
  for (int64_t j = 0; j < p.bk; j++) {
    const bool pad = j >= nk;
    const bool masked = !pad && p.key_mask != nullptr && p.key_mask[b * p.d.Tk + j0 + j] == 0;
    kbias[j] = pad || masked ? kNegInf : 0.0f;
  }
}

// S[BQ, bk] = scale * Qs[BQ, HS] KT[HS, bk] (KT's row stride ldkt), masked to -inf: the one
// definition of the scores, shared by forward and backward so that backward's exp(S - lse)
// matches forward exactly.
void score_tile(float* S, const float* Qs, const float* KT, int64_t ldkt, const float* kbias,
                const Problem& p, int64_t i0, int64_t nq, int64_t j0) {
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

// Query tile [i0, i0 + nq) sees key tiles [0, key_tiles_end) (fewer under a causal mask).
int64_t key_tiles_end(const Problem& p, int64_t i0, int64_t nq) {
  const int64_t ntiles = (p.d.Tk + p.bk - 1) / p.bk;
  if (!p.d.causal) return ntiles;
  const int64_t last_key = i0 + nq - 1 + p.off;  // the last query row's last visible key
  if (last_key < 0) return 0;
  return std::min(ntiles, last_key / p.bk + 1);
}

// ---- Forward ------------------------------------------------------------------------------------

// KT and Vs hold the keys (transposed, row stride ldkt) and values of one head, packed one key
// tile at a time as query tiles first need them (tiles [0, packed) of head `bh` are there), so
// a head's keys are packed once, not once per query tile.
struct FwdScratch {
  int64_t ldkt;
  std::vector<float> Qs, KT, Vs, S, O, m, l, kbias;
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
  for (int64_t i = 0; i < nq; i++) {
    float* s = w.S.data() + i * bk;
    const float m_new = std::max(w.m[i], row_max(s, bk));
    if (m_new == kNegInf) {  // nothing visible yet in this row
      std::fill(s, s + bk, 0.0f);
      continue;
    }
    const float corr = std::exp(w.m[i] - m_new);  // 0 when m was -inf
    const float sum = row_exp_sum(s, bk, m_new);
    w.l[i] = w.l[i] * corr + sum;
    w.m[i] = m_new;
    float* o = w.O.data() + i * HSp;
    if (corr != 1.0f)
      for (int64_t e = 0; e < HSp; e++) o[e] *= corr;
  }
  // Padding rows (up to a multiple of 4) take no part in P V.
  std::fill(w.S.data() + nq * bk, w.S.data() + round_up(nq, 4) * bk, 0.0f);
}

void forward_tile(float* out, float* lse, const float* q, const float* k, const float* v,
                  const Problem& p, int64_t b, int64_t h, int64_t i0, FwdScratch& w) {
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
    pack_transposed(w.KT.data() + j0, w.ldkt, k + (b * d.Tk + j0) * d.ldk + h * d.HS, d.ldk, nk,
                    d.HS, bk);
    pack_rows(w.Vs.data() + j0 * HSp, v + (b * d.Tk + j0) * d.ldv + h * d.HS, d.ldv, nk, bk, d.HS,
              HSp);
  }
  for (int64_t kt = 0; kt < kt_end; kt++) {
    const int64_t j0 = kt * bk, nk = std::min(bk, d.Tk - j0);
    key_bias(w.kbias.data(), p, b, j0, nk);
    score_tile(w.S.data(), w.Qs.data(), w.KT.data() + j0, w.ldkt, w.kbias.data(), p, i0, nq, j0);
    online_softmax_tile(w, nq, HSp, bk);
    mm(rows, HSp, nk, w.S.data(), bk, 1, w.Vs.data() + j0 * HSp, HSp, w.O.data(), HSp, true);
  }
  for (int64_t i = 0; i < nq; i++) {
    float* o = out + (b * d.Tq + i0 + i) * d.ldo + h * d.HS;
    const float l = w.l[i];
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;  // fully masked row: out = 0
    for (int64_t e = 0; e < d.HS; e++) o[e] = w.O[i * HSp + e] * inv;
    lse[(b * d.NH + h) * d.Tq + i0 + i] = l > 0.0f ? w.m[i] + std::log(l) : kNegInf;
  }
}

// ---- Forward for a few query rows (decoding) ----------------------------------------------------
// One new token per step: packing 64-row query tiles and transposed key tiles would be mostly
// padding. Each (b, h, row) is done directly on the strided q, k, v: scores s_j = scale <q, k_j>
// for the visible keys, m = max, p_j = exp(s_j - m), l = sum p (16-lane sums, fixed tree),
// out = (sum_j p_j v_j) / l. `s` holds Tk floats.
constexpr int64_t kFewQueryRows = 4;  // Tq at most this takes the direct path

VINLINE float dot_hs(const float* a, const float* b, int64_t HS) {
  vf16 acc{};
  int64_t e = 0;
  for (; e + W <= HS; e += W) acc += load(a + e) * load(b + e);
  if (e < HS) acc += load_part(a + e, HS - e) * load_part(b + e, HS - e);
  return hsum(acc);
}

void forward_row(float* out, float* lse, const float* q, const float* k, const float* v,
                 const Problem& p, int64_t b, int64_t h, int64_t i, float* s) {
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
  // out = sum_j p_j v_j, 64 columns (4 vectors) at a time.
  for (int64_t e0 = 0; e0 < d.HS; e0 += 4 * W) {
    const int64_t ne = std::min<int64_t>(4 * W, d.HS - e0);
    vf16 acc[4] = {};
    for (int64_t j = 0; j < n; j++) {
      if (s[j] == 0.0f) continue;  // masked (or underflowed) keys add nothing
      const vf16 pj = splat(s[j]);
      const float* vj = vb + j * d.ldv + e0;
      for (int c = 0; c < 4; c++) {
        const int64_t at = c * W;
        if (at + W <= ne) {
          acc[c] += pj * load(vj + at);
        } else if (at < ne) {
          acc[c] += pj * load_part(vj + at, ne - at);
        }
      }
    }
    for (int c = 0; c < 4; c++) {
      const int64_t at = c * W;
      if (at + W <= ne) {
        store(o + e0 + at, acc[c] * inv);
      } else if (at < ne) {
        store_part(o + e0 + at, acc[c] * inv, ne - at);
      }
    }
  }
  *row_lse = m + std::log(l);
}

void forward_few_rows(float* out, float* lse, const float* q, const float* k, const float* v,
                      const Problem& p) {
  const AttentionDims& d = p.d;
  const int64_t units = d.B * d.NH * d.Tq;
  const bool par = units > 1 && d.Tq * d.Tk * d.HS * d.B * d.NH >= (1 << 16);
  parallel_region(par, [&](int64_t t, int64_t nt) {
    thread_local std::vector<float> s;  // scores; reused across calls (no per-token allocation)
    if (static_cast<int64_t>(s.size()) < round_up(d.Tk, W)) s.resize(round_up(d.Tk, W));
    const auto [u0, u1] = static_range(units, t, nt);
    for (int64_t u = u0; u < u1; u++) {
      const int64_t bh = u / d.Tq;
      forward_row(out, lse, q, k, v, p, bh / d.NH, bh % d.NH, u % d.Tq, s.data());
    }
  });
}

// ---- Short sequences (Tk <= 64, HS <= 64): one head at a time, keys in vector lanes -------------
// With at most 64 keys a query row's scores are at most 4 vectors, so each row is done straight
// from registers: s = scale q K^T + mask (the transposed keys KT[HS, 64] packed once per head),
// softmax, out = sum_j p_j v_j; the backward likewise per query row, accumulating dK and dV
// transposed (dKT[d, j] += q_d dS_j, dVT[d, j] += dO_d P_j) and transposing them back at the
// end. No query tiles, no zero-padded head columns (head size 8 used to pay for 16) and no
// score matrix in memory: at T = 16, HS = 8 the tiled path spent ~3x the time. Forward and
// backward share small_scores, so the backward's exp(S - lse) sees the forward's exact scores.
constexpr int64_t kSmallKeys = 64;   // Tk at most this takes the short path
constexpr int64_t kSmallHead = 64;   // and HS at most this

bool use_small(const AttentionDims& d) {
  return d.Tk >= 1 && d.Tk <= kSmallKeys && d.HS <= kSmallHead;
}

struct SmallScratch {
  int64_t ldkt = 0;  // Tk rounded up to 16
  std::vector<float> KT, VT, dKT, dVT, kb, pb, tmp;
  SmallScratch(int64_t Tk, int64_t HS) : ldkt(round_up(Tk, W)) {
    KT.resize(HS * ldkt);
    VT.resize(HS * ldkt);
    dKT.resize(HS * ldkt);
    dVT.resize(HS * ldkt);
    kb.resize(ldkt);
    pb.resize(4 * kSmallKeys);  // one row of weights per row of a group
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
VINLINE void small_scores(vf16 (&s)[G][NV], const float* qh, int64_t ldq, const RowGroup<G>& r,
                          const float* KT, int64_t ldkt, const float* kb, int64_t HS, float scale) {
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
VINLINE void weighted_rows(vf16 (&acc)[G][HV], const float* c, int64_t ldc, const float* rows,
                           int64_t ld, int64_t n, int64_t HS) {
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
void small_pack(SmallScratch& w, const Problem& p, const float* k, const float* v, int64_t b,
                int64_t h) {
  const AttentionDims& d = p.d;
  pack_transposed(w.KT.data(), w.ldkt, k + b * d.Tk * d.ldk + h * d.HS, d.ldk, d.Tk, d.HS, w.ldkt);
  if (v != nullptr)
    pack_transposed(w.VT.data(), w.ldkt, v + b * d.Tk * d.ldv + h * d.HS, d.ldv, d.Tk, d.HS,
                    w.ldkt);
  key_bias(w.kb.data(), p, b, 0, d.Tk);  // one key tile: p.bk == ldkt here
}

constexpr int64_t kPbStride = kSmallKeys;  // floats per row of the weights buffer

template <int NV, int HV, int G>
void small_forward_rows(float* out, float* lse, const float* q, const float* v, const Problem& p,
                        int64_t b, int64_t h, int64_t i0, SmallScratch& w) {
  const AttentionDims& d = p.d;
  const RowGroup<G> r = row_group<G>(p, i0);
  vf16 s[G][NV];
  small_scores<NV, G>(s, q + b * d.Tq * d.ldq + h * d.HS, d.ldq, r, w.KT.data(), w.ldkt,
                      w.kb.data(), d.HS, d.scale);
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
  weighted_rows<HV, G>(acc, w.pb.data(), kPbStride, v + b * d.Tk * d.ldv + h * d.HS, d.ldv,
                       r.n_max, d.HS);
#pragma GCC unroll 4
  for (int g = 0; g < G; g++) {
    if (!r.valid[g]) continue;
    store_row<HV>(out + (b * d.Tq + r.row[g]) * d.ldo + h * d.HS, acc[g], inv[g], d.HS, false);
    lse[(b * d.NH + h) * d.Tq + r.row[g]] = lrow[g];
  }
}

// Calls rows.template operator()<NV, HV, G>(i0) for the groups of the head's query rows:
// groups of 4 rows while a row's scores fit in 2 vectors (Tk <= 32), else of 2 (registers);
// NV from the group's widest row (rows of a causal group differ by < 4 keys), HV from HS.
template <int HV, class F>
void small_row_groups_hv(const Problem& p, F& rows) {
  for (int64_t i0 = 0; i0 < p.d.Tq;) {
    const int64_t nv4 = (visible_keys(p, std::min(i0 + 3, p.d.Tq - 1)) + W - 1) / W;
    switch (std::clamp<int64_t>(nv4, 1, 4)) {
      case 1: rows.template operator()<1, HV, 4>(i0); i0 += 4; break;
      case 2: rows.template operator()<2, HV, 4>(i0); i0 += 4; break;
      case 3: rows.template operator()<3, HV, 2>(i0); i0 += 2; break;
      default: rows.template operator()<4, HV, 2>(i0); i0 += 2; break;
    }
  }
}

template <class F>
void small_row_groups(const Problem& p, F&& rows) {
  switch ((p.d.HS + W - 1) / W) {
    case 1: small_row_groups_hv<1>(p, rows); break;
    case 2: small_row_groups_hv<2>(p, rows); break;
    case 3: small_row_groups_hv<3>(p, rows); break;
    default: small_row_groups_hv<4>(p, rows); break;
  }
}

// head(b, h, scratch) for every head, a contiguous run of heads per thread.
template <class F>
void for_each_small_head(const Problem& p, F&& head) {
  const AttentionDims& d = p.d;
  const int64_t heads = d.B * d.NH;
  const bool par = heads > 1 && d.Tq * d.Tk * d.HS * heads >= (1 << 15);
  parallel_region(par, [&](int64_t t, int64_t nt) {
    SmallScratch w(d.Tk, d.HS);
    const auto [h0, h1] = static_range(heads, t, nt);
    for (int64_t bh = h0; bh < h1; bh++) head(bh / d.NH, bh % d.NH, w);
  });
}

void forward_small(float* out, float* lse, const float* q, const float* k, const float* v,
                   const Problem& p) {
  for_each_small_head(p, [&](int64_t b, int64_t h, SmallScratch& w) {
    small_pack(w, p, k, nullptr, b, h);
    small_row_groups(p, [&]<int NV, int HV, int G>(int64_t i0) {
      small_forward_rows<NV, HV, G>(out, lse, q, v, p, b, h, i0, w);
    });
  });
}

}  // namespace

// ---- Backward -----------------------------------------------------------------------------------

namespace {

// Qs and dOs hold all Tq rows of the head's queries and output gradients (packed once per head),
// padded to a multiple of 4 rows: a query tile [i0, i0 + nq) uses rows up to i0 + round_up(nq, 4).
struct BwdScratch {
  std::vector<float> D, dQ, Ks, KT, VT, dK, dV, Qs, dOs, P, dS, kbias;
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
void backward_step(const float* q, const float* dout, const float* lse, const Problem& p, int64_t b,
                   int64_t h, int64_t i0, int64_t j0, int64_t nk, BwdScratch& w) {
  const AttentionDims& d = p.d;
  const int64_t nq = std::min(BQ, d.Tq - i0), HSp = p.HSp, rows = round_up(nq, 4), bk = p.bk;
  const float* Qs = w.Qs.data() + i0 * HSp;
  const float* dOs = w.dOs.data() + i0 * HSp;
  score_tile(w.P.data(), Qs, w.KT.data(), bk, w.kbias.data(), p, i0, nq, j0);
  // dP = dO V^T
  mm(rows, bk, d.HS, dOs, HSp, 1, w.VT.data(), bk, w.dS.data(), bk, false);
  for (int64_t i = 0; i < rows; i++) {
    float* pr = w.P.data() + i * bk;
    float* ds = w.dS.data() + i * bk;
    const float l = i < nq ? lse[(b * d.NH + h) * d.Tq + i0 + i] : kNegInf;
    if (l == kNegInf) {  // padding row or fully masked row: no gradient
      std::fill(pr, pr + bk, 0.0f);
      std::fill(ds, ds + bk, 0.0f);
      continue;
    }
    // P = exp(S - lse);  dS = scale P (dP - D_i)
    const vf16 lv = splat(l), Di = splat(w.D[i0 + i]), sc = splat(d.scale);
    for (int64_t j = 0; j < bk; j += W) {
      const vf16 pv = vexp(load(pr + j) - lv);
      store(pr + j, pv);
      store(ds + j, sc * pv * (load(ds + j) - Di));
    }
  }
  const int64_t krows = round_up(nk, 4);
  // dV[bk, HS] += P^T dO;  dK += dS^T Q   (A read transposed: A(r, k) = P[k, r])
  mm(krows, HSp, nq, w.P.data(), 1, bk, dOs, HSp, w.dV.data(), HSp, true);
  mm(krows, HSp, nq, w.dS.data(), 1, bk, Qs, HSp, w.dK.data(), HSp, true);
  // dQ[BQ, HS] += dS K
  mm(rows, HSp, nk, w.dS.data(), bk, 1, w.Ks.data(), HSp, w.dQ.data() + i0 * HSp, HSp, true);
}

// dst rows (stride ld) += src rows [n, HSp] (first HS columns); = when !accumulate.
void add_rows(float* dst, int64_t ld, const float* src, int64_t n, int64_t HS, int64_t HSp,
              bool accumulate) {
  if (dst == nullptr) return;
  for (int64_t r = 0; r < n; r++) {
    float* d = dst + r * ld;
    const float* x = src + r * HSp;
    for (int64_t e = 0; e < HS; e += W) {
      const int64_t cnt = std::min<int64_t>(W, HS - e);
      vf16 v = load(x + e);  // src rows are HSp (a multiple of 16) floats
      if (accumulate) v += cnt == W ? load(d + e) : load_part(d + e, cnt);
      if (cnt == W) {
        store(d + e, v);
      } else {
        store_part(d + e, v, cnt);
      }
    }
  }
}

void backward_head(float* dq, float* dk, float* dv, const float* dout, const float* out,
                   const float* lse, const float* q, const float* k, const float* v,
                   const Problem& p, int64_t b, int64_t h, BwdScratch& w) {
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
    add_rows(dk ? dk + (b * d.Tk + j0) * d.ldk + h * d.HS : nullptr, d.ldk, w.dK.data(), nk, d.HS,
             HSp, d.accumulate);
    add_rows(dv ? dv + (b * d.Tk + j0) * d.ldv + h * d.HS : nullptr, d.ldv, w.dV.data(), nk, d.HS,
             HSp, d.accumulate);
  }
  add_rows(dq ? dq + b * d.Tq * d.ldq + h * d.HS : nullptr, d.ldq, w.dQ.data(), d.Tq, d.HS, HSp,
           d.accumulate);
}

// ---- Short sequences, backward (see forward_small) ------------------------------------------

// A group of query rows: P = exp(S - lse), dP = dO V^T, dS = scale P (dP - D_i);
// dQ_i = sum_j dS_ij k_j, dKT[:, j] += q_i dS_ij, dVT[:, j] += dO_i P_ij (rows in order).
template <int NV, int HV, int G>
void small_backward_rows(float* dq, const float* dout, const float* out, const float* lse,
                         const float* q, const float* k, const Problem& p, int64_t b, int64_t h,
                         int64_t i0, SmallScratch& w) {
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
  small_scores<NV, G>(s, qh, d.ldq, r, w.KT.data(), ld, w.kb.data(), d.HS, d.scale);
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
  weighted_rows<HV, G>(acc, w.pb.data(), kPbStride, k + b * d.Tk * d.ldk + h * d.HS, d.ldk,
                       r.n_max, d.HS);
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
void small_store_transposed(float* dst, int64_t ld, const float* src, const Problem& p,
                            SmallScratch& w) {
  if (dst == nullptr) return;
  const AttentionDims& d = p.d;
  const int64_t HSp = round_up(d.HS, W);
  for (int64_t j0 = 0; j0 < d.Tk; j0 += W)
    for (int64_t e0 = 0; e0 < d.HS; e0 += W)
      transpose16(w.tmp.data() + j0 * HSp + e0, HSp, src + e0 * w.ldkt + j0, w.ldkt,
                  std::min<int64_t>(W, d.HS - e0), std::min<int64_t>(W, d.Tk - j0));
  add_rows(dst, ld, w.tmp.data(), d.Tk, d.HS, HSp, d.accumulate);
}

void backward_small(float* dq, float* dk, float* dv, const float* dout, const float* out,
                    const float* lse, const float* q, const float* k, const float* v,
                    const Problem& p) {
  const AttentionDims& d = p.d;
  for_each_small_head(p, [&](int64_t b, int64_t h, SmallScratch& w) {
    small_pack(w, p, k, v, b, h);
    std::fill(w.dKT.begin(), w.dKT.end(), 0.0f);
    std::fill(w.dVT.begin(), w.dVT.end(), 0.0f);
    small_row_groups(p, [&]<int NV, int HV, int G>(int64_t i0) {
      small_backward_rows<NV, HV, G>(dq, dout, out, lse, q, k, p, b, h, i0, w);
    });
    const int64_t at = b * d.Tk;
    small_store_transposed(dk != nullptr ? dk + at * d.ldk + h * d.HS : nullptr, d.ldk,
                           w.dKT.data(), p, w);
    small_store_transposed(dv != nullptr ? dv + at * d.ldv + h * d.HS : nullptr, d.ldv,
                           w.dVT.data(), p, w);
  });
}

// ---- Tiny heads: Tk at most 64 and HS at most 16 (both directions) ---------------------------
// Lanes hold query rows instead of keys: a block of 16 query rows is one vector, s_j (lane i =
// row i of the block) = scale <q_i, k_j> + mask for key j, and the softmax over keys runs
// elementwise across the key vectors, with no horizontal max or sum per row and no half-empty
// vectors at head size 8. The backward transposes dS and P (16 x 16 blocks, in registers) to
// accumulate dK and dV over the query blocks. Against the short path above (bench_micro's
// BM_AttentionForward / BM_AttentionForwardBackward, both threads, medians of the faster of two
// runs each): config (a) (B 64, T 16, HS 8) forward 77 -> 43 us, forward + backward 186 -> 105
// us; (b) (B 32, T 32, HS 16) 102 -> 67 us and 274 -> 203 us.
// Forward and backward share tiny_scores, so the backward's exp(S - lse) sees the forward's
// exact scores.
constexpr int64_t kTinyKeys = 64;
bool use_tiny(const AttentionDims& d) {
  return d.Tq > kFewQueryRows && d.Tk >= 1 && d.Tk <= kTinyKeys && d.HS <= W;
}

// The keys [0, n) that rows [i0, i0 + 16) can see (causal: none past i0 + 15 + off).
int64_t tiny_keys(const Problem& p, int64_t i0) {
  return p.d.causal ? std::clamp<int64_t>(i0 + W + p.off, 0, p.d.Tk) : p.d.Tk;
}

// s[j], j < n, lane i = scale * sum_e q_(i0+i)e k_je + kb_j (one FMA chain over e in order),
// -inf where key j is not visible to row i0 + i (causal) or masked (kb_j = -inf); qt[e] lane i =
// q_(i0+i)e.
template <int HSC>
VINLINE void tiny_scores(vf16* s, const vf16* qt, const float* kh, const float* kb,
                         const Problem& p, int64_t i0, int64_t n) {
  const AttentionDims& d = p.d;
  const int64_t HS = HSC > 0 ? HSC : d.HS;
  const vf16 iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const vf16 ninf = splat(kNegInf);
  // Four keys at a time: four independent FMA chains in flight (one chain per score, e in order).
  constexpr int64_t U = 4;
  for (int64_t j0 = 0; j0 < n; j0 += U) {
    const int64_t m = std::min(U, n - j0);
    vf16 acc[U] = {};
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
      const vf16 x = acc[u] * d.scale + kb[j];
      const int64_t first = j - p.off - i0;  // causal: lanes i >= first see key j
      s[j] = !d.causal || first <= 0 ? x : iota >= static_cast<float>(first) ? x : ninf;
    }
  }
}

// acc[e] = sum_{j < n} c[j] * rows[j * ld + e] for e < HS: j outer, so the HS accumulators are
// independent FMA chains in flight together (each still sums over j in order).
template <int HSC>
VINLINE void tiny_weighted(vf16* acc, const vf16* c, const float* rows, int64_t ld, int64_t n,
                           int64_t HS) {
  if constexpr (HSC > 0) {
    vf16 a[HSC];
#pragma GCC unroll 16
    for (int e = 0; e < HSC; e++) a[e] = vf16{};
    for (int64_t j = 0; j < n; j++) {
      const float* rj = rows + j * ld;
#pragma GCC unroll 16
      for (int e = 0; e < HSC; e++) a[e] += c[j] * rj[e];
    }
#pragma GCC unroll 16
    for (int e = 0; e < HSC; e++) acc[e] = a[e];
  } else {
    for (int64_t e = 0; e < HS; e++) acc[e] = vf16{};
    for (int64_t j = 0; j < n; j++)
      for (int64_t e = 0; e < HS; e++) acc[e] += c[j] * rows[j * ld + e];
  }
}

// xt[e] = lane i: x[i, e] for rows i < n (row stride ld), 0 past n. Transposed in registers:
// going through a buffer, the transpose's loads wait on the stores just made.
VINLINE void tiny_load_transposed(vf16* xt, const float* x, int64_t ld, int64_t n, int64_t HS) {
  vf16 v[W];
  for (int64_t i = 0; i < W; i++) v[i] = i < n ? load_part(x + i * ld, HS) : vf16{};
  transpose16_regs(v);
  for (int64_t e = 0; e < HS; e++) xt[e] = v[e];
}

void tiny_key_bias(float* kb, const Problem& p, int64_t b) {
  for (int64_t j = 0; j < p.d.Tk; j++)
    kb[j] = p.key_mask != nullptr && p.key_mask[b * p.d.Tk + j] == 0 ? kNegInf : 0.0f;
}

// Rows i < n of the [HS, 16] block xt (xt[e] lane i) into dst rows (stride ld), HS floats each
// (+= when accumulate).
VINLINE void tiny_store_rows(float* dst, int64_t ld, const vf16* xt, int64_t n, int64_t HS,
                             bool accumulate) {
  vf16 v[W];
  for (int64_t e = 0; e < W; e++) v[e] = e < HS ? xt[e] : vf16{};
  transpose16_regs(v);
  for (int64_t i = 0; i < n; i++) {
    float* di = dst + i * ld;
    const vf16 x = accumulate ? v[i] + load_part(di, HS) : v[i];
    store_part(di, x, HS);
  }
}

// v[i] lane j = x[j] lane i for j < n (0 past n): a [keys, rows] block turned [rows, keys].
VINLINE void tiny_transpose_keys(vf16 (&v)[W], const vf16* x, int64_t n) {
  for (int64_t j = 0; j < W; j++) v[j] = j < n ? x[j] : vf16{};
  transpose16_regs(v);
}

// HSC: the head size as a compile-time constant (fully unrolled loops over it), 0 = d.HS.
template <int HSC>
void tiny_forward_head(float* out, float* lse, const float* q, const float* k, const float* v,
                       const Problem& p, int64_t b, int64_t h) {
  const AttentionDims& d = p.d;
  const int64_t HS = HSC > 0 ? HSC : d.HS;
  alignas(64) float kb[kTinyKeys], lv[W], mv[W];
  vf16 qt[W], s[kTinyKeys], ot[W];
  tiny_key_bias(kb, p, b);
  const float* kh = k + b * d.Tk * d.ldk + h * d.HS;
  const float* vh = v + b * d.Tk * d.ldv + h * d.HS;
  const vf16 ninf = splat(kNegInf);
  for (int64_t i0 = 0; i0 < d.Tq; i0 += W) {
    const int64_t nq = std::min(W, d.Tq - i0), nk = tiny_keys(p, i0);
    tiny_load_transposed(qt, q + (b * d.Tq + i0) * d.ldq + h * d.HS, d.ldq, nq, HS);
    tiny_scores<HSC>(s, qt, kh, kb, p, i0, nk);
    vf16 m = ninf;
    for (int64_t j = 0; j < nk; j++) m = vmax(m, s[j]);
    const auto dead = m == ninf;  // nothing visible: weights 0, out 0, lse -inf
    const vf16 shift = dead ? vf16{} : m;
    vf16 l{};
    for (int64_t j = 0; j < nk; j++) {
      s[j] = vexp(s[j] - shift);
      l += s[j];
    }
    const vf16 inv = dead ? vf16{} : 1.0f / l;
    tiny_weighted<HSC>(ot, s, vh, d.ldv, nk, HS);
    for (int64_t e = 0; e < HS; e++) ot[e] = ot[e] * inv;
    tiny_store_rows(out + (b * d.Tq + i0) * d.ldo + h * d.HS, d.ldo, ot, nq, HS, false);
    store(lv, l);
    store(mv, m);
    float* lh = lse + (b * d.NH + h) * d.Tq + i0;
    for (int64_t i = 0; i < nq; i++) lh[i] = mv[i] == kNegInf ? kNegInf : mv[i] + std::log(lv[i]);
  }
}

// Per block of query rows: P = exp(S - lse), dP_j = dO v_j, D = rowsum(dO * O),
// dS = scale P (dP - D); dQ = sum_j dS_j k_j; dK_j += sum_i dS_ij q_i and dV_j += sum_i P_ij dO_i
// (over the blocks in order, rows in order within a block), kept transposed until the end.
template <int HSC>
void tiny_backward_head(float* dq, float* dk, float* dv, const float* dout, const float* out,
                        const float* lse, const float* q, const float* k, const float* v,
                        const Problem& p, int64_t b, int64_t h) {
  const AttentionDims& d = p.d;
  const int64_t HS = HSC > 0 ? HSC : d.HS;
  constexpr int64_t KB = kTinyKeys / W;  // key blocks at most
  alignas(64) float kb[kTinyKeys];
  vf16 qt[W], gt[W], ot[W], s[kTinyKeys], ds[kTinyKeys], acc[W], x[W];
  vf16 dkt[KB][W], dvt[KB][W];  // [key block][e] lane j: dK / dV of key 16 kb + j, column e
  const int64_t nkb = (d.Tk + W - 1) / W;
  for (int64_t c = 0; c < nkb; c++)
    for (int64_t e = 0; e < HS; e++) dkt[c][e] = dvt[c][e] = vf16{};
  const float* kh = k + b * d.Tk * d.ldk + h * d.HS;
  const float* vh = v + b * d.Tk * d.ldv + h * d.HS;
  tiny_key_bias(kb, p, b);
  for (int64_t i0 = 0; i0 < d.Tq; i0 += W) {
    const int64_t nq = std::min(W, d.Tq - i0), nk = tiny_keys(p, i0);
    const float* qh = q + (b * d.Tq + i0) * d.ldq + h * d.HS;
    const float* gh = dout + (b * d.Tq + i0) * d.ldo + h * d.HS;
    tiny_load_transposed(qt, qh, d.ldq, nq, HS);
    tiny_scores<HSC>(s, qt, kh, kb, p, i0, nk);
    const vf16 lv = load_part(lse + (b * d.NH + h) * d.Tq + i0, nq, kNegInf);
    const auto live = lv != splat(kNegInf);  // a fully masked row gets no gradient
    const vf16 lsafe = live ? lv : vf16{};
    tiny_load_transposed(gt, gh, d.ldo, nq, HS);
    tiny_load_transposed(ot, out + (b * d.Tq + i0) * d.ldo + h * d.HS, d.ldo, nq, HS);
    vf16 D{};
    for (int64_t e = 0; e < HS; e++) D += gt[e] * ot[e];
    for (int64_t j = 0; j < nk; j++) {
      const vf16 pj = live ? vexp(s[j] - lsafe) : vf16{};
      const float* vj = vh + j * d.ldv;
      vf16 dp{};
      for (int64_t e = 0; e < HS; e++) dp += gt[e] * vj[e];
      s[j] = pj;
      ds[j] = live ? d.scale * pj * (dp - D) : vf16{};
    }
    if (dq != nullptr) {
      tiny_weighted<HSC>(acc, ds, kh, d.ldk, nk, HS);
      tiny_store_rows(dq + (b * d.Tq + i0) * d.ldq + h * d.HS, d.ldq, acc, nq, HS, d.accumulate);
    }
    // dK^T[e] (lane j) += sum_i dS^T_i q_ie: dS transposed so that lanes hold keys; same for dV.
    for (int64_t c = 0; c * W < nk; c++) {
      const int64_t n = std::min(W, nk - c * W);
      if (dk != nullptr) {
        tiny_transpose_keys(x, ds + c * W, n);
        for (int64_t i = 0; i < nq; i++) {
          const float* qi = qh + i * d.ldq;
          for (int64_t e = 0; e < HS; e++) dkt[c][e] += x[i] * qi[e];
        }
      }
      if (dv != nullptr) {
        tiny_transpose_keys(x, s + c * W, n);
        for (int64_t i = 0; i < nq; i++) {
          const float* gi = gh + i * d.ldo;
          for (int64_t e = 0; e < HS; e++) dvt[c][e] += x[i] * gi[e];
        }
      }
    }
  }
  for (int64_t c = 0; c < nkb; c++) {
    const int64_t n = std::min(W, d.Tk - c * W);
    if (dk != nullptr)
      tiny_store_rows(dk + (b * d.Tk + c * W) * d.ldk + h * d.HS, d.ldk, dkt[c], n, HS,
                      d.accumulate);
    if (dv != nullptr)
      tiny_store_rows(dv + (b * d.Tk + c * W) * d.ldv + h * d.HS, d.ldv, dvt[c], n, HS,
                      d.accumulate);
  }
}

// head(b, h) for every head, a contiguous run of heads per thread.
template <class F>
void for_each_tiny_head(const Problem& p, F&& head) {
  const AttentionDims& d = p.d;
  const int64_t heads = d.B * d.NH;
  const bool par = heads > 1 && d.Tq * d.Tk * d.HS * heads >= (1 << 15);
  parallel_for(heads, par, [&](int64_t bh) { head(bh / d.NH, bh % d.NH); });
}

}  // namespace

void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       const uint8_t* key_mask, const AttentionDims& dims) {
  const Problem p = make_problem(dims, key_mask);
  const AttentionDims& d = p.d;
  if (d.Tq <= kFewQueryRows) {
    forward_few_rows(out, lse, q, k, v, p);
    return;
  }
  if (use_tiny(d)) {
    for_each_tiny_head(p, [&](int64_t b, int64_t h) {
      switch (d.HS) {
        case 8: tiny_forward_head<8>(out, lse, q, k, v, p, b, h); break;
        case 16: tiny_forward_head<16>(out, lse, q, k, v, p, b, h); break;
        default: tiny_forward_head<0>(out, lse, q, k, v, p, b, h); break;
      }
    });
    return;
  }
  if (use_small(d)) {
    forward_small(out, lse, q, k, v, p);
    return;
  }
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

void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* out,
                        const float* lse, const float* q, const float* k, const float* v,
                        const uint8_t* key_mask, const AttentionDims& dims) {
  if (dq == nullptr && dk == nullptr && dv == nullptr) return;
  const Problem p = make_problem(dims, key_mask);
  const AttentionDims& d = p.d;
  if (use_tiny(d)) {
    for_each_tiny_head(p, [&](int64_t b, int64_t h) {
      switch (d.HS) {
        case 8: tiny_backward_head<8>(dq, dk, dv, dout, out, lse, q, k, v, p, b, h); break;
        case 16: tiny_backward_head<16>(dq, dk, dv, dout, out, lse, q, k, v, p, b, h); break;
        default: tiny_backward_head<0>(dq, dk, dv, dout, out, lse, q, k, v, p, b, h); break;
      }
    });
    return;
  }
  if (use_small(d)) {
    backward_small(dq, dk, dv, dout, out, lse, q, k, v, p);
    return;
  }
  const int64_t heads = d.B * d.NH;
  const bool par = heads > 1 && d.Tq * d.Tk * d.HS * heads >= (1 << 15);
  parallel_region(par, [&](int64_t t, int64_t nt) {
    BwdScratch w(d.Tq, d.HS, p.HSp);
    const auto [h0, h1] = static_range(heads, t, nt);
    for (int64_t bh = h0; bh < h1; bh++)
      backward_head(dq, dk, dv, dout, out, lse, q, k, v, p, bh / d.NH, bh % d.NH, w);
  });
}

}  // namespace atto::kernels
