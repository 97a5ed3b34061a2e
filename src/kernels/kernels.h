// atto/kernels/kernels.h: the compute kernels, forward and backward side by side.
//
//   // out[N, OC] = inp[N, C] @ weight[OC, C]^T + bias[OC]
//   atto::kernels::linear_forward(out, inp, weight, bias, N, C, OC);
//   atto::kernels::linear_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
//
// Conventions (llm.c style)
// - Plain functions on raw float pointers and sizes. No Tensor, no tape, no model here.
// - Argument order: outputs first, then buffers saved by forward, then inputs, weights, dims.
// - All arrays are dense row-major unless a leading dimension (ld*) is given.
// - Backward functions ACCUMULATE into their gradient outputs (+=). A gradient output that is
//   nullptr is not wanted and is skipped.
// - The kernels whose fast forms are blocked, tiled or fused (GEMM, bf16 GEMM, linear, LayerNorm,
//   RMSNorm, attention, cross-entropy) have a *_naive twin with the same signature: the plain
//   loops of the equations, single-threaded, the reference in tests. The others (activations,
//   softmax, rotary positions, embedding, optimiser steps) are tested against their formulas,
//   evaluated in double precision where they compute.
// - Multi-threaded with OpenMP. Results are bit-identical for any thread count: work is split
//   over independent outputs, and reductions run over fixed chunks combined in a fixed order.
// - Dimension letters: N rows (B*T), C channels, OC output channels, V vocabulary,
//   B batch, T time, NH heads, HS head size, Tq query length, Tk key length.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "base/memory.h"
#include "kernels/isa.h"

