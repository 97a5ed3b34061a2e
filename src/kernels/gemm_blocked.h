// atto/kernels/gemm_blocked.h: atto's register-blocked GEMM for cache-sized products
// (gemm_blocked.cpp), shared by gemm and the linear layers (gemm.cpp). Internal to the kernels.
#pragma once

#include <cstdint>

#include "kernels/isa.h"

namespace ATTO_KERNELS_NS {

// What happens to a block's sums: C = alpha * acc + beta * C (+ bias[j] when set: a linear forward,
// beta = 0) (+ residual[i, j] when set, last: a residual add after the linear, in the ops' order).
struct Epilogue {
  float alpha = 1.0f, beta = 0.0f;
  const float* bias = nullptr;      // indexed by the column of C
  const float* residual = nullptr;  // laid out as C (same leading dimension), from C's (0, 0)
};

// What gemm_blocked does to each finished block of C (48 x 64 at most, still in L1): nothing,
// or GELU (erf) in place, keeping its slope in `slope` (same layout as C) when that is set.
struct BlockActivation {
  bool gelu = false;
  float* slope = nullptr;
};

// Whether gemm takes the register-blocked path (K <= 2048, M*N*K within the level's bound).
bool use_blocked(int64_t M, int64_t N, int64_t K);

// C[M, N] = epilogue(op(A) op(B)), then the activation; each element one in-order FMA chain over k.
void gemm_blocked(bool transA, bool transB, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                  const float* B, int64_t ldb, float* C, int64_t ldc, const Epilogue& ep,
                  const BlockActivation& act = {});

}  // namespace ATTO_KERNELS_NS
