// atto/kernels/simd.h: the 16-lane float vectors the kernels share (internal to src/kernels).
//
// GCC vector extensions: one AVX-512 register with -march=native on this machine, split into
// narrower instructions elsewhere. Everything is always inlined, so 64-byte vectors never cross
// a call; the -Wpsabi note (a 64-byte vector return changes the ABI without AVX-512) is therefore
// silenced here, for every file that includes this header. Without AVX-512 (AVX2 machines), GCC
// splits each vector into two 32-byte halves: same results, same order of operations (but it
// keeps them in memory when a loop holds many: GEMM's and attention's micro-kernels use the 8-lane
// vectors below there, and transpose16 has an AVX2 form).
//
// Determinism: reductions (hsum) use one fixed order, so a value never depends on how work was
// split over threads; the tail of a range goes through the same 16-lane code, padded.
#pragma once

#include "kernels/isa.h"
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

#pragma GCC diagnostic ignored "-Wpsabi"

namespace ATTO_KERNELS_NS::simd {

// ---- 16-lane vectors (GCC vector extensions: AVX-512 with -march=native, split otherwise) ----
typedef float vf16 __attribute__((vector_size(64)));
typedef int32_t vi16 __attribute__((vector_size(64)));
#define VINLINE inline __attribute__((always_inline))
constexpr int64_t W = 16;

// A broadcast (vf16{} + x would cost an add per call, and turn -0 into +0).
VINLINE vf16 splat(float x) {
#ifdef __AVX512F__
  const __m512 v = _mm512_set1_ps(x);
  vf16 r;
  std::memcpy(&r, &v, sizeof(r));
  return r;
#else
  return vf16{x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x};
#endif
}
VINLINE vf16 load(const float* p) {
  vf16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
#if defined(__aarch64__)
// ARM64 (NEON: 32 registers of 4 floats). GCC splits a vf16 into four 128-bit registers for
// arithmetic, but lowers a 16-lane select (c ? a : b) to a scalar compare-and-select per lane,
// and load_part/store_part's generic memcpy to a library call: those go through the 4-lane
// quarters with NEON's own instructions here, as the AVX2 build does with its 8-lane halves.
VINLINE float32x4_t quarter_of(const vf16& v, int q) {
  float32x4_t x;
  std::memcpy(&x, reinterpret_cast<const char*>(&v) + 16 * q, sizeof(x));
  return x;
}
VINLINE void set_quarter(vf16& v, int q, float32x4_t x) {
  std::memcpy(reinterpret_cast<char*>(&v) + 16 * q, &x, sizeof(x));
}
// The first n lanes from p (all 4 when n >= 4), the others `fill`; lanes past n are not read.
VINLINE float32x4_t load4_part(const float* p, int64_t n, float fill = 0.0f) {
  if (n >= 4) return vld1q_f32(p);
  float32x4_t v = vdupq_n_f32(fill);
  if (n > 0) v = vld1q_lane_f32(p, v, 0);
  if (n > 1) v = vld1q_lane_f32(p + 1, v, 1);
  if (n > 2) v = vld1q_lane_f32(p + 2, v, 2);
  return v;
}
VINLINE void store4_part(float* p, float32x4_t v, int64_t n) {  // the first n lanes (all 4 when n >= 4)
  if (n >= 4) {
    vst1q_f32(p, v);
    return;
  }
  if (n > 0) vst1q_lane_f32(p, v, 0);
  if (n > 1) vst1q_lane_f32(p + 1, v, 1);
  if (n > 2) vst1q_lane_f32(p + 2, v, 2);
}
#endif
// The first n (< 16) lanes from p, the others `fill`; lanes past n are not read.
VINLINE vf16 load_part(const float* p, int64_t n, float fill = 0.0f) {
#ifdef __AVX512F__
  const __mmask16 m = static_cast<__mmask16>((1u << n) - 1u);
  const __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(fill), m, p);
  vf16 r;
  std::memcpy(&r, &v, sizeof(r));
  return r;
#elif defined(__AVX2__)
  // Two masked 8-lane loads (lanes past n are not touched, as with AVX-512's mask): a memcpy of
  // n floats into the vector cost a library call and a store-forwarding stall on every use.
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), iota);
  const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n) - 8), iota);
  const __m256 f = _mm256_set1_ps(fill);
  const __m256 lo = _mm256_blendv_ps(f, _mm256_maskload_ps(p, m0), _mm256_castsi256_ps(m0));
  const __m256 hi = _mm256_blendv_ps(f, _mm256_maskload_ps(p + 8, m1), _mm256_castsi256_ps(m1));
  vf16 r;
  std::memcpy(&r, &lo, sizeof(lo));
  std::memcpy(reinterpret_cast<char*>(&r) + sizeof(lo), &hi, sizeof(hi));
  return r;
