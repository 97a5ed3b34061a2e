// atto/kernels/quant.cpp: the linear layer on ggml's q8_0, q4_0, Q4_K and Q6_K weights, computed in
// integers per block of 32 (quant.h has the fixed orders that define the bits; docs/cpu.md, "Integer
// kernels", the dot products per level and how each keeps every lane's sum exact).
// Activations are quantized once per call to blocks {float d; -8 sum(q); int8 q[32]}; q8_0's
// tiles (up to 6 rows x 4 columns) unpack a weight block once for their rows, q4_0's are in
// quant_q4.cpp, Q4_K's in quant_q4k.cpp and Q6_K's in quant_q6k.cpp; threads split the columns
// (fixed groups: any thread count gives the same bits).
// $ATTO_QUANT_DOT=avx2|avxvnni|avx512vnni|scalar forces one.
#if !defined(ATTO_QUANT_CHAIN)
#include <omp.h>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/parallel.h"
#include "kernels/quant_impl.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace ATTO_KERNELS_NS {
using namespace quant_detail;  // NOLINT(build/namespaces): the files' shared parts
namespace {

constexpr int64_t kParMacs = int64_t{1} << 15;  // below this many multiply-adds: one thread

int64_t block_bytes(QuantType t) { return t == QuantType::Q4_0 ? 18 : 34; }

void check_args(QuantType t, int64_t K, const char* what) {
  if (t != QuantType::Q4_0 && t != QuantType::Q8_0 && t != QuantType::Q4_K && t != QuantType::Q6_K)
    throw std::invalid_argument(std::string(what) +
                                ": not a q4_0, q8_0, q4_k or q6_k type id: " + std::to_string(static_cast<int>(t)));
  if (quant_super_blocks(t) && (K < 0 || K % (8 * kQK) != 0))
    throw std::invalid_argument(std::string(what) + ": K = " + std::to_string(K) +
                                " is not a multiple of 256 (the super-block size of q4_k and q6_k)");
  if (K < 0 || K % kQK != 0)
    throw std::invalid_argument(std::string(what) + ": K = " + std::to_string(K) +
                                " is not a multiple of 32 (the block size of q4_0 and q8_0)");
}

void check_layout(QuantType t, QuantLayout layout, const char* what) {
  if (layout != QuantLayout::Rows && !(layout == QuantLayout::Lanes16 && t != QuantType::Q8_0))
    throw std::invalid_argument(std::string(what) + ": layout " + std::to_string(static_cast<int>(layout)) +
                                " is not one of type id " + std::to_string(static_cast<int>(t)) +
                                " (Lanes16 is q4_0's, Q4_K's and Q6_K's)");
}

// The block format of a type Lanes16 regroups (quant_impl.h).
LaneBlock lane_block(QuantType t) {
  if (t == QuantType::Q4_0) return {18, 2, 32};
  return {t == QuantType::Q4_K ? 144 : 210, 0, 256};
}

// The 32 integer values of a weight block: q8_0's int8, q4_0's nibble - 8 (low nibbles first).
void weight_ints(int8_t* out, const uint8_t* blk, QuantType t) {
  if (t == QuantType::Q8_0) {
    std::memcpy(out, blk + 2, kQK);
    return;
  }
  for (int j = 0; j < kQK / 2; j++) {
    out[j] = static_cast<int8_t>((blk[2 + j] & 0x0F) - 8);
    out[j + kQK / 2] = static_cast<int8_t>((blk[2 + j] >> 4) - 8);
  }
}

// One row of K values to K/32 blocks: d = max|x| / 127 (NaN when the block holds a NaN),
// q = nearbyint(x / d) clamped to [-127, 127] (a NaN quotient to -127), all 0 when d == 0.
void quantize_row(ActBlock* out, const float* x, int64_t nb) {
  for (int64_t b = 0; b < nb; b++) {
    const float* v = x + b * kQK;
    float amax = 0.0f;
    bool nan = false;
    for (int i = 0; i < kQK; i++) {
      const float a = std::fabs(v[i]);
      amax = amax > a ? amax : a;
      nan = nan || v[i] != v[i];
    }
    const float d = nan ? std::nanf("") : amax / 127.0f;
    out[b].d = d;
    int32_t sum = 0;
    for (int i = 0; i < kQK; i++) {
      float r = d != 0.0f ? v[i] / d : 0.0f;
      r = r > -127.0f ? r : -127.0f;
      r = r < 127.0f ? r : 127.0f;
      out[b].q[i] = static_cast<int8_t>(static_cast<int>(std::nearbyint(r)));
      sum += out[b].q[i];
    }
    out[b].nsum8 = -8 * sum;
  }
}

std::vector<ActBlock> quantize_acts(const float* x, int64_t M, int64_t K, bool par) {
  const int64_t nb = K / kQK;
  std::vector<ActBlock> a(static_cast<size_t>(M * nb));
  parallel_for(M, par && M > 1, [&](int64_t m) { quantize_row(a.data() + m * nb, x + m * K, nb); });
  return a;
}

// The 8 lanes' sum in the fixed tree: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
QINLINE float tree8(const float* a) { return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7])); }