namespace atto::kernels {

// ============================================================================================
// Threads
// ============================================================================================
// Sets the thread count of both OpenMP and OpenBLAS. n <= 0 means "all cores".
void set_num_threads(int n);
int num_threads();
// The thread count of the kernels the calling thread runs, for a scope: OpenMP's nthreads-var
// is per thread, so other threads (other library handles) keep theirs, and the caller's count is
// restored at the end. n <= 0 means "all cores". The library API uses it for per-handle counts.
class ThreadScope {
 public:
  explicit ThreadScope(int n);
  ~ThreadScope();
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int previous_;
};
// Runs fn(s) for every s in [0, shards), the shards spread over up to num_threads() threads
// (shard s on thread s mod threads); within a shard, kernels use num_threads() / shards
// threads (at least 1). Independent work that shares nothing writable: data-parallel shards of
// a training batch. Each shard's exception is kept; the first (lowest s) is rethrown after all
// shards have ended.
void run_shards(int shards, const std::function<void(int)>& fn);
// The cores' fp32 multiply-add ceiling: each of num_threads() threads, all at once, runs
// independent 16-lane FMAs on registers for `seconds` (> 0); returns each thread's GFLOP/s
// (2 FLOP per lane). No kernel can pass their sum; the blocked GEMM comes within a few percent.
// The threads' figures differ where a machine's cores (vCPUs) do not run at the same speed.
ATTO_ISA_BEGIN
std::vector<double> fma_peak_gflops(double seconds);
ATTO_ISA_END

// ============================================================================================
// GEMM
// ============================================================================================
// C[M, N] = alpha * op(A) @ op(B) + beta * C, row-major, op(X) = X^T when transX.
// A is [M, K] (or [K, M] if transA) with leading dimension lda; likewise B and C.
// beta == 0 means C is overwritten (its old contents, even NaN, are ignored).
// Cache-sized products run atto's register-blocked AVX-512 kernel (one in-order FMA chain per
// element); large ones run OpenBLAS on tiles of C fixed by (M, N, K), one single-threaded call
// per tile (OpenBLAS's own threading is not bit-reproducible across thread counts for some K).
ATTO_ISA_BEGIN
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
void gemm_naive(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// `batch` independent GEMMs; matrix i of X starts at X + i * strideX.
void gemm_batched(int64_t batch, bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                  int64_t lda, int64_t strideA, const float* B, int64_t ldb, int64_t strideB, float beta, float* C,
                  int64_t ldc, int64_t strideC);
ATTO_ISA_END

// ============================================================================================
// bf16 mixed precision (as torch.autocast(dtype=bfloat16)): GEMMs take bf16 inputs, sum in fp32
// ============================================================================================
// Under a PrecisionScope(Precision::BF16) every GEMM of the calling thread (gemm, gemm_batched,
// the linear layers forward and backward) rounds its two inputs to bf16 (round to nearest even;
// fp32 denormals become signed zeros, as the hardware reads them) and multiplies them on the
// bf16 units, summing in fp32; its output stays fp32. Everything else (softmax, norms,
// cross-entropy, the optimizer) is fp32 as before. run_shards passes the caller's scope on to
// its shards' threads.
//
// Kernels, chosen once at run time (one binary for every x86-64 CPU):
//   Amx         AMX tiles (tdpbf16ps, 16 x 16 x 32 per instruction), after Linux grants the
//               process the tile state (arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA)): Xeon 4th gen+
//   Avx512Bf16  vdpbf16ps on 16-lane registers: AMD Zen 4, Xeon 3rd gen (Cooper Lake)
//   None        neither: bf16 is refused with an error naming the CPU's missing features
// $ATTO_BF16_KERNEL=amx|avx512bf16 picks one (an error when this CPU cannot run it).
// Within a backend every output is one fixed chain over K, so results are bit-identical for any
// thread count and any row count (a row's outputs never depend on the rows beside it).
enum class Precision { F32, BF16 };
enum class Bf16Backend { None, Avx512Bf16, Amx };
Bf16Backend bf16_backend();                    // the backend bf16 GEMMs use on this machine
const char* bf16_backend_name(Bf16Backend b);  // "amx", "avx512bf16", "none"
bool bf16_supported(Bf16Backend b);            // whether this CPU (and kernel) can run b
// Uses b from now on (tests and benchmarks compare backends); throws std::runtime_error when
// !bf16_supported(b). Returns the previous backend.
Bf16Backend set_bf16_backend(Bf16Backend b);
// Throws std::runtime_error saying what the CPU lacks when bf16 cannot run here; `what` names
// the caller's option (e.g. "--precision bf16").
void require_bf16(const char* what);
const char* precision_name(Precision p);
// What runs the products, for a header line: "fp32", or "bf16 (amx)" naming the backend.
std::string precision_label(Precision p);

// Memory on 64-byte (cache-line) boundaries, for std::vector (alloc_buffer: large ones on
// transparent huge pages): the kernels' scratch and packed operands live in it. malloc aligns to 16 bytes only, and a 64-byte load (an AVX-512 vector,
// an AMX tile row) that straddles two cache lines costs two: on an Emerald Rapids Xeon, AMX
// products on 16-byte-aligned operands ran at a third of their speed on aligned ones.
template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    if (n > static_cast<size_t>(-1) / sizeof(T)) throw std::bad_alloc();
    void* p = alloc_buffer(n * sizeof(T));  // base/memory.h
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) noexcept { std::free(p); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept {
    return true;
  }
};
template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;
using Bf16Buffer = AlignedVector<uint16_t>;

// The packed form of B[K, N] for the bf16 kernels: K pairs interleaved (VNNI), 16 columns per
// block, K padded to 32 and N to 32 with zeros. data holds round_up(N, 32) * round_up(K, 32).
struct PackedBf16 {
  int64_t K = 0, N = 0, Kp = 0, Np = 0;
  Bf16Buffer data;
};
// Weight copies in bf16, packed for the kernels, kept while a cache is in scope: a training step
// (the weights change only between steps) or a whole generation (they never change). Without a
// cache every GEMM converts its weights on each call. Thread-safe; shared by a step's shards.
class Bf16WeightCache {
 public:
  Bf16WeightCache();
  ~Bf16WeightCache();
  Bf16WeightCache(const Bf16WeightCache&) = delete;
  Bf16WeightCache& operator=(const Bf16WeightCache&) = delete;
  Bf16WeightCache(Bf16WeightCache&&) noexcept;
  Bf16WeightCache& operator=(Bf16WeightCache&&) noexcept;
  // The packed op(W) of the weight at w (pack_bf16's arguments), packed on its first request.
  const PackedBf16& get(bool trans, int64_t K, int64_t N, const float* w, int64_t ld);
  void clear();  // forget every copy (the weights changed)
  // Packs again, all threads on it, the copies of the weights that lie in data[0, n) (which must
  // still be where they were): a parameter the optimizer just changed (optim::step_and_refresh,
  // right after its update, before the next step's shards read it). Others are left as they are.
  void refresh(const float* data, int64_t n);
  bool empty() const;
  size_t bytes() const;  // bf16 bytes held

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
// Precision p (and, if not nullptr, the weight cache) for the calling thread, for a scope; nests.
// BF16 calls require_bf16 first.
class PrecisionScope {
 public:
  explicit PrecisionScope(Precision p, Bf16WeightCache* cache = nullptr);
  ~PrecisionScope();
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  Precision previous_;
  Bf16WeightCache* previous_cache_;
};
Precision current_precision();
Bf16WeightCache* current_weight_cache();  // the calling thread's, or nullptr

ATTO_ISA_BEGIN
// Packs op(B) (B is [K, N], or [N, K] when transB), rounding each element to bf16.
void pack_bf16(PackedBf16& out, bool transB, int64_t K, int64_t N, const float* B, int64_t ldb);
// C[M, N] = alpha * op(A) @ B + beta * C, op(A)[M, K] rounded to bf16; beta == 0 overwrites.
void gemm_bf16_packed(bool transA, int64_t M, float alpha, const float* A, int64_t lda, const PackedBf16& B, float beta,
                      float* C, int64_t ldc);
// gemm with both inputs rounded to bf16 (what gemm does under a BF16 PrecisionScope).
void gemm_bf16(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
// The reference: both inputs rounded by to_bf16, products and sums in double, one rounding.
void gemm_bf16_naive(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                     int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
uint16_t to_bf16(float x);    // round to nearest even; NaN stays NaN; denormals -> signed zero
float from_bf16(uint16_t b);  // exact
// The cores' bf16 multiply-add ceiling on the current backend (as fma_peak_gflops for fp32):
// each of num_threads() threads runs independent bf16 dot products on registers (AMX tiles or
// vdpbf16ps) for `seconds`; returns each thread's GFLOP/s.
std::vector<double> bf16_peak_gflops(double seconds);
ATTO_ISA_END

// ============================================================================================
// Linear: out[N, OC] = inp[N, C] @ weight[OC, C]^T + bias[OC]   (bias may be nullptr)
// ============================================================================================
// N <= 8 (decoding: one token per sequence) runs as matrix-vector products that stream the
// weights once; there a row's outputs are the same bits whatever N and the thread count.
// Under a RowStableScope every N takes that path (weights in blocks that stay in cache), so a
// row's outputs never depend on how many rows come with it: a server's decode batch gives each
// sequence the bits it would get alone. linear_gelu_forward and linear_residual_forward too.
class RowStableScope {  // for the calling thread, for a scope; nests
 public:
  RowStableScope();
  ~RowStableScope();
  RowStableScope(const RowStableScope&) = delete;
  RowStableScope& operator=(const RowStableScope&) = delete;

 private:
  bool previous_;
};
bool row_stable_enabled();  // whether the calling thread is in a RowStableScope
ATTO_ISA_BEGIN
void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t N, int64_t C,
                    int64_t OC);
// dinp += dout @ weight;  dweight += dout^T @ inp;  dbias += sum_n dout[n]
void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t N, int64_t C, int64_t OC);
// The same with dinp (dweight) overwritten instead of accumulated into when overwrite_dinp
// (overwrite_dweight): a gradient buffer that is new.
void linear_backward_ex(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, int64_t N, int64_t C, int64_t OC, bool overwrite_dinp,
                        bool overwrite_dweight);
// linear_gelu_forward's backward: linear_backward of dpre = dout * slope (GELU's slope from the
// forward). slope is clobbered: in fp32 it becomes dpre; in bf16 the product is taken as the
// operands are rounded (bf16_pack.cpp) and never stored. Bitwise what gelu_erf_backward_slope
// then linear_backward give.
void linear_gelu_backward(float* dinp, float* dweight, float* dbias, const float* dout, float* slope, const float* inp,
                          const float* weight, int64_t N, int64_t C, int64_t OC, bool overwrite_dinp,
                          bool overwrite_dweight);
// out = GELU_erf(inp @ weight^T + bias) and, when slope is not nullptr, slope = GELU's slope at
// the pre-activation (gelu_erf_forward_slope): a feed-forward's first layer in one pass. On the
// register-blocked GEMM path GELU runs in the epilogue, on each 48 x 64 block while it is in
// L1, so the pre-activation never goes to memory. Bitwise what linear_forward then
// gelu_erf_forward_slope give, in fp32; in bf16 the bias is added in GELU's pass after the GEMM
// (gelu_erf_bias_slope), not before it.
void linear_gelu_forward(float* out, float* slope, const float* inp, const float* weight, const float* bias, int64_t N,
                         int64_t C, int64_t OC);
// out = residual + (inp @ weight^T + bias), residual [N, OC]: a linear layer and the residual
// connection after it in one pass. On the register-blocked GEMM path the residual is added in
// the epilogue, while the block is in registers. Bitwise what linear_forward then add_forward
// give. out must not overlap residual or inp.
void linear_residual_forward(float* out, const float* residual, const float* inp, const float* weight,
                             const float* bias, int64_t N, int64_t C, int64_t OC);
void linear_forward_naive(float* out, const float* inp, const float* weight, const float* bias, int64_t N, int64_t C,
                          int64_t OC);
void linear_backward_naive(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                           const float* weight, int64_t N, int64_t C, int64_t OC);

// ============================================================================================
// Elementwise
// ============================================================================================
// out = a + b (n elements); backward is the identity, done by the caller.
void add_forward(float* out, const float* a, const float* b, int64_t n);
// out[N, C] = inp[N, C] + bias[C];  dbias += sum_n dout[n, :], dinp += dout
void bias_add_forward(float* out, const float* inp, const float* bias, int64_t N, int64_t C);
void bias_add_backward(float* dinp, float* dbias, const float* dout, int64_t N, int64_t C);

void relu_forward(float* out, const float* inp, int64_t n);
void relu_backward(float* dinp, const float* dout, const float* inp, int64_t n);
// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
void gelu_tanh_forward(float* out, const float* inp, int64_t n);
void gelu_tanh_backward(float* dinp, const float* dout, const float* inp, int64_t n);
// GELU, exact: 0.5 x (1 + erf(x / sqrt 2))
void gelu_erf_forward(float* out, const float* inp, int64_t n);
void gelu_erf_backward(float* dinp, const float* dout, const float* inp, int64_t n);
// The same, overwriting dinp instead of adding to it when accumulate is false. Phi(x) is
// recomputed from x (a rational erf: cheaper than reading the saved output back from memory).
void gelu_erf_backward_ex(float* dinp, const float* dout, const float* inp, int64_t n, bool accumulate);
// GELU (erf) keeping its slope, for a backward that only multiplies: out = x Phi(x) and, when
// slope is not nullptr, slope = Phi(x) + x phi(x) = dGELU/dx. out may be inp. The same bits as
// gelu_erf_forward and the factor gelu_erf_backward multiplies dout by.
void gelu_erf_forward_slope(float* out, float* slope, const float* inp, int64_t n);
// The same in place on a rows x cols block with row stride ld (x and slope alike), on the
// calling thread only: a GEMM epilogue's, while the block is in cache.
void gelu_erf_slope_rows(float* x, float* slope, int64_t ld, int64_t rows, int64_t cols);
// x[N, C] = GELU(x + bias) in place (bias per column), keeping the slope as
// gelu_erf_forward_slope does: the bf16 feed-forward's first layer after its GEMM.
void gelu_erf_bias_slope(float* x, float* slope, const float* bias, int64_t N, int64_t C);
// dinp (+)= dout * slope (dinp may be slope: the slope is consumed in place).
void gelu_erf_backward_slope(float* dinp, const float* dout, const float* slope, int64_t n, bool accumulate);
// SiLU: x * sigmoid(x)
void silu_forward(float* out, const float* inp, int64_t n);
void silu_backward(float* dinp, const float* dout, const float* inp, int64_t n);
// SwiGLU: out = silu(gate) * up
void swiglu_forward(float* out, const float* gate, const float* up, int64_t n);
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int64_t n);

// Inverted dropout: out[i] = keep(i) ? inp[i] / (1 - p) : 0, with keep(i) decided by
// counter_uniform(seed, first + i) >= p (tensor/rng.h). The mask is not stored: backward
// recomputes it from the seed. p in [0, 1). `first` is the index of element 0 in a larger
// tensor whose mask this range is part of (a data-parallel shard's rows of a batch).
void dropout_forward(float* out, const float* inp, int64_t n, float p, uint64_t seed, uint64_t first);
void dropout_backward(float* dinp, const float* dout, int64_t n, float p, uint64_t seed, uint64_t first);

// ============================================================================================
// Rotary position embeddings (RoPE) on the Q and K blocks of a fused qkv[B, T, 3C]
// ============================================================================================
// Within each head of HS = C / n_heads columns, the pair (x[2i], x[2i+1]) at position
// p = offset + t is rotated by the angle p * base^(-2i / HS) (llama.cpp's "norm" RoPE, Meta's
// llama): y0 = x0 cos - x1 sin, y1 = x0 sin + x1 cos. V is copied. HS must be even.
// Backward rotates by the opposite angle (adds into dqkv when accumulate); V's gradient passes.
void rope_forward(float* out, const float* qkv, int64_t B, int64_t T, int64_t C, int64_t n_heads, int64_t offset,
                  float base);
void rope_backward(float* dqkv, const float* dout, int64_t B, int64_t T, int64_t C, int64_t n_heads, int64_t offset,
                   float base, bool accumulate);

// ============================================================================================
// Embedding: out[N, C] = weight[ids[n], :]
// ============================================================================================
// ids must be in [0, V) (checked by the caller). Backward scatter-adds into dweight.
void embedding_forward(float* out, const int32_t* ids, const float* weight, int64_t N, int64_t C, int64_t V);
void embedding_backward(float* dweight, const float* dout, const int32_t* ids, int64_t N, int64_t C, int64_t V);

// ============================================================================================
// Normalisation over the last dimension C of inp[N, C]
// ============================================================================================
// LayerNorm: out = (x - mean) * rstd * weight + bias, rstd = 1/sqrt(var + eps), biased var.
// mean[N] and rstd[N] are saved for backward. bias may be nullptr.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                       int64_t N, int64_t C, float eps);
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C);
// RMSNorm: out = x * rstd * weight, rstd = 1/sqrt(mean(x^2) + eps).
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int64_t N, int64_t C, float eps);
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int64_t N, int64_t C);
void layernorm_forward_naive(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                             const float* bias, int64_t N, int64_t C, float eps);
void layernorm_backward_naive(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                              const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C);
void rmsnorm_forward_naive(float* out, float* rstd, const float* inp, const float* weight, int64_t N, int64_t C,
                           float eps);
