// atto/io/ggml_quants.h: ggml's tensor types as GGUF files store them: f32, f16, bf16, and the
// block formats q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl (blocks of 32 values) and Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K, iq4_xs (super-blocks of 256), each decoded exactly as ggml's reference functions in
// ggml-quants.c (named at each function), and all but Q2_K, iq4_nl and iq4_xs encoded as them, so that a file atto writes
// holds the bytes llama.cpp's quantizer would write for the same values.
//
//   std::string q = io::encode(io::GgmlType::Q4_0, row);            // n a multiple of 32
//   io::decode(io::GgmlType::Q4_0, bytes, out.data(), out.size());  // the values ggml computes
//
// The block layouts (ggml-common.h):
//   q4_0  18 bytes / 32 values: f16 d; 16 bytes, byte j = element j (low nibble) and j+16 (high);
//         x = (q - 8) * d
//   q4_1  20 bytes / 32: f16 d, f16 m; 16 bytes of nibbles as q4_0; x = q * d + m
//   q5_0  22 bytes / 32: f16 d; 4 bytes qh (bit j: element j's fifth bit); 16 bytes of nibbles
//         as q4_0; x = (q - 16) * d
//   q5_1  24 bytes / 32: f16 d, f16 m; qh; 16 bytes of nibbles; x = q * d + m
//   q8_0  34 bytes / 32 values: f16 d; 32 int8 q; x = q * d
//   Q2_K  84 bytes / 256: 16 bytes of 4-bit scale and min pairs (one per 16 values), 64 bytes of
//         2-bit quants, f16 d, f16 dmin; x = d * scale * q - dmin * min
//   Q3_K 110 bytes / 256: 32 bytes of high bits, 64 bytes of 2-bit quants, 12 bytes of sixteen
//         6-bit scales, f16 d; x = d * (scale - 32) * (q - 4 unless the high bit is set)
//   Q4_K 144 bytes / 256 values: f16 d, f16 dmin; 12 bytes of eight 6-bit scales and mins; 128
//         bytes of nibbles, each 32 bytes holding two sub-blocks of 32 (low nibbles the first);
//         x = d * scale_j * q - dmin * min_j
//   Q5_K 176 bytes / 256: Q4_K's d, dmin and scales; 32 bytes of fifth bits (bits 2c and 2c + 1
//         of byte l: value l of sub-blocks 2c and 2c + 1); 128 bytes of nibbles as Q4_K
//   Q6_K 210 bytes / 256 values: 128 bytes ql (low 4 bits), 64 bytes qh (high 2 bits), 16 int8
//         scales (one per 16 values), f16 d; x = d * scale * (q - 32)
//   IQ4_NL 18 bytes / 32: f16 d; 16 bytes of nibbles as q4_0; x = d * kvalues[q], kvalues ggml's
//         16 non-uniform int8 levels -127..113
//   IQ4_XS 136 bytes / 256: f16 d; u16 scales_h and 4 bytes scales_l (eight 6-bit scales, one per
//         32 values: low nibbles in scales_l, top bit pairs in scales_h); 128 bytes of nibbles,
//         16 a sub-block as q4_0's; x = d * (scale - 32) * kvalues[q]
//   bf16  2 bytes a value: a float's high half (encoded rounding to nearest even, NaN kept quiet)
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace atto::io {

// ggml's type numbers (enum ggml_type) for the types atto reads.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  IQ4_NL = 20,
  IQ4_XS = 23,
  BF16 = 30
};
// ggml's name of a type number ("q4_k" for 12, "bf16" for 30, "unknown" for one atto has no name
// for).
const char* ggml_type_name(uint32_t t);
const char* to_string(GgmlType t);
// Whether atto reads ggml type number t (the enumerators above).
bool ggml_type_readable(uint32_t t);
// Whether atto writes type t (every type it reads but Q2_K and Q3_K).
bool ggml_type_writable(GgmlType t);
// Values per block: 1 (f32, f16, bf16), 32 (q4_0, q4_1, q5_0, q5_1, q8_0), 256 (the K-quants).
uint64_t ggml_block_size(GgmlType t);
// Bytes of n elements (n a multiple of the block size).
uint64_t ggml_nbytes(GgmlType t, uint64_t n);

// IEEE binary16 conversions (round to nearest, ties to even), as ggml's GGML_FP32_TO_FP16.
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);
// bfloat16, as ggml's GGML_FP32_TO_BF16 (nearest, ties to even; a NaN stays a quiet NaN) and back.
uint16_t f32_to_bf16(float f);
float bf16_to_f32(uint16_t h);

