// atto/kernels/quant.h: the linear layer on ggml's quantized weights (q8_0, q4_0, Q4_K, Q5_K, Q6_K), computed
// in integers per block of 32 (docs/cpu.md, "Integer kernels (quantized weights)").
//
//   // y[M, N] = x[M, K] W^T + bias, W as N rows of ggml blocks (K a multiple of 32)
//   atto::kernels::linear_quant_forward(y, x, w, QuantType::Q8_0, bias, M, K, N);
//
// Included by kernels.h (do not include it alone in a portable build: the dispatched names come
// from dispatch.h, at the end of kernels.h).
#pragma once

#include <cstdint>

#include "kernels/isa.h"

namespace atto::kernels {

// ggml's type ids, as stored in GGUF files.
// Two types are atto's own (no ggml type has them), how it keeps other ggml types in memory with
// exactly their values (io::as_integer_blocks): U8M (256), ggml's q4_1 and q5_1: blocks of 32
// values, {fp16 d, fp16 m, 32 uint8 q in 0..31}, value q * d + m; Q8F (257), ggml's iq4_xs: blocks
// of 32, {32 int8 q, f32 d}, value q * d.
enum class QuantType : int { Q4_0 = 2, Q8_0 = 8, Q4_K = 12, Q5_K = 13, Q6_K = 14, U8M = 256, Q8F = 257 };
// Whether t's rows are super-blocks of 256 values (Q4_K, Q5_K, Q6_K), not blocks of 32.
inline bool quant_super_blocks(QuantType t) {
  return t == QuantType::Q4_K || t == QuantType::Q5_K || t == QuantType::Q6_K;
}
// Bytes of one row of K values: K/32 blocks of 18 (q4_0), 34 (q8_0) or 36 (U8M, Q8F), or K/256 super-blocks of
// 144 (Q4_K), 176 (Q5_K) or 210 (Q6_K). (Inline: the same at every level, so not in the dispatched
// table.)
inline int64_t quant_row_bytes(QuantType t, int64_t K) {
  if (quant_super_blocks(t)) return K / 256 * (t == QuantType::Q4_K ? 144 : t == QuantType::Q5_K ? 176 : 210);
  return K / 32 * (t == QuantType::Q4_0 ? 18 : t == QuantType::U8M || t == QuantType::Q8F ? 36 : 34);
}

// How a quantized matrix's bytes are laid out in memory. Rows: ggml's, N rows of quant_row_bytes
// each, as in a GGUF file. Lanes16 (every type): the same bytes regrouped for the
// column-a-lane kernels, so that they load a block of 16 columns as whole vectors instead of
// gathering it from 16 rows. The first N / 16 * 16 rows go as groups of 16; in group G, block s
// (q4_0's blocks of 32 values, or the super-blocks of 256) is at byte (G * blocks a row + s) * 16 *
// block bytes: the block's dwords for the 16 columns (dword q of column c at (q * 16 + c) * 4),
// then the columns' leftover bytes, 2-byte field by field, each field in column order (q8_0 and
// q4_0: their leading fp16 d; U8M: its d, then its m; Q6_K: its trailing fp16 d; Q4_K's 144,
// Q5_K's 176 and Q8F's 36 bytes are all dwords, Q8F's f32 d the ninth). The last N % 16 rows stay as they are.
enum class QuantLayout : int { Rows = 0, Lanes16 = 1 };

ATTO_ISA_BEGIN
// The layout linear_quant_forward reads fastest for type t at this level: Lanes16 on x86 (AVX2 and
// up), Rows on ARM64. Every function takes either.
QuantLayout quant_layout_for(QuantType t);
// out = the N rows of K values at `rows` (ggml's row layout) in `layout` (the same number of bytes).
void quant_pack(uint8_t* out, const uint8_t* rows, QuantType t, QuantLayout layout, int64_t N, int64_t K);
// y[M, N] = x[M, K] W^T (+ bias[N] when bias != nullptr), W given as N rows of quant_row_bytes(t, K)
// bytes each (ggml block layout; `layout` says how they are arranged). x is quantized per row in blocks of 32 to int8 with an f32 scale
// (d = max|x|/127, q = nearbyint(x/d), ties to even; d = 0 -> all q = 0), then each output is
// computed in integers per block and combined in float in the fixed order documented below.
// K must be a multiple of 32 (of 256 for Q4_K, Q5_K and Q6_K; callers check, and so does this).
//
// The fixed orders (every level, every dot product, any thread count and the reference give these
// bits). In both, s_b = dw_b * dx_b (one float multiply: block b's fp16 scale as float times the
// activation block's f32 scale), and at the end y += bias[n] (when bias is given).
// q8_0 and q4_0: one float acc = 0 per output. For each block b = 0 .. K/32-1 in order, p_b =
// sum_{i<32} w_int[32b + i] * x_int[32b + i] over the whole block, exact (q8_0: w_int = the int8,
// -128 included, |p_b| <= 520192; q4_0: w_int = nibble - 8, |p_b| <= 32512; both below 2^24, so
// float(p_b) is exact too), acc = fma(s_b, float(p_b), acc); y = acc.
// U8M: q8_0's chain, p_b = sum_{i<32} q[32b + i] * x_int[32b + i] over its uint8 q (exact, |p_b| <=
// 125984), then the min: acc = fma(dm_b * dx_b, float(S_b), acc), dm_b the block's fp16 m as float,
// S_b = sum_{i<32} x_int[32b + i] (exact), the product one float multiply.
// Q8F: q8_0's chain with its f32 d in place of the fp16 one.
// Q4_K (super-blocks of 256: fp16 d and dmin, eight 6-bit scales sc_j and mins m_j, nibbles):
// sub-block j of super-block s pairs with activation block b = 8s + j. One float acc = 0 per
// output. For each b in order: P_b = sum_{i<32} nibble_i * x_int[32b + i] (exact int32, the
// nibbles 0..15 as they are), S_b = sum_{i<32} x_int[32b + i] (exact), dsc = float(d) * sc_j and
// dmn = float(dmin) * m_j (exact: 17 bits), then acc = fma(dsc * dx_b, float(P_b), acc) and
// acc = fma(-(dmn * dx_b), float(S_b), acc) (each product one float multiply); y = acc.
// Q5_K: Q4_K's order, its 5-bit values (the nibble + 16 * bit j of qh byte i, for value i of
// sub-block j; 0..31) in place of the nibbles in P_b.
// Q6_K (super-blocks of 256: sixteen int8 scales sc_i, one per 16 values, an fp16 d, 6-bit u):
// activation block b = 8s + j covers sub-blocks 2j and 2j + 1 of super-block s. One float acc = 0
// per output. For each b in order: P_i = sum_{16 values} (u - 32) * x_int (exact int32), Q_b =
// sc_2j * P_2j + sc_2j+1 * P_2j+1 (exact; |Q_b| < 2^24, so float(Q_b) is exact), acc = fma(float(d)
// * dx_b, float(Q_b), acc) (the product one float multiply); y = acc.
// An activation block with a NaN gets the scale NaN (so its outputs are NaN); q is clamped to
// [-127, 127] (only a subnormal scale can round past it).
// Throws std::invalid_argument when K is not a multiple of 32 (Q4_K, Q5_K, Q6_K: 256) or t is another
// type.
void linear_quant_forward(float* y, const float* x, const uint8_t* w, QuantType t, QuantLayout layout,
                          const float* bias, int64_t M, int64_t K, int64_t N);
// The scalar reference: the same bits as linear_quant_forward at every level (plain C++ loops,
// std::fma where the kernel fuses), single-threaded.
void linear_quant_forward_naive(float* y, const float* x, const uint8_t* w, QuantType t, const float* bias, int64_t M,
                                int64_t K, int64_t N);
// out[r, :] = dequantized row ids[r] (< N) of W (N rows of K values): an embedding lookup on
// quantized rows. Each value is float(d) * int (Q4_K, Q5_K: (d * sc) * value - dmin * m; Q6_K: (d * sc) * (u - 32)),
// the bits of io's ggml decoder (src/io/ggml_quants.cpp).
void dequantize_rows(float* out, const uint8_t* w, QuantType t, QuantLayout layout, int64_t N, int64_t K,
                     const int32_t* ids, int64_t n_ids);
// Which integer dot product the chosen level runs: "avx512vnni", "avxvnni", "avx2", "neon", "scalar".
const char* quant_kernel_name();
ATTO_ISA_END

}  // namespace atto::kernels