void rmsnorm_backward_naive(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                            const float* rstd, int64_t N, int64_t C);

// Softmax over the last dimension: out[N, C]. Backward uses the saved output.
void softmax_forward(float* out, const float* inp, int64_t N, int64_t C);
void softmax_backward(float* dinp, const float* dout, const float* out, int64_t N, int64_t C);

// ============================================================================================
// Scaled dot-product attention (fused, tiled over keys with an online softmax)
// ============================================================================================
// Element (b, t, h, d) of q lives at q[(b*Tq + t)*ldq + h*HS + d]; k and v likewise with Tk
// and ldk / ldv; out likewise with Tq and ldo. So q, k, v can be column blocks of one fused
// [B, T, 3C] QKV buffer (ld = 3C), and out is [B, Tq, NH*HS] with heads merged (ldo = NH*HS).
//
// scores[b,h,i,j] = scale * <q[b,i,h,:], k[b,j,h,:]>, masked to -inf where
//   - causal and j > i + (Tk - Tq)      (bottom-right aligned, so decoding with a KV cache,
//                                        Tq = 1, sees every cached key), or
//   - key_mask != nullptr and key_mask[b*Tk + j] == 0   (padding).
// p = softmax_j(scores); out[b,i,h,:] = sum_j p[b,h,i,j] v[b,j,h,:].
// A row with every key masked gives out = 0 and lse = -inf, and no gradient.
// lse[(b*NH + h)*Tq + i] = logsumexp_j scores[b,h,i,j], saved for backward.
// The fast kernel never holds more than one tile of scores per thread.
ATTO_ISA_END
struct AttentionDims {
  int64_t B = 1, NH = 1, Tq = 1, Tk = 1, HS = 1;
  int64_t ldq = 0, ldk = 0, ldv = 0, ldo = 0;  // 0 means NH*HS
  bool causal = false;
  float scale = 0.0f;  // 0 means 1/sqrt(HS)
  // Backward only: false makes attention_backward overwrite dq, dk, dv (every element of their
  // B x T x HS x NH blocks is written) instead of accumulating; dk and dv must not overlap.
  // The naive twin always accumulates.
  bool accumulate = true;
};
ATTO_ISA_BEGIN
void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, const uint8_t* key_mask,
                       const AttentionDims& dims);