// The reference chain of one output: activation row xa (nb blocks) against weight row w.
float dot_ref(const ActBlock* xa, const uint8_t* w, QuantType t, int64_t nb) {
  if (t == QuantType::Q4_0) return q4_dot_ref(xa, w, nb);
  if (t == QuantType::Q4_K) return q4k_dot_ref(xa, w, nb);
  if (t == QuantType::Q6_K) return q6k_dot_ref(xa, w, nb);
  const int64_t bs = block_bytes(t);
  float acc[8] = {};
  int8_t wi[kQK];
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* blk = w + b * bs;
    weight_ints(wi, blk, t);
    const float s = half_at(blk) * xa[b].d;
    for (int l = 0; l < 8; l++) {
      int32_t p = 0;
      for (int j = 0; j < 4; j++) p += int32_t{wi[4 * l + j]} * int32_t{xa[b].q[4 * l + j]};
      acc[l] = std::fma(s, static_cast<float>(p), acc[l]);
    }
  }
  return tree8(acc);
}

// ---- x86: 8 int32 lanes of a block on one ymm ---------------------------------------------------
#if defined(__AVX2__)
// q8_0's 32 int8 weights.
QINLINE __m256i weight_bytes(const uint8_t* blk) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2)); }

// The fp16 scale's bits, for vcvtph2ps on 8 or 16 lanes at once.
QINLINE short half_bits(const uint8_t* p) {
  short h;
  std::memcpy(&h, p, 2);
  return h;
}

// ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
QINLINE float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// q8_0's tiles for each dot product: this file's part under ATTO_QUANT_CHAIN, compiled once per
// dot product (in a target region for the VNNI ones: quant_impl.h).
#define ATTO_QUANT_CHAIN 1
#define ATTO_QUANT_CHAIN_NS chain_avx2
#define ATTO_QUANT_DOT(aw, sx) _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sx), _mm256_set1_epi16(1))
#include "kernels/quant.cpp"  // NOLINT(build/include): the tiles, with vpmaddubsw + vpmaddwd (|pair| <= 32512)
#undef ATTO_QUANT_CHAIN_NS
#undef ATTO_QUANT_DOT
#if ATTO_QUANT_AVXVNNI
ATTO_QUANT_TARGET_PUSH("avxvnni")
#define ATTO_QUANT_CHAIN_NS chain_avxvnni
#define ATTO_QUANT_DOT(aw, sx) _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), aw, sx)
#include "kernels/quant.cpp"  // NOLINT(build/include)
#undef ATTO_QUANT_CHAIN_NS
#undef ATTO_QUANT_DOT
ATTO_QUANT_TARGET_POP
#endif
#if ATTO_QUANT_AVX512VNNI
ATTO_QUANT_TARGET_PUSH("avx512vnni,avx512vl")
#define ATTO_QUANT_CHAIN_NS chain_avx512vnni
#define ATTO_QUANT_DOT(aw, sx) _mm256_dpbusd_epi32(_mm256_setzero_si256(), aw, sx)
#define ATTO_QUANT_ZMM 1      // column pairs on zmm (tile2)
#include "kernels/quant.cpp"  // NOLINT(build/include)
#undef ATTO_QUANT_ZMM
#undef ATTO_QUANT_CHAIN_NS
#undef ATTO_QUANT_DOT
ATTO_QUANT_TARGET_POP
#endif
#undef ATTO_QUANT_CHAIN

