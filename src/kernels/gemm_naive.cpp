// atto/kernels/gemm_naive.cpp: the GEMM and linear layers' naive twins, the references of their
// tests: the plain loops of the equations, single-threaded.
#include "kernels/kernels.h"

namespace ATTO_KERNELS_NS {

void gemm_naive(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; i++) {
    for (int64_t j = 0; j < N; j++) {
      float sum = 0.0f;
      for (int64_t k = 0; k < K; k++) {
        const float a = transA ? A[k * lda + i] : A[i * lda + k];
        const float b = transB ? B[j * ldb + k] : B[k * ldb + j];
        sum += a * b;
      }
      float& c = C[i * ldc + j];
      c = beta == 0.0f ? alpha * sum : alpha * sum + beta * c;
    }
  }
}

void linear_forward_naive(float* out, const float* inp, const float* weight, const float* bias, int64_t N, int64_t C,
                          int64_t OC) {
  for (int64_t n = 0; n < N; n++) {
    for (int64_t o = 0; o < OC; o++) {
      float sum = bias != nullptr ? bias[o] : 0.0f;
      for (int64_t c = 0; c < C; c++) sum += inp[n * C + c] * weight[o * C + c];
      out[n * OC + o] = sum;
    }
  }
}

void linear_backward_naive(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                           const float* weight, int64_t N, int64_t C, int64_t OC) {
  for (int64_t n = 0; n < N; n++) {
    for (int64_t o = 0; o < OC; o++) {
      const float d = dout[n * OC + o];
      if (dbias != nullptr) dbias[o] += d;
      for (int64_t c = 0; c < C; c++) {
        if (dinp != nullptr) dinp[n * C + c] += d * weight[o * C + c];
        if (dweight != nullptr) dweight[o * C + c] += d * inp[n * C + c];
      }
    }
  }
}

void gemm_bf16_naive(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                     int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; i++) {
    for (int64_t j = 0; j < N; j++) {
      double sum = 0.0;
      for (int64_t k = 0; k < K; k++) {
        const float a = from_bf16(to_bf16(transA ? A[k * lda + i] : A[i * lda + k]));
        const float b = from_bf16(to_bf16(transB ? B[j * ldb + k] : B[k * ldb + j]));
        sum += static_cast<double>(a) * static_cast<double>(b);
      }
      float& c = C[i * ldc + j];
      c = beta == 0.0f ? alpha * static_cast<float>(sum) : alpha * static_cast<float>(sum) + beta * c;
    }
  }
}

}  // namespace atto::kernels