// dq, dk, dv use the same layouts (and ld) as q, k, v; they are accumulated into (or
// overwritten: AttentionDims::accumulate).
void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                        const float* q, const float* k, const float* v, const uint8_t* key_mask,
                        const AttentionDims& dims);
void attention_forward_naive(float* out, float* lse, const float* q, const float* k, const float* v,
                             const uint8_t* key_mask, const AttentionDims& dims);
void attention_backward_naive(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                              const float* q, const float* k, const float* v, const uint8_t* key_mask,
                              const AttentionDims& dims);
// The attention weights p, [B, NH, Tq, Tk] (masked entries exactly 0, a fully masked row all
// 0), for inspection.
void attention_probs(float* probs, const float* q, const float* k, const uint8_t* key_mask, const AttentionDims& dims);

// ============================================================================================
// Cross-entropy from logits[N, V] (fused log-softmax + NLL)
// ============================================================================================
// For each row n with targets[n] != ignore_index (targets in [0, V), checked by the caller):
//   losses[n] = (1 - ls) * (-log p[n, t]) + ls * mean_j(-log p[n, j]),  p = softmax(logits[n])
// (PyTorch's label_smoothing: the target distribution is (1-ls)*onehot + ls/V.)
// Ignored rows get losses[n] = 0. lse[n] = logsumexp(logits[n]) is saved for backward.
// Returns the number of counted (not ignored) rows.
int64_t cross_entropy_forward(float* losses, float* lse, const float* logits, const int32_t* targets, int64_t N,
                              int64_t V, int32_t ignore_index, float label_smoothing);