#endif  // __AVX2__

// ---- ARM64: the 8 lanes as two int32x4 -------------------------------------------------------
#if defined(__aarch64__)

// Lanes 0..3 of 16 bytes: vmull_s8's 16-bit products, pairwise to 32 bits, pairwise again.
QINLINE int32x4_t dot16(int8x16_t w, int8x16_t x) {
  const int16x8_t lo = vmull_s8(vget_low_s8(w), vget_low_s8(x)), hi = vmull_high_s8(w, x);
  return vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi));
}

// q8_0's chain (q4_0's: quant_q4.cpp).
float dot_neon(const ActBlock* xa, const uint8_t* w, int64_t nb) {
  float32x4_t a0 = vdupq_n_f32(0.0f), a1 = vdupq_n_f32(0.0f);
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* blk = w + b * 34;
    const int8x16_t w0 = vld1q_s8(reinterpret_cast<const int8_t*>(blk + 2));
    const int8x16_t w1 = vld1q_s8(reinterpret_cast<const int8_t*>(blk + 18));
    const float32x4_t s = vdupq_n_f32(half_at(blk) * xa[b].d);
    a0 = vfmaq_f32(a0, s, vcvtq_f32_s32(dot16(w0, vld1q_s8(xa[b].q))));
    a1 = vfmaq_f32(a1, s, vcvtq_f32_s32(dot16(w1, vld1q_s8(xa[b].q + 16))));
  }
  const float32x4_t h = vaddq_f32(a0, a1);  // a_l + a_{l+4}
  return (vgetq_lane_f32(h, 0) + vgetq_lane_f32(h, 2)) + (vgetq_lane_f32(h, 1) + vgetq_lane_f32(h, 3));
}

#endif  // __aarch64__

// ---- Which dot product ----------------------------------------------------------------------
const char* dot_name(DotKind k) {
  switch (k) {
    case DotKind::Neon: return "neon";
    case DotKind::Avx2: return "avx2";
    case DotKind::AvxVnni: return "avxvnni";
    case DotKind::Avx512Vnni: return "avx512vnni";
    default: return "scalar";
  }
}

// What this CPU and this level's objects can run, best first.
std::vector<DotKind> runnable_dots() {
  std::vector<DotKind> k;
#if defined(__AVX2__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  const bool leaf7 = __get_cpuid_count(7, 0, &a, &b, &c, &d) != 0;
#if ATTO_QUANT_AVX512VNNI
  if (leaf7 && (c & (1u << 11)) != 0) k.push_back(DotKind::Avx512Vnni);  // AVX512_VNNI
#endif
#if ATTO_QUANT_AVXVNNI
  if (leaf7 && a >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d) != 0 && (a & (1u << 4)) != 0)
    k.push_back(DotKind::AvxVnni);  // AVX-VNNI
#endif
  k.push_back(DotKind::Avx2);
#elif defined(__aarch64__)
  k.push_back(DotKind::Neon);
#endif
  k.push_back(DotKind::Scalar);
  return k;
}

// The best runnable, or $ATTO_QUANT_DOT's (read on each call: tests change it).
DotKind dot_kind() {
  static const std::vector<DotKind> runnable = runnable_dots();
  const char* env = std::getenv("ATTO_QUANT_DOT");
  if (env == nullptr || *env == '\0') return runnable.front();
  for (DotKind k : runnable)
    if (std::strcmp(env, dot_name(k)) == 0) return k;
  throw std::runtime_error(std::string("ATTO_QUANT_DOT=") + env + ": not an integer dot product this CPU and level (" +
                           dot_name(runnable.front()) + ") can run");
}