#elif defined(__aarch64__)
  vf16 r;
  for (int q = 0; q < 4; q++) set_quarter(r, q, load4_part(p + 4 * q, n - 4 * q, fill));
  return r;
#else
  vf16 v = splat(fill);
  std::memcpy(&v, p, sizeof(float) * static_cast<size_t>(n));
  return v;
#endif
}
VINLINE void store(float* p, vf16 v) { std::memcpy(p, &v, sizeof(v)); }
VINLINE void store_part(float* p, vf16 v, int64_t n) {  // the first n (< 16) lanes
#ifdef __AVX512F__
  __m512 x;
  std::memcpy(&x, &v, sizeof(x));
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1u), x);
#elif defined(__AVX2__)
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), iota);
  const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n) - 8), iota);
  __m256 lo, hi;
  std::memcpy(&lo, &v, sizeof(lo));
  std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof(lo), sizeof(hi));
  _mm256_maskstore_ps(p, m0, lo);
  _mm256_maskstore_ps(p + 8, m1, hi);
#elif defined(__aarch64__)
  for (int q = 0; q < 4 && 4 * q < n; q++) store4_part(p + 4 * q, quarter_of(v, q), n - 4 * q);
#else
  std::memcpy(p, &v, sizeof(float) * static_cast<size_t>(n));
#endif
}
#if defined(__AVX2__) && !defined(__AVX512F__)
// The 8-lane halves of a 16-lane vector (AVX2 builds). GCC lowers a 16-lane vector select
// (c ? a : b) without AVX-512 to one scalar compare-and-blend per lane, so vmax, vmin and vexp's
// edge cases go through the halves with AVX2's own instructions (same results: maxps(a, b) is
// a > b ? a : b lane by lane, NaN included).
VINLINE __m256 half_of(const vf16& v, int h) {
  __m256 x;
  std::memcpy(&x, reinterpret_cast<const char*>(&v) + 32 * h, sizeof(x));
  return x;
}
VINLINE void set_half(vf16& v, int h, __m256 x) { std::memcpy(reinterpret_cast<char*>(&v) + 32 * h, &x, sizeof(x)); }
VINLINE vf16 vmax(vf16 a, vf16 b) {
  vf16 r;
  for (int h = 0; h < 2; h++) set_half(r, h, _mm256_max_ps(half_of(a, h), half_of(b, h)));
  return r;
}
VINLINE vf16 vmin(vf16 a, vf16 b) {
  vf16 r;
  for (int h = 0; h < 2; h++) set_half(r, h, _mm256_min_ps(half_of(a, h), half_of(b, h)));
  return r;
}
#elif defined(__aarch64__)
// NEON: per quarter, a compare and a bit select (not fmax/fmin, which return NaN for a NaN in
// either operand): a > b ? a : b lane by lane, as everywhere.
VINLINE vf16 vmax(vf16 a, vf16 b) {
  vf16 r;
  for (int q = 0; q < 4; q++) {
    const float32x4_t x = quarter_of(a, q), y = quarter_of(b, q);
    set_quarter(r, q, vbslq_f32(vcgtq_f32(x, y), x, y));
  }
  return r;
}
VINLINE vf16 vmin(vf16 a, vf16 b) {
  vf16 r;
  for (int q = 0; q < 4; q++) {
    const float32x4_t x = quarter_of(a, q), y = quarter_of(b, q);
    set_quarter(r, q, vbslq_f32(vcltq_f32(x, y), x, y));
  }
  return r;
}
#else
VINLINE vf16 vmax(vf16 a, vf16 b) { return a > b ? a : b; }
VINLINE vf16 vmin(vf16 a, vf16 b) { return a < b ? a : b; }
#endif