// dlogits[n, :] += dloss[n] * (p[n, :] - q[n, :]) where q is the smoothed target distribution;
// dloss[n] is the gradient of the final loss with respect to losses[n] (e.g. 1/count for a
// mean). Ignored rows get no gradient.
void cross_entropy_backward(float* dlogits, const float* dloss, const float* logits, const float* lse,
                            const int32_t* targets, int64_t N, int64_t V, int32_t ignore_index, float label_smoothing);
int64_t cross_entropy_forward_naive(float* losses, float* lse, const float* logits, const int32_t* targets, int64_t N,
                                    int64_t V, int32_t ignore_index, float label_smoothing);
void cross_entropy_backward_naive(float* dlogits, const float* dloss, const float* logits, const float* lse,
                                  const int32_t* targets, int64_t N, int64_t V, int32_t ignore_index,
                                  float label_smoothing);

ATTO_ISA_END
// Runs f(i, begin, end) over every chunk [begin, end) of `chunk` elements (the last one shorter)
// of each of `count` ranges of n[i] elements, the chunks dealt out over the threads; serial when
// the ranges hold fewer than min_parallel elements in all. A range's chunks are the same whatever
// the thread count, so elementwise work over them is bit-identical for any thread count. One
// parallel region for many small tensors (a model's parameters) instead of one each.
void for_each_chunk(const int64_t* n, size_t count, int64_t chunk, int64_t min_parallel,
                    const std::function<void(size_t, int64_t, int64_t)>& f);
