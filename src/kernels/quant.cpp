// atto/kernels/quant.cpp: the linear layer on ggml's q8_0, q4_0, Q4_K, Q5_K and Q6_K weights (and
// U8M, how atto keeps q4_1 and q5_1), computed in
// integers per block of 32 (quant.h has the fixed orders that define the bits; docs/cpu.md, "Integer
// kernels", the dot products per level and how each keeps every lane's sum exact).
// Activations are quantized once per call to blocks {float d; -8 sum(q); int8 q[32]}; the kernels
// of q4_0, q8_0 and U8M are in quant_q4_q8.cpp, Q4_K's and Q5_K's in quant_q4k_q5k.cpp and Q6_K's in quant_q6k.cpp;
// threads split the columns (fixed groups of 16: any thread count gives the same bits).
// $ATTO_QUANT_DOT=avx2|avxvnni|avx512vnni|scalar forces one.
#include <omp.h>
#include <algorithm>
#include <atomic>
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
#endif

namespace ATTO_KERNELS_NS {
using namespace quant_detail;  // NOLINT(build/namespaces): the files' shared parts
namespace {

constexpr int64_t kParMacs = int64_t{1} << 15;  // below this many multiply-adds: one thread

int64_t block_bytes(QuantType t) { return quant_row_bytes(t, 32); }

// The kernel family of a type of blocks of 32.
B32 b32_of(QuantType t) {
  return t == QuantType::Q4_0 ? kB32Q4 : t == QuantType::U8M ? kB32U8M : t == QuantType::Q8F ? kB32Q8F : kB32Q8;
}

void check_args(QuantType t, int64_t K, const char* what) {
  if (t != QuantType::Q4_0 && t != QuantType::Q8_0 && t != QuantType::Q4_K && t != QuantType::Q5_K &&
      t != QuantType::Q6_K && t != QuantType::U8M && t != QuantType::Q8F)
    throw std::invalid_argument(std::string(what) + ": not a q4_0, q8_0, q4_k, q5_k, q6_k, u8m or q8f type id: " +
                                std::to_string(static_cast<int>(t)));
  if (quant_super_blocks(t) && (K < 0 || K % (8 * kQK) != 0))
    throw std::invalid_argument(std::string(what) + ": K = " + std::to_string(K) +
                                " is not a multiple of 256 (the super-block size of q4_k, q5_k and q6_k)");
  if (K < 0 || K % kQK != 0)
    throw std::invalid_argument(std::string(what) + ": K = " + std::to_string(K) +
                                " is not a multiple of 32 (the block size of q4_0, q8_0, u8m and q8f)");
}

void check_layout(QuantType t, QuantLayout layout, const char* what) {
  if (layout != QuantLayout::Rows && layout != QuantLayout::Lanes16)
    throw std::invalid_argument(std::string(what) + ": layout " + std::to_string(static_cast<int>(layout)) +
                                " is not one of type id " + std::to_string(static_cast<int>(t)) +
                                " (Rows or Lanes16)");
}

// The block format of a type Lanes16 regroups (quant_impl.h).
LaneBlock lane_block(QuantType t) {
  if (t == QuantType::U8M) return {36, 4, 32};
  if (t == QuantType::Q8F) return {36, 0, 32};
  if (t == QuantType::Q4_0 || t == QuantType::Q8_0) return {block_bytes(t), 2, 32};
  return {t == QuantType::Q4_K ? 144 : t == QuantType::Q5_K ? 176 : 210, 0, 256};
}

// The 32 integer values of a weight block: q8_0's and Q8F's int8, U8M's uint8 (0..31), q4_0's
// nibble - 8 (low nibbles first).
void weight_ints(int8_t* out, const uint8_t* blk, QuantType t) {
  if (t != QuantType::Q4_0) {
    std::memcpy(out, blk + (t == QuantType::U8M ? 4 : t == QuantType::Q8F ? 0 : 2), kQK);
    return;
  }
  for (int j = 0; j < kQK / 2; j++) {
    out[j] = static_cast<int8_t>((blk[2 + j] & 0x0F) - 8);
    out[j + kQK / 2] = static_cast<int8_t>((blk[2 + j] >> 4) - 8);
  }
}

// The largest |v[i]| of a block (exact in any order), and whether one is NaN.
float block_amax(const float* v, bool& nan) {
#if defined(__AVX2__)
  const __m256 mag = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 m = _mm256_setzero_ps(), u = _mm256_setzero_ps();
  for (int i = 0; i < kQK; i += 8) {
    const __m256 x = _mm256_loadu_ps(v + i);
    m = _mm256_max_ps(m, _mm256_and_ps(x, mag));
    u = _mm256_or_ps(u, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  }
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  nan = _mm256_movemask_ps(u) != 0;
  return _mm_cvtss_f32(h);
#else
  float amax = 0.0f;
  nan = false;
  for (int i = 0; i < kQK; i++) {
    const float a = std::fabs(v[i]);
    amax = amax > a ? amax : a;
    nan = nan || v[i] != v[i];
  }
  return amax;
#endif
}

// One row of K values to K/32 blocks: d = max|x| / 127 (NaN when the block holds a NaN),
// q = nearbyint(x / d) clamped to [-127, 127] (a NaN quotient to -127), all 0 when d == 0.
void quantize_row(ActBlock* out, const float* x, int64_t nb) {
  for (int64_t b = 0; b < nb; b++) {
    const float* v = x + b * kQK;
    bool nan = false;
    const float amax = block_amax(v, nan);
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

// The reference chain of one output: activation row xa (nb blocks) against weight row w.
float dot_ref(const ActBlock* xa, const uint8_t* w, QuantType t, int64_t nb) {
  if (t == QuantType::Q4_K || t == QuantType::Q5_K) return k45_dot_ref(t == QuantType::Q5_K, xa, w, nb);
  if (t == QuantType::Q6_K) return q6k_dot_ref(xa, w, nb);
  return b32_dot_ref(b32_of(t), xa, w, nb);
}

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
void run_columns(DotKind k, float* y, const ActBlock* xa, const int32_t* xs32, const uint8_t* w, QuantType t,
                 QuantLayout layout, const float* bias, int64_t M, int64_t N, int64_t nb, int64_t G, int64_t g0,
                 int64_t g1) {
  const bool packed = layout == QuantLayout::Lanes16;
  const int64_t n0 = g0 * G, n1 = std::min(N, g1 * G);
  if (t == QuantType::Q4_K || t == QuantType::Q5_K)
    return k45_columns(k, t == QuantType::Q5_K, packed, y, xa, w, bias, M, N, nb, n0, n1);
  if (t == QuantType::Q6_K) return q6k_columns(k, packed, y, xa, xs32, w, bias, M, N, nb, n0, n1);
  b32_columns(k, b32_of(t), packed, y, xa, w, bias, M, N, nb, n0, n1);
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
  const std::vector<int32_t> xs32 = t == QuantType::Q6_K ? q6k_half_sums(xa.data(), M * nb) : std::vector<int32_t>{};
  // Columns a group: 16 (the kernels' groups of 16 or 8 columns; the Lanes16 packing's groups).
  constexpr int64_t G = 16;
  const int64_t groups = (N + G - 1) / G;
  // Decoding keeps one contiguous run of groups a thread (its prefetches stream the next group's
  // rows); a prompt's groups are handed out a few at a time, so that a thread whose core is slower
  // (another process, a busy sibling) takes fewer. An output's chain is the same whichever thread
  // computes it: the same bits.
  const bool dynamic = M > 8 && groups >= 8;
  std::atomic<int64_t> next{0};
  parallel_region(par && groups > 1, [&](int64_t th, int64_t nt) {
    if (!dynamic) {
      const auto [g0, g1] = static_range(groups, th, nt);
      if (g0 < g1) run_columns(k, y, xa.data(), xs32.data(), w, t, layout, bias, M, N, nb, G, g0, g1);
      return;
    }
    const int64_t chunk = std::max<int64_t>(1, groups / (8 * nt));
    for (int64_t g0 = next.fetch_add(chunk); g0 < groups; g0 = next.fetch_add(chunk))
      run_columns(k, y, xa.data(), xs32.data(), w, t, layout, bias, M, N, nb, G, g0,
                  std::min(groups, g0 + chunk));
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
      return t == QuantType::Q6_K ? q6k_dequantize_row(o, row, K) : k45_dequantize_row(t == QuantType::Q5_K, o, row, K);
    int8_t wi[kQK];
    for (int64_t b = 0; b < nb; b++) {
      const uint8_t* blk = row + b * bs;
      weight_ints(wi, blk, t);
      float d = half_at(blk);
      if (t == QuantType::Q8F) std::memcpy(&d, blk + 32, 4);
      if (t == QuantType::U8M) {  // as ggml's dequantize_row_q4_1 / _q5_1: q * d + m
        const float mn = half_at(blk + 2);
        for (int i = 0; i < kQK; i++) o[b * kQK + i] = static_cast<float>(wi[i]) * d + mn;
        continue;
      }
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
      uint8_t e[8];  // the extra bytes: the lead, then those past the dwords (2-byte fields)
      std::memcpy(e, src, static_cast<size_t>(f.lead));
      std::memcpy(e + f.lead, src + f.lead + 4 * words, static_cast<size_t>(extra - f.lead));
      for (int64_t fld = 0; fld < 4 && fld < extra / 2; fld++) std::memcpy(g + words * 64 + (fld * 16 + c) * 2, e + 2 * fld, 2);
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
    uint8_t e[8];
    for (int64_t fld = 0; fld < 4 && fld < extra / 2; fld++) std::memcpy(e + 2 * fld, g + words * 64 + (fld * 16 + c) * 2, 2);
    std::memcpy(dst, e, static_cast<size_t>(f.lead));
    std::memcpy(dst + f.lead + 4 * words, e + f.lead, static_cast<size_t>(extra - f.lead));
  }
}

QuantLayout quant_layout_for(QuantType t) {
  (void)t;  // every type: the column-a-lane kernels read Lanes16 on x86; the others read rows
#if defined(__AVX2__)
  return QuantLayout::Lanes16;
#else
  return QuantLayout::Rows;
#endif
}

void quant_pack(uint8_t* out, const uint8_t* rows, QuantType t, QuantLayout layout, int64_t N, int64_t K) {
  check_args(t, K, "quant_pack");
  check_layout(t, layout, "quant_pack");
  if (layout == QuantLayout::Lanes16) return lanes16_pack(out, rows, lane_block(t), N, K);
  std::memcpy(out, rows, static_cast<size_t>(N * quant_row_bytes(t, K)));
}

}  // namespace ATTO_KERNELS_NS