// q8_0: one f16 scale d = max|x| / 127 and 32 int8 q = round(x / d) a block, exactly as ggml's
// quantize_row_q8_0_ref; n must be a multiple of 32.
std::vector<uint8_t> quantize_q8_0(std::span<const float> x);
void dequantize_q8_0(const uint8_t* blocks, float* out, uint64_t n);
// q4_0: the value of largest magnitude m (with its sign) gives d = m / -8; q = min(15, trunc(x / d
// + 8.5)), exactly as ggml's quantize_row_q4_0_ref (m itself is q = 0, -m is q = 15 clamped from
// 16); n must be a multiple of 32.
std::vector<uint8_t> quantize_q4_0(std::span<const float> x);
void dequantize_q4_0(const uint8_t* blocks, float* out, uint64_t n);
// Q4_K as ggml's quantize_row_q4_K_ref (what llama-quantize writes without an importance matrix):
// per sub-block of 32 a scale and an offset fitted by weighted least squares (make_qkx2_quants),
// both rounded to 6 bits against the super-block's f16 d and dmin; n a multiple of 256.
std::vector<uint8_t> quantize_q4_k(std::span<const float> x);
// Q6_K as ggml's quantize_row_q6_K_ref: per 16 values an int8 scale over the super-block's f16 d,
// fitted by make_qx_quants (weights x^2), the values 6-bit q - 32; n a multiple of 256.
std::vector<uint8_t> quantize_q6_k(std::span<const float> x);
// Q4_K and Q6_K as ggml's dequantize_row_q4_K / dequantize_row_q6_K; n a multiple of 256.
void dequantize_q4_k(const uint8_t* blocks, float* out, uint64_t n);
void dequantize_q6_k(const uint8_t* blocks, float* out, uint64_t n);
// q4_1, q5_0 and q5_1 as ggml's quantize_row_q4_1_ref, _q5_0_ref and _q5_1_ref (q4_1 and q5_1: d
// = (max - min) / 15 or 31 and m = min; q5_0: q4_0's rule with d = m / -16), and back as its
// dequantize_row_*; n a multiple of 32 (ggml_quants_q5.cpp, as are the rest of these).
std::vector<uint8_t> quantize_q4_1(std::span<const float> x);
std::vector<uint8_t> quantize_q5_0(std::span<const float> x);
std::vector<uint8_t> quantize_q5_1(std::span<const float> x);
void dequantize_q4_1(const uint8_t* blocks, float* out, uint64_t n);
void dequantize_q5_0(const uint8_t* blocks, float* out, uint64_t n);
void dequantize_q5_1(const uint8_t* blocks, float* out, uint64_t n);
// Q5_K as ggml's quantize_row_q5_K_ref (Q4_K's fit with 5-bit quants) and dequantize_row_q5_K;
// Q2_K and Q3_K as its dequantize_row_q2_K / _q3_K (Q2_K read, not written); n a multiple of 256.
std::vector<uint8_t> quantize_q5_k(std::span<const float> x);
// Q3_K as ggml's quantize_row_q3_K_ref: sixteen sub-blocks of 16, each a 6-bit signed scale times
// 3-bit quants -4..3, one f16 d a super-block of 256.
std::vector<uint8_t> quantize_q3_k(std::span<const float> x);
// q5_0 blocks as q8_0 blocks of the same values, exactly: the same f16 d, each int8 the 5-bit q -
// 16 (n values, a multiple of 32; the q8_0 bytes returned). So q5_0 weights compute on q8_0's
// integer kernels with the values llama.cpp's q5_0 has.
std::string q5_0_as_q8_0(const uint8_t* blocks, uint64_t n);
// Q3_K super-blocks as Q6_K super-blocks of the same values, exactly: the same f16 d, each
// sub-block's scale the 6-bit scale - 32, each quant the 3-bit quant (-4..3) (n values, a multiple
// of 256; the Q6_K bytes returned). So Q3_K weights compute on Q6_K's integer kernels.
std::string q3_k_as_q6_k(const uint8_t* blocks, uint64_t n);
// iq4_nl blocks as q8_0 blocks of the same values, exactly: the same f16 d, each nibble's int8
// level (n values, a multiple of 32; the q8_0 bytes returned). So iq4_nl weights (llama.cpp's
// fallback for Q3_K and Q2_K in models whose widths are not multiples of 256) compute on q8_0's
// integer kernels.
std::string iq4_nl_as_q8_0(const uint8_t* blocks, uint64_t n);
// iq4_xs super-blocks as atto's Q8F blocks of the same values, exactly: per sub-block of 32 its
// 32 int8 levels and its scale d * (ls - 32) as an f32 (exact: 17 bits) (n values, a multiple of
// 256; the bytes returned). So they compute on atto's Q8F integer kernels (kernels::QuantType::Q8F).
std::string iq4_xs_as_q8f(const uint8_t* blocks, uint64_t n);
// iq4_nl and iq4_xs as ggml's dequantize_row_iq4_nl / _iq4_xs (read, not written).
void dequantize_iq4_nl(const uint8_t* blocks, float* out, uint64_t n);
void dequantize_iq4_xs(const uint8_t* blocks, float* out, uint64_t n);
void dequantize_q5_k(const uint8_t* blocks, float* out, uint64_t n);
void dequantize_q2_k(const uint8_t* blocks, float* out, uint64_t n);
void dequantize_q3_k(const uint8_t* blocks, float* out, uint64_t n);