ATTO_ISA_BEGIN

// ============================================================================================
// Optimizer updates (one pass over the parameter)
// ============================================================================================
// AdamW (decoupled weight decay, as torch.optim.AdamW), step t >= 1:
//   param *= 1 - lr*wd;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   param -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
// With wd applied as L2 instead (Adam with weight_decay, as torch.optim.Adam): g += wd*param
// first and no decoupled decay; select with decoupled.
void adam_update(float* param, float* m, float* v, const float* grad, int64_t n, float lr, float beta1, float beta2,
                 float eps, float weight_decay, bool decoupled, int64_t step);
// SGD with momentum as torch.optim.SGD (dampening 0, optional Nesterov):
//   g += wd * param;  buf = momentum * buf + g (buf = g on the first step);  param -= lr * buf
void sgd_update(float* param, float* momentum_buf, const float* grad, int64_t n, float lr, float momentum,
                float weight_decay, bool nesterov, bool first_step);
// adam_update over several tensors in one parallel pass; tensor i has its own lr, weight decay
// and step. Bit-identical to calling adam_update on each in turn, for any thread count.
ATTO_ISA_END
struct AdamTensor {
  float* param;
  float* m;
  float* v;
  const float* grad;
  int64_t n;
  float lr;
  float weight_decay;
  int64_t step;
};
ATTO_ISA_BEGIN
void adam_update_many(const AdamTensor* t, size_t count, float beta1, float beta2, float eps, bool decoupled);
// Sum of squares of x[n], accumulated in double over fixed chunks (deterministic).
double sum_squares(const float* x, int64_t n);
// x *= s
void scale_inplace(float* x, int64_t n, float s);
// out[i] = sum_squares(x[i], n[i]) for every i < count, bit for bit, in one parallel pass.
void sum_squares_many(double* out, const float* const* x, const int64_t* n, size_t count);
// scale_inplace(x[i], n[i], s) for every i < count, in one parallel pass.
void scale_inplace_many(float* const* x, const int64_t* n, size_t count, float s);

// ============================================================================================
// Helpers shared by the kernel files (vectorised; the same result for the same input)
// ============================================================================================
// out[i] = exp(x[i] - shift) for i < n; returns sum_i exp(x[i] - shift) (fixed order).
// out may equal x, or be nullptr when only the sum is wanted.
float exp_shift_sum(float* out, const float* x, int64_t n, float shift);
// sum_i x[i] in a fixed order.
float sum_of(const float* x, int64_t n);
// max_i x[i]; -inf when n == 0.
float max_of(const float* x, int64_t n);

ATTO_ISA_END
}  // namespace atto::kernels

#include "kernels/quant.h"     // the linear layer on quantized weights (q8_0, q4_0, Q4_K)
#include "kernels/dispatch.h"  // in a portable build, the names above call the chosen level's kernels