// Columns of groups [g0, g1) with dot product k.
void run_columns(DotKind k, float* y, const ActBlock* xa, const uint8_t* w, QuantType t, QuantLayout layout,
                 const float* bias, int64_t M, int64_t N, int64_t nb, int64_t G, int64_t g0, int64_t g1) {
  if (t == QuantType::Q4_0)
    return q4_columns(k, layout == QuantLayout::Lanes16, y, xa, w, bias, M, N, nb, g0 * G, std::min(N, g1 * G));
  if (t == QuantType::Q4_K)
    return q4k_columns(k, layout == QuantLayout::Lanes16, y, xa, w, bias, M, N, nb, g0 * G, std::min(N, g1 * G));
  if (t == QuantType::Q6_K)
    return q6k_columns(k, layout == QuantLayout::Lanes16, y, xa, w, bias, M, N, nb, g0 * G, std::min(N, g1 * G));
#if defined(__AVX2__)
  switch (k) {
#if ATTO_QUANT_AVX512VNNI
    case DotKind::Avx512Vnni: return chain_avx512vnni::columns_of(y, xa, w, bias, M, N, nb, G, g0, g1);
#endif
#if ATTO_QUANT_AVXVNNI
    case DotKind::AvxVnni: return chain_avxvnni::columns_of(y, xa, w, bias, M, N, nb, G, g0, g1);
#endif
    case DotKind::Avx2: return chain_avx2::columns_of(y, xa, w, bias, M, N, nb, G, g0, g1);
    default: break;
  }
#endif
  columns_one_by_one(y, xa, w, bias, M, N, nb, quant_row_bytes(t, nb * kQK), g0 * G, std::min(N, g1 * G),
                     [k, t, nb](const ActBlock* x, const uint8_t* r) {
#if defined(__aarch64__)
                       if (k == DotKind::Neon) return dot_neon(x, r, nb);
#else
                       (void)k;
#endif
                       return dot_ref(x, r, t, nb);
                     });
}

}  // namespace

void linear_quant_forward(float* y, const float* x, const uint8_t* w, QuantType t, QuantLayout layout,
                          const float* bias, int64_t M, int64_t K, int64_t N) {
  check_args(t, K, "linear_quant_forward");
  check_layout(t, layout, "linear_quant_forward");
  if (M <= 0 || N <= 0) return;
  const DotKind k = dot_kind();
  const int64_t nb = K / kQK;
  const bool par = M * N * K >= kParMacs;
  const std::vector<ActBlock> xa = quantize_acts(x, M, K, par);
  // Columns a group: q8_0 4, but 2 for AVX2's 16 registers when tiles have more than 2 rows;
  // q4_0, Q4_K and Q6_K 16 (quant_q4.cpp's, quant_q4k.cpp's and quant_q6k.cpp's groups of 16 or 8).
  const bool lanes = t == QuantType::Q4_0 || quant_super_blocks(t);
#if defined(__AVX512VL__)
  const int64_t G = lanes ? 16 : 4;
#else
  const int64_t G = lanes ? 16 : M > 2 ? 2 : 4;
#endif
  const int64_t groups = (N + G - 1) / G;
  parallel_region(par && groups > 1, [&](int64_t th, int64_t nt) {
    const auto [g0, g1] = static_range(groups, th, nt);
    if (g0 < g1) run_columns(k, y, xa.data(), w, t, layout, bias, M, N, nb, G, g0, g1);
  });
}

void linear_quant_forward_naive(float* y, const float* x, const uint8_t* w, QuantType t, const float* bias, int64_t M,
                                int64_t K, int64_t N) {
  check_args(t, K, "linear_quant_forward_naive");
  if (M <= 0 || N <= 0) return;
  const int64_t nb = K / kQK, rb = quant_row_bytes(t, K);
  std::vector<ActBlock> xa(static_cast<size_t>(M * nb));
  for (int64_t m = 0; m < M; m++) quantize_row(xa.data() + m * nb, x + m * K, nb);
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      float v = dot_ref(xa.data() + m * nb, w + n * rb, t, nb);
      if (bias != nullptr) v += bias[n];
      y[m * N + n] = v;
    }
}

void dequantize_rows(float* out, const uint8_t* w, QuantType t, QuantLayout layout, int64_t N, int64_t K,
                     const int32_t* ids, int64_t n_ids) {
  check_args(t, K, "dequantize_rows");
  check_layout(t, layout, "dequantize_rows");
  const int64_t nb = K / kQK, bs = block_bytes(t), rb = quant_row_bytes(t, K);
  parallel_for(n_ids, n_ids > 1 && n_ids * K >= (1 << 16), [&](int64_t r) {
    const uint8_t* row = w + static_cast<int64_t>(ids[r]) * rb;
    float* o = out + r * K;
    if (layout == QuantLayout::Lanes16) {
      thread_local std::vector<uint8_t> bytes;  // a packing's row, unpacked (kept: a lookup a token)
      bytes.resize(static_cast<size_t>(rb));
      lanes16_unpack_row(bytes.data(), w, lane_block(t), N, K, ids[r]);
      row = bytes.data();
    }
    if (quant_super_blocks(t))
      return t == QuantType::Q4_K ? q4k_dequantize_row(o, row, K) : q6k_dequantize_row(o, row, K);
    int8_t wi[kQK];
    for (int64_t b = 0; b < nb; b++) {
      const uint8_t* blk = row + b * bs;
      weight_ints(wi, blk, t);
      const float d = half_at(blk);
      for (int i = 0; i < kQK; i++) o[b * kQK + i] = static_cast<float>(wi[i]) * d;
    }
  });
}