// q4_1 (nbits 4) or q5_1 (5) blocks as atto's U8M blocks of the same values, exactly: {the same f16
// d and m, the 32 values' q as uint8 (0..15 or 0..31)} (n values, a multiple of 32; the bytes
// returned). So they compute on atto's U8M integer kernels (kernels::QuantType::U8M).
std::string min_offset_as_u8m(const uint8_t* blocks, uint64_t n, int nbits);
// The type id of the blocks that hold a type-t matrix's values exactly for atto's integer kernels
// (kernels::QuantType): q8_0 for q5_0 and iq4_nl, Q6_K for Q3_K, kU8M for q4_1 and q5_1, kQ8F for
// iq4_xs (the conversions above); t itself for q8_0, q4_0, Q4_K, Q5_K and Q6_K; 0 (F32: computed
// as floats) for the rest.
inline constexpr uint32_t kU8M = 256;  // atto's own (no ggml type has it): kernels::QuantType::U8M
inline constexpr uint32_t kQ8F = 257;  // the same: kernels::QuantType::Q8F
uint32_t integer_type_for(GgmlType t);
// n values of type t (their bytes) as blocks of integer_type_for(t) (the bytes as they are when
// that is t).
std::string as_integer_blocks(GgmlType t, std::string bytes, uint64_t n);

// Any writable type: the bytes of x (x.size() a multiple of the block size, else atto::Error).
std::string encode(GgmlType t, std::span<const float> x);
// Any type: n values from its bytes (ggml_nbytes(t, n) of them).
void decode(GgmlType t, const uint8_t* src, float* out, uint64_t n);

// The type a tensor of row-major `shape` is stored as when `want` is asked for, the rule of
// `atto export` and `atto quantize`: 1-D tensors (norms, biases) stay f32; a matrix takes `want`,
// or, when its rows are not a multiple of want's block size, f16, except that a K-quant matrix
// whose rows are a multiple of 32 takes q8_0 (as llama.cpp for Q6_K; for Q4_K and Q5_K it takes
// q5_0 and q5_1, which atto computes in floats, q8_0 as integers).
GgmlType stored_type_for(GgmlType want, const std::vector<int64_t>& shape);
// llama.cpp's general.file_type (enum llama_ftype) of a file whose matrices are `t`:
// 0 ALL_F32, 1 MOSTLY_F16, 2 MOSTLY_Q4_0, 3 MOSTLY_Q4_1, 7 MOSTLY_Q8_0, 8 MOSTLY_Q5_0, 9
// MOSTLY_Q5_1, 10 MOSTLY_Q2_K, 11 MOSTLY_Q3_K_S, 14 MOSTLY_Q4_K_S, 16 MOSTLY_Q5_K_S, 18
// MOSTLY_Q6_K, 25 MOSTLY_IQ4_NL, 30 MOSTLY_IQ4_XS, 32 MOSTLY_BF16.
uint32_t ggml_file_type(GgmlType t);
// How much precision a type keeps, for the refusal to "re-quantize" to a better type, in the
// order of llama.cpp's perplexity table: f32 14, f16 13, bf16 12, q8_0 11, Q6_K 10, Q5_K 9, q5_1
// 8, q5_0 7, Q4_K 6, iq4_nl 5, iq4_xs 4, q4_1 3, q4_0 2, Q3_K 1, Q2_K 0.
int ggml_type_precision(GgmlType t);

}  // namespace atto::io
