// atto/io/ggml_quants.h: ggml's tensor types as GGUF files store them: f32, f16, and the block
// formats q4_0, q8_0 (blocks of 32 values) and Q4_K, Q6_K (super-blocks of 256), each encoded and
// decoded exactly as ggml's reference functions in ggml-quants.c (named at each function), so
// that a file atto writes holds the bytes llama.cpp's quantizer would write for the same values.
//
//   std::string q = io::encode(io::GgmlType::Q4_0, row);            // n a multiple of 32
//   io::decode(io::GgmlType::Q4_0, bytes, out.data(), out.size());  // the values ggml computes
//
// The block layouts (ggml-common.h):
//   q4_0  18 bytes / 32 values: f16 d; 16 bytes, byte j = element j (low nibble) and j+16 (high);
//         x = (q - 8) * d
//   q8_0  34 bytes / 32 values: f16 d; 32 int8 q; x = q * d
//   Q4_K 144 bytes / 256 values: f16 d, f16 dmin; 12 bytes of eight 6-bit scales and mins; 128
//         bytes of nibbles, each 32 bytes holding two sub-blocks of 32 (low nibbles the first);
//         x = d * scale_j * q - dmin * min_j
//   Q6_K 210 bytes / 256 values: 128 bytes ql (low 4 bits), 64 bytes qh (high 2 bits), 16 int8
//         scales (one per 16 values), f16 d; x = d * scale * (q - 32)
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace atto::io {

// ggml's type numbers (enum ggml_type) for the types atto reads.
enum class GgmlType : uint32_t { F32 = 0, F16 = 1, Q4_0 = 2, Q8_0 = 8, Q4_K = 12, Q6_K = 14 };
// ggml's name of a type number ("q4_k" for 12, "unknown" past the table).
const char* ggml_type_name(uint32_t t);
const char* to_string(GgmlType t);
// Whether atto reads ggml type number t (the enumerators above).
bool ggml_type_readable(uint32_t t);
// Whether atto writes type t (every type it reads).
bool ggml_type_writable(GgmlType t);
// Values per block: 1 (f32, f16), 32 (q4_0, q8_0), 256 (Q4_K, Q6_K).
uint64_t ggml_block_size(GgmlType t);
// Bytes of n elements (n a multiple of the block size).
uint64_t ggml_nbytes(GgmlType t, uint64_t n);

// IEEE binary16 conversions (round to nearest, ties to even), as ggml's GGML_FP32_TO_FP16.
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

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

// Any writable type: the bytes of x (x.size() a multiple of the block size, else atto::Error).
std::string encode(GgmlType t, std::span<const float> x);
// Any type: n values from its bytes (ggml_nbytes(t, n) of them).
void decode(GgmlType t, const uint8_t* src, float* out, uint64_t n);

// The type a tensor of row-major `shape` is stored as when `want` is asked for, the rule of
// `atto export` and `atto quantize`: 1-D tensors (norms, biases) stay f32; a matrix takes `want`,
// or, when its rows are not a multiple of want's block size, f16 (q8_0 for Q4_K where rows of
// a multiple of 32 allow it: llama.cpp takes q5_0 there, which atto does not write; q8_0 for
// Q6_K, as llama.cpp).
GgmlType stored_type_for(GgmlType want, const std::vector<int64_t>& shape);
// llama.cpp's general.file_type (enum llama_ftype) of a file whose matrices are `t`:
// 0 ALL_F32, 1 MOSTLY_F16, 2 MOSTLY_Q4_0, 7 MOSTLY_Q8_0, 14 MOSTLY_Q4_K_S, 18 MOSTLY_Q6_K.
uint32_t ggml_file_type(GgmlType t);
// How much precision a type keeps, for the refusal to "re-quantize" to a better type:
// f32 5, f16 4, q8_0 3, Q6_K 2, Q4_K 1, q4_0 0.
int ggml_type_precision(GgmlType t);

}  // namespace atto::io
