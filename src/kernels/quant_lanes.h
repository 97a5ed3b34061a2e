// atto/kernels/quant_lanes.h: the vector words of the column-a-lane integer kernels
// (quant_q4_q8.cpp, quant_q4k_q5k.cpp, quant_q6k.cpp): W columns a register (16 on zmm when
// ATTO_QUANT_LANES_ZMM is defined, else 8 on ymm), kRows rows a prompt tile, the loads, stores,
// lane-wise operations and the 16-byte gather they share, and where a column group's
// super-blocks come from (rows or a Lanes16 packing). Included inside each chain's namespace,
// once per dot product (so no include guard); the includer holds GCC's diagnostic push around the
// zmm form.
// NOLINT(build/header_guard)

#if defined(ATTO_QUANT_LANES_ZMM)
constexpr int W = 16, kRows = 6;
using VI = __m512i;
using VF = __m512;
QINLINE VI vload(const void* p) { return _mm512_loadu_si512(p); }
QINLINE void vstore(void* p, VI v) { _mm512_storeu_si512(p, v); }
QINLINE VF vloadf(const void* p) { return _mm512_loadu_ps(p); }
QINLINE void vstoref(void* p, VF v) { _mm512_storeu_ps(p, v); }
QINLINE VI set1(int32_t v) { return _mm512_set1_epi32(v); }
QINLINE VF set1f(float v) { return _mm512_set1_ps(v); }
QINLINE VI zeroi() { return _mm512_setzero_si512(); }
QINLINE VF zerof() { return _mm512_setzero_ps(); }
QINLINE VI vand(VI a, VI b) { return _mm512_and_si512(a, b); }
QINLINE VI vor(VI a, VI b) { return _mm512_or_si512(a, b); }
QINLINE VI add32(VI a, VI b) { return _mm512_add_epi32(a, b); }
QINLINE VI sub32(VI a, VI b) { return _mm512_sub_epi32(a, b); }
QINLINE VI mul32(VI a, VI b) { return _mm512_mullo_epi32(a, b); }
QINLINE VF cvt(VI a) { return _mm512_cvtepi32_ps(a); }
QINLINE VF vmul(VF a, VF b) { return _mm512_mul_ps(a, b); }
QINLINE VF vfma(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }
template <int n>
QINLINE VI srl16(VI a) {
  return _mm512_srli_epi16(a, n);
}
template <int n>
QINLINE VI sll16(VI a) {
  return _mm512_slli_epi16(a, n);
}
// 16 bytes at wb + off[c] + o for the 16 columns: t[g] lane c = column c's dword g (g < 4).
QINLINE void gather16(VI* t, const uint8_t* wb, const int32_t* off, int64_t o) {
  VI z[4];
  for (int c = 0; c < 4; c++) {
    VI q = _mm512_zextsi128_si512(load16(wb + off[c] + o));
    q = _mm512_inserti32x4(q, load16(wb + off[c + 4] + o), 1);
    q = _mm512_inserti32x4(q, load16(wb + off[c + 8] + o), 2);
    z[c] = _mm512_inserti32x4(q, load16(wb + off[c + 12] + o), 3);
  }
  ATTO_Q4_TRANSPOSE(VI, 512, z, t);  // lane i of 128 bits: columns 4i..4i+3
}
#else
constexpr int W = 8, kRows = 4;
using VI = __m256i;
using VF = __m256;
QINLINE VI vload(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
QINLINE void vstore(void* p, VI v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }
QINLINE VF vloadf(const void* p) { return _mm256_loadu_ps(static_cast<const float*>(p)); }
QINLINE void vstoref(void* p, VF v) { _mm256_storeu_ps(static_cast<float*>(p), v); }
QINLINE VI set1(int32_t v) { return _mm256_set1_epi32(v); }
QINLINE VF set1f(float v) { return _mm256_set1_ps(v); }
QINLINE VI zeroi() { return _mm256_setzero_si256(); }
QINLINE VF zerof() { return _mm256_setzero_ps(); }
QINLINE VI vand(VI a, VI b) { return _mm256_and_si256(a, b); }
QINLINE VI vor(VI a, VI b) { return _mm256_or_si256(a, b); }
QINLINE VI add32(VI a, VI b) { return _mm256_add_epi32(a, b); }
QINLINE VI sub32(VI a, VI b) { return _mm256_sub_epi32(a, b); }
QINLINE VI mul32(VI a, VI b) { return _mm256_mullo_epi32(a, b); }
QINLINE VF cvt(VI a) { return _mm256_cvtepi32_ps(a); }
QINLINE VF vmul(VF a, VF b) { return _mm256_mul_ps(a, b); }
QINLINE VF vfma(VF a, VF b, VF c) { return _mm256_fmadd_ps(a, b, c); }
template <int n>
QINLINE VI srl16(VI a) {
  return _mm256_srli_epi16(a, n);
}
template <int n>
QINLINE VI sll16(VI a) {
  return _mm256_slli_epi16(a, n);
}
// 16 bytes at wb + off[c] + o for the 8 columns: t[g] lane c = column c's dword g (g < 4).
QINLINE void gather16(VI* t, const uint8_t* wb, const int32_t* off, int64_t o) {
  VI z[4];
  for (int c = 0; c < 4; c++) z[c] = _mm256_set_m128i(load16(wb + off[c + 4] + o), load16(wb + off[c] + o));
  ATTO_Q4_TRANSPOSE(VI, 256, z, t);
}
#endif

// Where a group of W columns of super-blocks of SB bytes comes from: gathered from its W rows
// (column c's at wg + off[c]), or loaded from quant.h's Lanes16 packing (pg: the group of 16 it
// is part of, sub: which W of them).
template <int64_t SB>
struct LaneSource {
  const uint8_t* wg = nullptr;
  const int32_t* off = nullptr;
  const uint8_t* pg = nullptr;
  int sub = 0;
  // Dwords o/4 .. o/4 + 3 (o a multiple of 16) of super-block s: t[k] lane c = column c's.
  QINLINE void load4(VI* t, int64_t s, int64_t o) const {
    if (pg == nullptr) return gather16(t, wg + s * SB, off, o);
    const uint8_t* p = pg + s * 16 * SB + sub * W * 4;
    for (int k = 0; k < 4; k++) t[k] = vload(p + (o / 4 + k) * 64);
  }
  // Decoding streams the weights once from memory and asks for what comes next as it goes
  // (prefetchnta; a hint, the same bits; an address past the matrix's end is harmless): from a
  // packing, the super-block after the next of the 16 columns (the second 8 of 16 on ymm find it
  // cached by the first; two ahead, not one: Q4_K's decoding 1.05x on Zen 3, Q6_K's the same);
  // from rows, the next group's rows at byte o of super-block s.
  QINLINE void prefetch_next(int64_t s, int64_t o, int64_t nsb) const {
    // (addresses, not pointers into the matrix: they may be past its end)
    if (pg == nullptr) {
      const uintptr_t a = reinterpret_cast<uintptr_t>(wg) + static_cast<uintptr_t>(W * nsb * SB + s * SB + o);
      for (int c = 0; c < W; c++)
        __builtin_prefetch(reinterpret_cast<const void*>(a + static_cast<uintptr_t>(c * nsb * SB)), 0, 0);
    } else if (sub == 0 && o == 0) {
      const uintptr_t a = reinterpret_cast<uintptr_t>(pg) + static_cast<uintptr_t>((s + 2) * 16 * SB);
      for (int64_t line = 0; line < 16 * SB; line += 64)
        __builtin_prefetch(reinterpret_cast<const void*>(a + static_cast<uintptr_t>(line)), 0, 0);
    }
  }
};
