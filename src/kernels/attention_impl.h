// atto/kernels/attention_impl.h: what attention's kernel paths share (internal to src/kernels).
//
//   const attn::Problem p = ...;                  // attention.cpp: make_problem(dims, key_mask)
//   switch (attn::choose_path(p.d, attn::Pass::kForward)) {
//     case attn::Path::kTiny: attn::tiny_forward(out, lse, q, k, v, p); break;
//     ...
//   }
//
// One file per path, forward and backward side by side:
//   attention_decode.cpp  Tq <= kDecodeMaxRows (one new token per sequence): forward only
//   attention_tiny.cpp    Tk <= kTinyMaxKeys, HS <= kTinyMaxHeadSize: query rows in vector lanes
//   attention_short.cpp   Tk <= kShortMaxKeys, HS <= kShortMaxHeadSize: keys in vector lanes
//   attention_flash.cpp   anything else: key and query tiles with an online softmax
//   attention_bf16.cpp    the flash path with bf16 products, under a BF16 PrecisionScope
//   attention_bf16_rows.cpp  bf16, whole rows of keys (Tk <= kRowsMaxKeys, AVX512_BF16)
//   attention.cpp         the public entry points and choose_path, the one place a path is chosen
//
// Conventions every path keeps
// - A Problem carries the dims with ld and scale resolved; paths read only p.d, never the
//   caller's AttentionDims.
// - Scores are masked to -inf (causal, key mask, padding); exp(-inf) adds exact zeros, so a
//   padded key costs work, not bits. A row with nothing visible gets out = 0, lse = -inf and no
//   gradient.
// - A path's backward recomputes the scores with the same code as its forward, so its
//   exp(S - lse) sees the forward's scores exactly.
// - Work is split over heads (or rows) and every sum runs in one fixed order, so results do not
//   depend on the thread count.
// - Helpers below are inline: each path's file compiles its own copy, as when they were one file.
#pragma once

#include "kernels/isa.h"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/kernels.h"
#include "kernels/prefetch.h"
#include "kernels/simd.h"