const char* quant_kernel_name() { return dot_name(dot_kind()); }

void quant_detail::lanes16_pack(uint8_t* out, const uint8_t* rows, LaneBlock f, int64_t N, int64_t K) {
  const int64_t nbk = K / f.values, rb = nbk * f.bytes, packed = N / 16 * 16;
  const int64_t words = (f.bytes - f.lead) / 4, extra = f.bytes - 4 * words;  // extra: lead + the rest
  for (int64_t n = 0; n < packed; n++)
    for (int64_t b = 0; b < nbk; b++) {
      uint8_t* g = out + ((n / 16) * nbk + b) * 16 * f.bytes;
      const uint8_t* src = rows + n * rb + b * f.bytes;
      const int64_t c = n % 16;
      for (int64_t q = 0; q < words; q++) std::memcpy(g + (q * 16 + c) * 4, src + f.lead + 4 * q, 4);
      uint8_t* e = g + words * 64 + extra * c;
      std::memcpy(e, src, static_cast<size_t>(f.lead));
      std::memcpy(e + f.lead, src + f.lead + 4 * words, static_cast<size_t>(extra - f.lead));
    }
  std::memcpy(out + packed * rb, rows + packed * rb, static_cast<size_t>((N - packed) * rb));
}

void quant_detail::lanes16_unpack_row(uint8_t* row, const uint8_t* w, LaneBlock f, int64_t N, int64_t K, int64_t n) {
  const int64_t nbk = K / f.values, rb = nbk * f.bytes;
  const int64_t words = (f.bytes - f.lead) / 4, extra = f.bytes - 4 * words;
  if (n >= N / 16 * 16) {
    std::memcpy(row, w + n * rb, static_cast<size_t>(rb));
    return;
  }
  for (int64_t b = 0; b < nbk; b++) {
    const uint8_t* g = w + ((n / 16) * nbk + b) * 16 * f.bytes;
    uint8_t* dst = row + b * f.bytes;
    const int64_t c = n % 16;
    for (int64_t q = 0; q < words; q++) std::memcpy(dst + f.lead + 4 * q, g + (q * 16 + c) * 4, 4);
    const uint8_t* e = g + words * 64 + extra * c;
    std::memcpy(dst, e, static_cast<size_t>(f.lead));
    std::memcpy(dst + f.lead + 4 * words, e + f.lead, static_cast<size_t>(extra - f.lead));
  }
}

QuantLayout quant_layout_for(QuantType t) {
#if defined(__AVX2__)
  if (t != QuantType::Q8_0) return QuantLayout::Lanes16;
#else
  (void)t;
#endif
  return QuantLayout::Rows;
}

void quant_pack(uint8_t* out, const uint8_t* rows, QuantType t, QuantLayout layout, int64_t N, int64_t K) {
  check_args(t, K, "quant_pack");
  check_layout(t, layout, "quant_pack");
  if (layout == QuantLayout::Lanes16) return lanes16_pack(out, rows, lane_block(t), N, K);
  std::memcpy(out, rows, static_cast<size_t>(N * quant_row_bytes(t, K)));
}

}  // namespace ATTO_KERNELS_NS

