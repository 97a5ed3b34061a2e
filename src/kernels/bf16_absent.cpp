// atto/kernels/bf16_absent.cpp: the bf16 kernels' entry points where there are none. The bf16
// kernel files (gemm_bf16.cpp, bf16_tiles.cpp, attention_bf16.cpp, attention_bf16_rows.cpp) are
// AVX512_BF16 and AMX code, built on x86-64 only; elsewhere (ARM64) bf16_backend() is always
// None, so these refuse as an x86 CPU without bf16 does (require_bf16's message: use --precision
// fp32). Packing (pack_bf16, bf16_pack.cpp) and the rounding are built everywhere. The rows path
// of bf16 attention is also absent from clang's x86 builds without AVX-512 (ATTO_ATTN_BF16_ROWS,
// attention_impl.h): there its entry points are the ones below and never chosen.
#include <stdexcept>
#include <vector>

#include "kernels/attention_impl.h"
#include "kernels/bf16_impl.h"
#include "kernels/kernels.h"

#if !defined(__x86_64__)
namespace ATTO_KERNELS_NS {

void gemm_bf16_packed(bool transA, int64_t M, float alpha, const float* A, int64_t lda, const PackedBf16& B, float beta,
                      float* C, int64_t ldc) {
  require_bf16("bf16 GEMM");
}

void gemm_bf16(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  require_bf16("bf16 GEMM");
}

std::vector<double> bf16_peak_gflops(double seconds) {
  if (!(seconds > 0.0)) throw std::invalid_argument("bf16_peak_gflops: seconds must be > 0");
  require_bf16("bf16 peak");
  return {};
}

namespace detail {

bool bf16_active() { return current_precision() == Precision::BF16; }  // never: no PrecisionScope(BF16) here

void linear_forward_bf16(float* out, const float* residual, const float* inp, const float* weight, const float* bias,
                         int64_t N, int64_t C, int64_t OC) {
  require_bf16("bf16 linear");
}

void linear_backward_bf16(float* dinp, float beta_inp, float* dweight, float beta_weight, float* dbias,
                          const float* dout, const float* inp, const float* weight, int64_t N, int64_t C, int64_t OC,
                          const float* dout_scale) {
  require_bf16("bf16 linear");
}

}  // namespace detail

namespace attn {

void flash_forward_bf16(float* out, float* lse, const float* q, const float* k, const float* v, const Problem& p) {
  require_bf16("bf16 attention");
}

void flash_backward_bf16(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                         const float* q, const float* k, const float* v, const Problem& p) {
  require_bf16("bf16 attention");
}

}  // namespace attn

}  // namespace ATTO_KERNELS_NS
#endif  // !__x86_64__

#if !ATTO_ATTN_BF16_ROWS
namespace ATTO_KERNELS_NS::attn {

bool rows_bf16_fits(const AttentionDims& d) { return false; }

void rows_forward_bf16(float* out, float* lse, const float* q, const float* k, const float* v, const Problem& p) {
  require_bf16("bf16 attention");
}

void rows_backward_bf16(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                        const float* q, const float* k, const float* v, const Problem& p) {
  require_bf16("bf16 attention");
}

}  // namespace ATTO_KERNELS_NS::attn
#endif  // !ATTO_ATTN_BF16_ROWS