namespace ATTO_KERNELS_NS::attn {

using namespace simd;

// ---- Path choice --------------------------------------------------------------------------------
// The bounds are the kernels' capacities as much as thresholds: the tiny and short kernels size
// their buffers and register blocks from them. choose_path (attention.cpp) applies them in the
// order decode, tiny, short, flash.

// Up to this many query rows, the forward takes the decode path (a handful of rows on the
// strided KV cache, no tiles). It has no backward: a backward of so few rows takes the short
// path (or the flash path past the short path's bounds), never the tiny one.
constexpr int64_t kDecodeMaxRows = 4;
// The tiny path (query rows in lanes) keeps a block's scores as one vector per key, in arrays of
// kTinyMaxKeys, and moves rows in and out by WN x WN register transposes (16 / WN per row of
// 16 head columns); the same bounds at every level.
constexpr int64_t kTinyMaxKeys = 64;
constexpr int64_t kTinyMaxHeadSize = 16;
// The short path (keys in lanes) holds a row's scores in at most 4 vectors and a row of the
// output (or of dQ) in at most 4 vectors.
constexpr int64_t kShortMaxKeys = 64;
constexpr int64_t kShortMaxHeadSize = 64;

enum class Pass { kForward, kBackward };
enum class Path { kDecode, kTiny, kShort, kFlash };

// ---- Problem description ------------------------------------------------------------------------

constexpr int64_t BK = 64;  // keys per flash tile (at most; Problem::bk is the width in use)
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

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

// ---- The paths (one file each) ------------------------------------------------------------------

void decode_forward(float* out, float* lse, const float* q, const float* k, const float* v, const Problem& p);
void tiny_forward(float* out, float* lse, const float* q, const float* k, const float* v, const Problem& p);
void tiny_backward(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                   const float* q, const float* k, const float* v, const Problem& p);
// The short path exists in AVX-512 builds only (ATTO_ATTN_SHORT 1): its blocks of 16-lane vectors
// are split into 8-lane halves through memory by GCC in AVX2 builds, and into NEON quarters on
// ARM64, where the flash path ran those shapes faster (attention.cpp, choose_path). Those builds
// do not compile it at all (it was the slowest file of the aarch64 cross build).
#if (defined(__AVX2__) && !defined(__AVX512F__)) || defined(__aarch64__)
#define ATTO_ATTN_SHORT 0
#else
#define ATTO_ATTN_SHORT 1
void short_forward(float* out, float* lse, const float* q, const float* k, const float* v, const Problem& p);
void short_backward(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                    const float* q, const float* k, const float* v, const Problem& p);
#endif
void flash_forward(float* out, float* lse, const float* q, const float* k, const float* v, const Problem& p);
void flash_backward(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                    const float* q, const float* k, const float* v, const Problem& p);
// bf16 attention with whole rows of keys (attention_bf16_rows.cpp): under a BF16 PrecisionScope
// it replaces the flash path's bf16 tiles where rows_bf16_fits (Tk <= kRowsMaxKeys, on the
// AVX512_BF16 backend; AMX keeps the tiles it was measured with). Its exp passes run simd.h's
// 16-lane helpers inside AVX512_BF16 functions, which clang refuses in a translation unit built
// without AVX-512 (a vf16 argument's ABI differs): there (clang for -march=native on an AVX2 CPU,
// as scripts/fuzz builds, or for x86-64-v3) the file is left out, bf16_absent.cpp's
// rows_bf16_fits says false, and bf16 attention takes the flash tiles. GCC builds it everywhere.
#if defined(__x86_64__) && (!defined(__clang__) || defined(__AVX512F__))
#define ATTO_ATTN_BF16_ROWS 1
#else
#define ATTO_ATTN_BF16_ROWS 0
#endif
constexpr int64_t kRowsMaxKeys = 1024;
bool rows_bf16_fits(const AttentionDims& d);
void rows_forward_bf16(float* out, float* lse, const float* q, const float* k, const float* v, const Problem& p);
void rows_backward_bf16(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                        const float* q, const float* k, const float* v, const Problem& p);
// The flash path with bf16 products (attention_bf16.cpp), under a BF16 PrecisionScope.
// What both bf16 paths' backwards share (defined there):
//   transposed_bf16   dst [rows_pad, ldd] (bf16 rows) = the transpose of n rows of HS floats
//                     (row stride ld; ldd a multiple of 16), zero padding; tmp holds HS x ldd
//   add_transposed    dst rows [n, HS] (row stride ld; += when accumulate) = the transpose of
//                     src [HS, lds] (first n columns); tmp holds round_up(n, 16) x HSp
//   rounded_dout_dots D[i] = <dout_i as the products see it (bf16, rows ldb apart), out_i> for
//                     i < n: sum_j P_ij dP_ij, so that a row with one visible key gets dS = 0
void transposed_bf16(uint16_t* dst, int64_t ldd, int64_t rows_pad, float* tmp, const float* src, int64_t ld,
                     int64_t n, int64_t HS);
void add_transposed(float* dst, int64_t ld, const float* src, int64_t lds, float* tmp, int64_t n, int64_t HS,
                    int64_t HSp, bool accumulate);
void rounded_dout_dots(float* D, const uint16_t* dout_bf16, int64_t ldb, const float* out, int64_t ldo, int64_t n,
                       int64_t HS, uint32_t* bits, float* row);
void flash_forward_bf16(float* out, float* lse, const float* q, const float* k, const float* v, const Problem& p);
void flash_backward_bf16(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                         const float* q, const float* k, const float* v, const Problem& p);

// ---- Row helpers used by several paths ----------------------------------------------------------

// The row helpers below compute at the native vector width (simd::vn: a split 16-lane vector
// goes through memory on AVX2 and ARM64), their sums as 16-lane accumulators in kParts native
// vectors added in hsum's tree: the same bits at every level.

// s = exp(s - shift) in place for n floats (a multiple of 16); returns the sum (lane partial
// sums, then the fixed tree). Inlined so that the exps of consecutive rows overlap in the
// pipeline (a call per row left them serialised).
VINLINE float row_exp_sum(float* s, int64_t n, float shift) {
  const vn sh = vsplat<vn>(shift);
  vn acc[kParts] = {};
  for (int64_t j = 0; j < n; j += W)
    for (int k = 0; k < kParts; k++) {
      const vn e = vexp(loadn(s + j + k * WN) - sh);
      storen(s + j + k * WN, e);
      acc[k] += e;
    }
  return hsum_parts(acc);
}

// Row maximum of n floats (a multiple of 16).
VINLINE float row_max(const float* s, int64_t n) {
  vn m[kParts];
  for (int k = 0; k < kParts; k++) m[k] = loadn(s + k * WN);
  for (int64_t j = W; j < n; j += W)
    for (int k = 0; k < kParts; k++) m[k] = vmax(m[k], loadn(s + j + k * WN));
  return hmax_parts(m);
}

// One key tile's online-softmax step for rows [0, nq) of S (row stride lds, n columns, n a
// multiple of 16): each row's running max m and sum l take the tile in, its output row (HSp
// floats of O) is rescaled, and S becomes exp(S - m_new) (zeros while nothing is visible).
inline void online_softmax_rows(float* S, int64_t lds, int64_t n, int64_t nq, float* m, float* l, float* O,
                                int64_t HSp) {
  for (int64_t i = 0; i < nq; i++) {
    float* s = S + i * lds;
    const float m_new = std::max(m[i], row_max(s, n));
    if (m_new == kNegInf) {  // nothing visible yet in this row
      std::fill(s, s + n, 0.0f);
      continue;
    }
    const float corr = std::exp(m[i] - m_new);  // 0 when m was -inf
    l[i] = l[i] * corr + row_exp_sum(s, n, m_new);
    m[i] = m_new;
    if (corr != 1.0f) {
      float* o = O + i * HSp;
      for (int64_t e = 0; e < HSp; e++) o[e] *= corr;
    }
  }
}

// Query rows [i0, i0 + nq) of head (b, h): out = O / l (0 for a fully masked row), lse = m + log l
// (-inf for one).
inline void finish_rows(float* out, float* lse, const float* O, int64_t HSp, const float* m, const float* l,
                        const Problem& p, int64_t b, int64_t h, int64_t i0, int64_t nq) {
  const AttentionDims& d = p.d;
  for (int64_t i = 0; i < nq; i++) {
    float* o = out + (b * d.Tq + i0 + i) * d.ldo + h * d.HS;
    if (i + kPrefetchRows < nq) prefetch_run(o + kPrefetchRows * d.ldo, d.HS, /*write=*/true);
    const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
    for (int64_t e = 0; e < d.HS; e++) o[e] = O[i * HSp + e] * inv;
    lse[(b * d.NH + h) * d.Tq + i0 + i] = l[i] > 0.0f ? m[i] + std::log(l[i]) : kNegInf;
  }
}

// Rows [0, rows) of P (the scores S on entry) and dS (dP on entry), row stride ld, n columns (a
// multiple of 16): P = exp(S - lse_i), dS = scale P (dP - D_i). Rows from nq on (padding) and
// fully masked rows (lse -inf) get zeros: no gradient.
inline void softmax_backward_rows(float* P, float* dS, int64_t ld, int64_t n, int64_t rows, int64_t nq,
                                  const float* lse, const float* D, float scale) {
  for (int64_t i = 0; i < rows; i++) {
    float* pr = P + i * ld;
    float* ds = dS + i * ld;
    const float l = i < nq ? lse[i] : kNegInf;
    if (l == kNegInf) {
      std::fill(pr, pr + n, 0.0f);
      std::fill(ds, ds + n, 0.0f);
      continue;
    }
    const vn lv = vsplat<vn>(l), Di = vsplat<vn>(D[i]), sc = vsplat<vn>(scale);
    for (int64_t j = 0; j < n; j += WN) {
      const vn pv = vexp(loadn(pr + j) - lv);
      storen(pr + j, pv);
      storen(ds + j, sc * pv * (loadn(ds + j) - Di));
    }
  }
}

// <a, b> over HS floats: 16-lane partial sums, masked tail, then the fixed tree.
VINLINE float dot_hs(const float* a, const float* b, int64_t HS) {
  vn acc[kParts] = {};
  for (int64_t e = 0; e < HS; e += W)
    for (int k = 0; k < kParts; k++) {
      const int64_t j = e + k * WN, cnt = HS - j;
      if (cnt <= 0) break;
      acc[k] += loadn_upto(a + j, cnt) * loadn_upto(b + j, cnt);
    }
  return hsum_parts(acc);
}

// dst[HS, bk] (row stride ldd) = the transpose of n rows of HS floats (row stride ld), zero
// padding (bk is a multiple of 16).
inline void pack_transposed(float* dst, int64_t ldd, const float* src, int64_t ld, int64_t n, int64_t HS, int64_t bk) {
  for (int64_t j0 = 0; j0 < bk; j0 += W) {
    const int64_t nr = std::clamp<int64_t>(n - j0, 0, W);
    for (int64_t e0 = 0; e0 < HS; e0 += W)
      transpose16(dst + e0 * ldd + j0, ldd, src + j0 * ld + e0, ld, nr, std::min<int64_t>(W, HS - e0));
  }
}

// Query tile [i0, i0 + nq) sees key tiles of p.bk keys [0, key_tiles_end) (fewer when causal).
inline int64_t key_tiles_end(const Problem& p, int64_t i0, int64_t nq) {
  const int64_t ntiles = (p.d.Tk + p.bk - 1) / p.bk;
  if (!p.d.causal) return ntiles;
  const int64_t last_key = i0 + nq - 1 + p.off;  // the last query row's last visible key
  if (last_key < 0) return 0;
  return std::min(ntiles, last_key / p.bk + 1);
}

// Key tile [j0, j0 + nk) of batch b: kbias[j] = 0, or -inf for padding and masked keys.
inline void key_bias(float* kbias, const Problem& p, int64_t b, int64_t j0, int64_t nk) {
  for (int64_t j = 0; j < p.bk; j++) {
    const bool pad = j >= nk;
    const bool masked = !pad && p.key_mask != nullptr && p.key_mask[b * p.d.Tk + j0 + j] == 0;
    kbias[j] = pad || masked ? kNegInf : 0.0f;
  }
}

// dst rows (stride ld) += src rows [n, HSp] (first HS columns); = when !accumulate.
inline void add_rows(float* dst, int64_t ld, const float* src, int64_t n, int64_t HS, int64_t HSp, bool accumulate) {
  if (dst == nullptr) return;
  for (int64_t r = 0; r < n; r++) {
    float* d = dst + r * ld;
    if (r + kPrefetchRows < n) prefetch_run(d + kPrefetchRows * ld, HS, /*write=*/true);
    const float* x = src + r * HSp;
    for (int64_t e = 0; e < HS; e += WN) {
      const int64_t cnt = std::min<int64_t>(WN, HS - e);
      vn v = loadn(x + e);  // src rows are HSp (a multiple of 16) floats
      if (accumulate) v += loadn_upto(d + e, cnt);
      storen_upto(d + e, v, cnt);
    }
  }
}

}  // namespace atto::kernels::attn