#else  // ATTO_QUANT_CHAIN: the tiles of one dot product, included three times above
// ---- the tiles for ATTO_QUANT_DOT ---------------------------------------------------------------
namespace ATTO_QUANT_CHAIN_NS {

// y[r * ldy + c] for R rows of activations (xa, row r at xa + r * nb) and C weight rows (w, row c
// at w + c * rb): each output the fixed chain; each weight block loaded and unpacked once.
template <QuantType T, int R, int C>
QINLINE void tile(float* y, int64_t ldy, const ActBlock* xa, const uint8_t* w, int64_t rb, const float* bias,
                  int64_t nb) {
  constexpr int64_t bs = 34;
  __m256 acc[R][C];
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    __m256i wv[C], aw[C];
    __m256 dw[C];
    for (int c = 0; c < C; c++) {
      const uint8_t* blk = w + c * rb + b * bs;
      if constexpr (R <= 2) __builtin_prefetch(blk + 8 * bs, 0, 0);  // streaming the weights
      wv[c] = weight_bytes(blk);
      aw[c] = _mm256_sign_epi8(wv[c], wv[c]);
      dw[c] = _mm256_cvtph_ps(_mm_set1_epi16(half_bits(blk)));  // exact
    }
    for (int r = 0; r < R; r++) {
      const ActBlock& a = xa[r * nb + b];
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q));
      const __m256 dx = _mm256_broadcast_ss(&a.d);
      for (int c = 0; c < C; c++) {
        const __m256i p = ATTO_QUANT_DOT(aw[c], _mm256_sign_epi8(xv, wv[c]));
        acc[r][c] = _mm256_fmadd_ps(_mm256_mul_ps(dw[c], dx), _mm256_cvtepi32_ps(p), acc[r][c]);
      }
    }
  }
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) {
      float v = hsum8(acc[r][c]);
      if (bias != nullptr) v += bias[c];  // (not + 0: that would turn -0 into +0)
      y[r * ldy + c] = v;
    }
}

#if defined(ATTO_QUANT_ZMM)
// (GCC 12 flags the intrinsics' own undefined-register idiom as (maybe-)uninitialized.)
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
// tile's outputs for 2P columns, two a 512-bit register ([column 2p | column 2p + 1], the lanes
// of each the same operations in the same order as tile's). VNNI takes the x + 128 form: u8
// x ^ 0x80 times the s8 weights, the sum started from -128 * sum4(w), is exactly sum4(w * x).
template <QuantType T, int R, int P>
QINLINE void tile2(float* y, int64_t ldy, const ActBlock* xa, const uint8_t* w, int64_t rb, const float* bias,
                   int64_t nb) {
  constexpr int64_t bs = 34;
  const __m512i zero = _mm512_setzero_si512(), bias80 = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc[R][P];
  for (int r = 0; r < R; r++)
    for (int p = 0; p < P; p++) acc[r][p] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    __m512i wv[P], corr[P];
    __m512 dw[P];
    for (int p = 0; p < P; p++) {
      const uint8_t* b0 = w + 2 * p * rb + b * bs;
      const uint8_t* b1 = b0 + rb;
      if constexpr (R <= 2) __builtin_prefetch(b0 + 8 * bs, 0, 0), __builtin_prefetch(b1 + 8 * bs, 0, 0);
      wv[p] = _mm512_inserti64x4(_mm512_castsi256_si512(weight_bytes(b0)), weight_bytes(b1), 1);
      corr[p] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, bias80, wv[p]));
      const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(half_bits(b0))),
                                                _mm_set1_epi16(half_bits(b1)), 1);
      dw[p] = _mm512_cvtph_ps(h);  // [d0 x 8 | d1 x 8], exact
    }
    for (int r = 0; r < R; r++) {
      const ActBlock& a = xa[r * nb + b];
      const __m512i xv = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q)));
      const __m512 dx = _mm512_set1_ps(a.d);
      const __m512i xu = _mm512_xor_si512(xv, bias80);
      for (int p = 0; p < P; p++) {
        const __m512i q = _mm512_dpbusd_epi32(corr[p], xu, wv[p]);
        acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(dw[p], dx), _mm512_cvtepi32_ps(q), acc[r][p]);
      }
    }
  }
  for (int r = 0; r < R; r++)
    for (int p = 0; p < P; p++)
      for (int h = 0; h < 2; h++) {
        const __m256 half = h == 0 ? _mm512_castps512_ps256(acc[r][p]) : _mm512_extractf32x8_ps(acc[r][p], 1);
        float v = hsum8(half);
        if (bias != nullptr) v += bias[2 * p + h];
        y[r * ldy + 2 * p + h] = v;
      }
}
#pragma GCC diagnostic pop
#endif