// 8-lane vectors: one AVX2 register. Kernels whose blocks of 16-lane vectors GCC spills
// without AVX-512 (it splits each into two halves, doubling the registers a block holds) use
// these in AVX2 builds.
typedef float vf8 __attribute__((vector_size(32)));
VINLINE vf8 load8(const float* p) {
  vf8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
VINLINE void store8(float* p, vf8 v) { std::memcpy(p, &v, sizeof(v)); }
VINLINE vf8 splat8(float x) { return vf8{x, x, x, x, x, x, x, x}; }

// Sum of the 16 lanes as a fixed pairwise tree (lane l + lane l+8, then +4, +2, +1): the same
// order on every call, in 4 dependent adds instead of a 15-add chain. Register shuffles only:
// splitting the vector through memory made every call wait on a store-forwarding stall.
typedef float vf4 __attribute__((vector_size(16)));
VINLINE float hsum(vf16 v) {
  const vf8 s8 = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                 __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const vf4 s4 = __builtin_shufflevector(s8, s8, 0, 1, 2, 3) + __builtin_shufflevector(s8, s8, 4, 5, 6, 7);
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}
VINLINE float hmax(vf16 v) {  // max is exact: any order gives the same value
#if defined(__aarch64__)  // the same tree through NEON quarters (an 8-lane select is scalar there)
  const float32x4_t a0 = quarter_of(v, 0), a1 = quarter_of(v, 1), b0 = quarter_of(v, 2), b1 = quarter_of(v, 3);
  const float32x4_t c = vbslq_f32(vcgtq_f32(a0, b0), a0, b0), d = vbslq_f32(vcgtq_f32(a1, b1), a1, b1);
  const vf4 m4 = vbslq_f32(vcgtq_f32(c, d), c, d);
#else
  const vf8 a = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
  const vf8 b = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const vf8 m8 = a > b ? a : b;
  const vf4 c = __builtin_shufflevector(m8, m8, 0, 1, 2, 3);
  const vf4 d = __builtin_shufflevector(m8, m8, 4, 5, 6, 7);
  const vf4 m4 = c > d ? c : d;
#endif
  return std::max(std::max(m4[0], m4[2]), std::max(m4[1], m4[3]));
}
// A broadcast in any vector type (GCC folds the loop into one broadcast instruction).
template <class V>
VINLINE V vsplat(float x) {
  V v;
  for (size_t l = 0; l < sizeof(V) / sizeof(float); l++) v[l] = x;
  return v;
}

// exp(x), Cephes polynomial, ~1 ulp, before the edge cases: x clamped to [-87, 88] by the caller.
template <class V>
VINLINE V vexp_core(V xc) {
  using VI = decltype(xc < xc);  // the integer vector of V's shape
  const V magic = vsplat<V>(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const V n = (xc * 1.44269504088896341f + magic) - magic;
  const V r = xc - n * 0.693359375f + n * 2.12194440e-4f;
  V p = vsplat<V>(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const V y = p * r * r + r + 1.0f;
  const VI bits = (__builtin_convertvector(n, VI) + 127) << 23;
  V pow2;
  std::memcpy(&pow2, &bits, sizeof(pow2));
  return y * pow2;
}
// exp's edge cases on vexp_core's value e: 0 below -87, +inf past 88.72283, NaN stays NaN.
template <class V>
VINLINE V vexp_edges(V x, V e) {
  e = x < vsplat<V>(-87.0f) ? vsplat<V>(0.0f) : e;
  e = x > vsplat<V>(88.72283f) ? vsplat<V>(std::numeric_limits<float>::infinity()) : e;
  return x != x ? x : e;  // NaN in, NaN out
}
// exp(x), Cephes polynomial, ~1 ulp; exp(-inf) = 0, inputs below -87 give 0, NaN stays NaN.
VINLINE vf16 vexp(vf16 x) {
  const vf16 lo = splat(-87.0f), hi = splat(88.0f);
  vf16 e = vexp_core(vmin(vmax(x, lo), hi));
#if defined(__AVX2__) && !defined(__AVX512F__)
  vf16 out;
  for (int h = 0; h < 2; h++) {  // the three selects below, per half
    const __m256 xh = half_of(x, h);
    __m256 o = _mm256_blendv_ps(half_of(e, h), _mm256_setzero_ps(), _mm256_cmp_ps(xh, half_of(lo, h), _CMP_LT_OQ));
    o = _mm256_blendv_ps(o, _mm256_set1_ps(std::numeric_limits<float>::infinity()),
                         _mm256_cmp_ps(xh, _mm256_set1_ps(88.72283f), _CMP_GT_OQ));
    set_half(out, h, _mm256_blendv_ps(o, xh, _mm256_cmp_ps(xh, xh, _CMP_UNORD_Q)));
  }
  return out;
#elif defined(__aarch64__)
  vf16 out;
  for (int q = 0; q < 4; q++) {  // the three selects below, per quarter
    const float32x4_t xq = quarter_of(x, q);
    float32x4_t o = vbslq_f32(vcltq_f32(xq, vdupq_n_f32(-87.0f)), vdupq_n_f32(0.0f), quarter_of(e, q));
    o = vbslq_f32(vcgtq_f32(xq, vdupq_n_f32(88.72283f)), vdupq_n_f32(std::numeric_limits<float>::infinity()), o);
    set_quarter(out, q, vbslq_f32(vceqq_f32(xq, xq), o, xq));  // NaN in, NaN out
  }
  return out;
#else
  return vexp_edges(x, e);
#endif
}

// ---- Native-width vectors: one register of the build's float vector ----
// Where GCC must split a 16-lane vector (AVX2: two halves, ARM64: four quarters) it keeps the
// vector in memory whenever it crosses a select, a partial load or store, or a call: GELU's
// forward ran at 1/11 of the AVX-512 build's rate on AVX2, where the width explains 1/2. The
// lane-wise kernels (elementwise.cpp) compute in `vn`: vf16 on AVX-512 (nothing changes there),
// vf8 on AVX2, vf4 on ARM64. Each lane sees the same operations in the same order at every
// width, so a lane-wise result has the same bits; reductions keep vf16's tree (hsum_parts).
#if defined(__AVX512F__) || !(defined(__AVX2__) || defined(__aarch64__))
using vn = vf16;
VINLINE vn loadn(const float* p) { return load(p); }
VINLINE void storen(float* p, vn v) { store(p, v); }
VINLINE vn loadn_part(const float* p, int64_t n, float fill = 0.0f) { return load_part(p, n, fill); }
VINLINE void storen_part(float* p, vn v, int64_t n) { store_part(p, v, n); }
#elif defined(__AVX2__)
using vn = vf8;
VINLINE vn loadn(const float* p) { return load8(p); }
VINLINE void storen(float* p, vn v) { store8(p, v); }
VINLINE __m256i first_lanes8(int64_t n) {  // lanes < n set (none when n <= 0)
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::clamp<int64_t>(n, 0, 8))),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
// The first n (< 8) lanes, the others `fill`; lanes past n are not read (or written).
VINLINE vn loadn_part(const float* p, int64_t n, float fill = 0.0f) {
  const __m256i m = first_lanes8(n);
  return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
VINLINE void storen_part(float* p, vn v, int64_t n) { _mm256_maskstore_ps(p, first_lanes8(n), v); }
#else
using vn = vf4;
VINLINE vn loadn(const float* p) { return vld1q_f32(p); }
VINLINE void storen(float* p, vn v) { vst1q_f32(p, v); }
VINLINE vn loadn_part(const float* p, int64_t n, float fill = 0.0f) { return load4_part(p, n, fill); }
VINLINE void storen_part(float* p, vn v, int64_t n) { store4_part(p, v, n); }
#endif
constexpr int64_t WN = static_cast<int64_t>(sizeof(vn) / sizeof(float));
constexpr int kParts = static_cast<int>(W / WN);  // native vectors per 16 lanes

// The first cnt lanes at p (a whole vector when cnt >= WN), the others `fill`; nothing past cnt
// is read (or written).
VINLINE vn loadn_upto(const float* p, int64_t cnt, float fill = 0.0f) {
  return cnt >= WN ? loadn(p) : loadn_part(p, cnt, fill);
}
VINLINE void storen_upto(float* p, vn v, int64_t cnt) {
  if (cnt >= WN) {
    storen(p, v);
  } else {
    storen_part(p, v, cnt);
  }
}

// Selects at the native width (one instruction there); vf16 keeps its own overloads above.
template <class V>
VINLINE V vmax(V a, V b) {
  return a > b ? a : b;
}
template <class V>
VINLINE V vmin(V a, V b) {
  return a < b ? a : b;
}
template <class V>
VINLINE V vexp(V x) {  // vexp(vf16)'s values, at V's width
  return vexp_edges(x, vexp_core(vmin(vmax(x, vsplat<V>(-87.0f)), vsplat<V>(88.0f))));
}
// hsum and hmax of the 16 lanes held as kParts native vectors (lanes 0.. in part 0): hsum's
// tree exactly (lane l + lane l+8, then +4, +2, +1), so the same sum as one vf16 would give.
template <int K>
VINLINE float hsum_parts(const vn (&p)[K]) {
  static_assert(K == kParts);
  if constexpr (K == 1) {
    return hsum(p[0]);
  } else if constexpr (K == 2) {
    const vf8 s8 = p[0] + p[1];
    const vf4 s4 = __builtin_shufflevector(s8, s8, 0, 1, 2, 3) + __builtin_shufflevector(s8, s8, 4, 5, 6, 7);
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
  } else {
    const vf4 s4 = (p[0] + p[2]) + (p[1] + p[3]);
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
  }
}
template <int K>
VINLINE float hmax_parts(const vn (&p)[K]) {  // max is exact: any order gives the same value
  static_assert(K == kParts);
  if constexpr (K == 1) {
    return hmax(p[0]);
  } else {
    vn m = p[0];
    for (int k = 1; k < K; k++) m = vmax(m, p[k]);
    float r = m[0];
    for (int64_t l = 1; l < WN; l++) r = std::max(r, m[l]);
    return r;
  }
}

#ifdef __AVX512F__
// dst rows e < ncols (stride ldd), 16 floats each, = column e of the nrows x ncols block at src
// (row stride lds); lanes past nrows are 0. nrows, ncols <= 16. A 16 x 16 register transpose in
// four rounds of shuffles (pairs of floats, pairs of pairs, 128-bit lanes twice). Used by
// attention's key packing (a scalar loop there was a quarter of the attention backward's own
// time at head size 8) and by GEMM's packing of B^T panels.
// (GCC 12 flags the intrinsics' own undefined-register idiom as (maybe-)uninitialized.)
#pragma GCC diagnostic push
#ifndef __clang__
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
// r[i] = row i of a 16 x 16 block  ->  r[e] = column e, in registers.
VINLINE void transpose16_regs(vf16 (&v)[16]) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; i++) r[i] = static_cast<__m512>(v[i]);
  for (int i = 0; i < 16; i += 2) {  // t[i] lane L: r_i[4L], r_i+1[4L], r_i[4L+1], r_i+1[4L+1]
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int g = 0; g < 16; g += 4) {  // r[g + c] lane L: column 4L + c of rows g..g+3
    const __m512d t0 = _mm512_castps_pd(t[g]), t1 = _mm512_castps_pd(t[g + 1]);
    const __m512d t2 = _mm512_castps_pd(t[g + 2]), t3 = _mm512_castps_pd(t[g + 3]);
    r[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    r[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    r[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    r[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  for (int c = 0; c < 4; c++) {
    const __m512 x0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x44);  // lanes 0, 1 of each
    const __m512 x1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xEE);  // lanes 2, 3
    const __m512 y0 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x44);
    const __m512 y1 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xEE);
    v[c] = static_cast<vf16>(_mm512_shuffle_f32x4(x0, y0, 0x88));  // column c
    v[4 + c] = static_cast<vf16>(_mm512_shuffle_f32x4(x0, y0, 0xDD));
    v[8 + c] = static_cast<vf16>(_mm512_shuffle_f32x4(x1, y1, 0x88));
    v[12 + c] = static_cast<vf16>(_mm512_shuffle_f32x4(x1, y1, 0xDD));
  }
}

VINLINE void transpose16(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t nrows, int64_t ncols) {
  const __mmask16 cm = static_cast<__mmask16>((1u << ncols) - 1u);
  vf16 v[16];
  for (int i = 0; i < 16; i++) v[i] = i < nrows ? static_cast<vf16>(_mm512_maskz_loadu_ps(cm, src + i * lds)) : vf16{};
  transpose16_regs(v);
  for (int e = 0; e < ncols; e++) store(dst + e * ldd, v[e]);
}
#pragma GCC diagnostic pop
#elif defined(__AVX2__)
// AVX2: the same two functions (same results: they only move data), from 8 x 8 register
// transposes of 8-lane halves. The scalar element-by-element loops they replace were most of
// the AVX2 build's attention packing time.
VINLINE void transpose8_regs(__m256 (&r)[8]) {
  __m256 t[8];
  for (int i = 0; i < 8; i += 2) {  // t[i] = r_i[0], r_i+1[0], r_i[1], r_i+1[1] (per 128-bit lane)
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  __m256 s[8];
  for (int g = 0; g < 8; g += 4) {  // s[g + c] (per 128-bit lane): column c of rows g..g+3
    s[g] = _mm256_shuffle_ps(t[g], t[g + 2], 0x44);
    s[g + 1] = _mm256_shuffle_ps(t[g], t[g + 2], 0xEE);
    s[g + 2] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0x44);
    s[g + 3] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0xEE);
  }
  for (int c = 0; c < 4; c++) {
    r[c] = _mm256_permute2f128_ps(s[c], s[4 + c], 0x20);
    r[4 + c] = _mm256_permute2f128_ps(s[c], s[4 + c], 0x31);
  }
}
VINLINE void transpose16_regs(vf16 (&v)[16]) {
  __m256 q[2][2][8];  // q[row half][column half][row]
  for (int rh = 0; rh < 2; rh++)
    for (int ch = 0; ch < 2; ch++) {
      for (int i = 0; i < 8; i++) q[rh][ch][i] = half_of(v[8 * rh + i], ch);
      transpose8_regs(q[rh][ch]);  // q[rh][ch][e] = column 8 ch + e of rows 8 rh..
    }
  for (int ch = 0; ch < 2; ch++)
    for (int e = 0; e < 8; e++) {
      set_half(v[8 * ch + e], 0, q[0][ch][e]);
      set_half(v[8 * ch + e], 1, q[1][ch][e]);
    }
}
VINLINE void transpose16(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t nrows, int64_t ncols) {
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int ch = 0; ch < 2 && 8 * ch < ncols; ch++) {
    const int64_t nc = std::min<int64_t>(8, ncols - 8 * ch);
    const __m256i cm = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(nc)), iota);
    for (int rh = 0; rh < 2; rh++) {
      __m256 r[8];
      for (int i = 0; i < 8; i++) {
        const int64_t row = 8 * rh + i;
        r[i] = row < nrows ? _mm256_maskload_ps(src + row * lds + 8 * ch, cm) : _mm256_setzero_ps();
      }
      if (8 * rh < nrows) transpose8_regs(r);
      for (int e = 0; e < nc; e++) _mm256_storeu_ps(dst + (8 * ch + e) * ldd + 8 * rh, r[e]);
    }
  }
}
#elif defined(__aarch64__)
// NEON: the same two functions (same results: they only move data), from 4 x 4 register
// transposes of 4-lane quarters (vtrn pairs, then 64-bit halves recombined).
VINLINE void transpose4_regs(float32x4_t (&r)[4]) {
  const float32x4x2_t a = vtrnq_f32(r[0], r[1]);  // a.val[0] = r0[0] r1[0] r0[2] r1[2], a.val[1] = r0[1] r1[1] ..
  const float32x4x2_t b = vtrnq_f32(r[2], r[3]);
  r[0] = vcombine_f32(vget_low_f32(a.val[0]), vget_low_f32(b.val[0]));
  r[1] = vcombine_f32(vget_low_f32(a.val[1]), vget_low_f32(b.val[1]));
  r[2] = vcombine_f32(vget_high_f32(a.val[0]), vget_high_f32(b.val[0]));
  r[3] = vcombine_f32(vget_high_f32(a.val[1]), vget_high_f32(b.val[1]));
}
VINLINE void transpose16_regs(vf16 (&v)[16]) {
  float32x4_t q[4][4][4];  // q[row quarter][column quarter][row]
  for (int rq = 0; rq < 4; rq++)
    for (int cq = 0; cq < 4; cq++) {
      for (int i = 0; i < 4; i++) q[rq][cq][i] = quarter_of(v[4 * rq + i], cq);
      transpose4_regs(q[rq][cq]);  // q[rq][cq][e] = column 4 cq + e of rows 4 rq..
    }
  for (int cq = 0; cq < 4; cq++)
    for (int e = 0; e < 4; e++)
      for (int rq = 0; rq < 4; rq++) set_quarter(v[4 * cq + e], rq, q[rq][cq][e]);
}
VINLINE void transpose16(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t nrows, int64_t ncols) {
  for (int cq = 0; cq < 4 && 4 * cq < ncols; cq++) {
    const int64_t nc = std::min<int64_t>(4, ncols - 4 * cq);
    for (int rq = 0; rq < 4; rq++) {
      float32x4_t r[4];
      for (int i = 0; i < 4; i++) {
        const int64_t row = 4 * rq + i;
        r[i] = row < nrows ? load4_part(src + row * lds + 4 * cq, nc) : vdupq_n_f32(0.0f);
      }
      if (4 * rq < nrows) transpose4_regs(r);
      for (int e = 0; e < nc; e++) vst1q_f32(dst + (4 * cq + e) * ldd + 4 * rq, r[e]);
    }
  }
}
#else
VINLINE void transpose16_regs(vf16 (&v)[16]) {
  for (int i = 0; i < 16; i++)
    for (int e = i + 1; e < 16; e++) {
      const float x = v[i][e];
      v[i][e] = v[e][i];
      v[e][i] = x;
    }
}
VINLINE void transpose16(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t nrows, int64_t ncols) {
  for (int64_t e = 0; e < ncols; e++)
    for (int64_t i = 0; i < W; i++) dst[e * ldd + i] = i < nrows ? src[i * lds + e] : 0.0f;
}
#endif

// v[i] lane j <-> v[j] lane i: a WN x WN transpose of native vectors in registers (the 16 x 16,
// 8 x 8 or 4 x 4 one above).
VINLINE void transposen_regs(vn (&v)[WN]) {
#if defined(__AVX512F__) || !(defined(__AVX2__) || defined(__aarch64__))
  transpose16_regs(v);
#else
#if defined(__AVX2__)
  __m256 r[8];
#else
  float32x4_t r[4];
#endif
  for (int i = 0; i < WN; i++) r[i] = v[i];
#if defined(__AVX2__)
  transpose8_regs(r);
#else
  transpose4_regs(r);
#endif
  for (int i = 0; i < WN; i++) v[i] = r[i];
#endif
}
}  // namespace atto::kernels::simd