// C columns of R rows: pairs on 512-bit registers where this dot product has them (the odd
// column on 256 bits), else tile's.
template <QuantType T, int R, int C>
QINLINE void tile_cols(float* y, int64_t ldy, const ActBlock* xa, const uint8_t* w, int64_t rb, const float* bias,
                       int64_t nb) {
#if defined(ATTO_QUANT_ZMM)
  if constexpr (C >= 2) {
    tile2<T, R, C / 2>(y, ldy, xa, w, rb, bias, nb);
    if constexpr (C % 2 == 1)
      tile<T, R, 1>(y + C - 1, ldy, xa, w + (C - 1) * rb, rb, bias != nullptr ? bias + C - 1 : nullptr, nb);
  } else {
    tile<T, R, C>(y, ldy, xa, w, rb, bias, nb);
  }
#else
  tile<T, R, C>(y, ldy, xa, w, rb, bias, nb);
#endif
}

// The last rem < kRows rows of a column group: one tile of rem rows.
template <QuantType T, int C, int R>
QINLINE void rows_tail(float* y, int64_t ldy, const ActBlock* xa, const uint8_t* w, int64_t rb, const float* bias,
                       int64_t nb, int64_t rem) {
  if (rem == R)
    tile_cols<T, R, C>(y, ldy, xa, w, rb, bias, nb);
  else if constexpr (R > 1)
    rows_tail<T, C, R - 1>(y, ldy, xa, w, rb, bias, nb, rem);
}

// Columns [n0, n0 + C) of every row, kRows rows a tile (6 on zmm, else 4).
#if defined(ATTO_QUANT_ZMM)
constexpr int kRows = 6;
#else
constexpr int kRows = 4;
#endif
template <QuantType T, int C>
QINLINE void column_group(float* y, const ActBlock* xa, const uint8_t* w, const float* bias, int64_t M, int64_t N,
                          int64_t nb, int64_t n0) {
  const int64_t rb = nb * 34;
  const uint8_t* wc = w + n0 * rb;
  const float* bc = bias != nullptr ? bias + n0 : nullptr;
  int64_t m = 0;
  for (; m + kRows <= M; m += kRows) tile_cols<T, kRows, C>(y + m * N + n0, N, xa + m * nb, wc, rb, bc, nb);
  if (m < M) rows_tail<T, C, kRows - 1>(y + m * N + n0, N, xa + m * nb, wc, rb, bc, nb, M - m);
}

// Column groups [g0, g1) of G columns (G = 4, or 2 for AVX2 tiles of more than 2 rows). Decoding
// (1 or 2 rows) streams the weights once from memory: the rows 4 groups ahead are asked for
// (prefetchnta; a hint, the same bits): 1.7x tokens/s on a 57M model.
template <QuantType T>
QINLINE void columns(float* y, const ActBlock* xa, const uint8_t* w, const float* bias, int64_t M, int64_t N,
                     int64_t nb, int64_t G, int64_t g0, int64_t g1) {
  const int64_t rb = nb * 34, ahead = M <= 2 ? 4 : 0;
  for (int64_t g = g0; g < g1; g++) {
    if (ahead > 0 && g + ahead < g1)
      for (int64_t off = 0; off < G * rb; off += 64) __builtin_prefetch(w + (g + ahead) * G * rb + off, 0, 0);
    const int64_t n0 = g * G, cols = std::min(G, N - n0);
    switch (cols) {
      case 4: column_group<T, 4>(y, xa, w, bias, M, N, nb, n0); break;
      case 3: column_group<T, 3>(y, xa, w, bias, M, N, nb, n0); break;
      case 2: column_group<T, 2>(y, xa, w, bias, M, N, nb, n0); break;
      default: column_group<T, 1>(y, xa, w, bias, M, N, nb, n0); break;
    }
  }
}

// q8_0's column groups [g0, g1) of G columns: the entry of this dot product.
void columns_of(float* y, const ActBlock* xa, const uint8_t* w, const float* bias, int64_t M, int64_t N, int64_t nb,
                int64_t G, int64_t g0, int64_t g1) {
  columns<QuantType::Q8_0>(y, xa, w, bias, M, N, nb, G, g0, g1);
}

}  // namespace ATTO_QUANT_CHAIN_NS
#endif  // ATTO_QUANT_CHAIN
