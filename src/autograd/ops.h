// atto/autograd/ops.h: differentiable operations on tensors.
//
//   Tensor h = gelu(linear(x, w1, b1));              // x [B, T, C] -> [B, T, F]
//   Tensor y = add(x, linear(h, w2, b2));            // residual
//   Tensor loss = cross_entropy(logits, targets);    // mean over counted tokens
//   backward(loss);
//
// Each op: checks shapes (atto::Error naming the op and the shapes), allocates its output,
// calls one kernel from kernels/kernels.h, and records its backward on the tape when an input
// requires grad (autograd/tape.h). Inputs may be non-contiguous views: ops that need
// contiguous data copy through contiguous(), which is itself differentiable.
//
// Broadcasting (add, sub, mul, div) follows NumPy: shapes are aligned on the right, and a
// dimension of 1 (or a missing one) stretches. The gradient of a broadcast input is summed
// over the stretched dimensions.
//
// Integer inputs (token ids, targets) are std::vector<int32_t> in row-major order with the
// shape given alongside; they never need gradients.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/tape.h"
#include "tensor/rng.h"
#include "tensor/tensor.h"

namespace atto {

// ============================================================================================
// Views and copies (outputs share storage with the input where the layout allows)
// ============================================================================================
Tensor reshape(const Tensor& x, Shape shape);  // one entry may be -1; copies if x is not contiguous
Tensor transpose(const Tensor& x, int dim0, int dim1);
Tensor permute(const Tensor& x, const std::vector<int>& dims);
Tensor slice(const Tensor& x, int dim, int64_t start, int64_t end);  // [start, end)
Tensor contiguous(const Tensor& x);  // x itself if contiguous, else a differentiable copy
Tensor concat(const std::vector<Tensor>& xs, int dim);

// ============================================================================================
// Elementwise
// ============================================================================================
Tensor add(const Tensor& a, const Tensor& b);  // broadcasting
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& x, float s);       // x * s
Tensor add_scalar(const Tensor& x, float s);  // x + s
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor relu(const Tensor& x);
enum class GeluApprox { Tanh, Erf };
Tensor gelu(const Tensor& x, GeluApprox approx = GeluApprox::Tanh);
Tensor silu(const Tensor& x);
Tensor swiglu(const Tensor& gate, const Tensor& up);  // silu(gate) * up, same shapes
// Inverted dropout; identity when !training or p == 0. p in [0, 1). The mask comes from one
// draw of rng (a seed), so it is reproducible and independent of the thread count. Element i's
// mask bit is that of element first + i of a larger tensor drawn with the same seed (a
// data-parallel shard takes its rows' part of the whole batch's mask).
Tensor dropout(const Tensor& x, float p, bool training, Rng& rng, int64_t first = 0);

// ============================================================================================
// Reductions
// ============================================================================================
Tensor sum(const Tensor& x);  // all elements -> []
Tensor sum(const Tensor& x, int dim, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, int dim, bool keepdim = false);

// ============================================================================================
// Linear algebra
// ============================================================================================
// a [..., M, K] @ b [..., K, N] -> [..., M, N]; the batch dims of a and b must be equal, or b
// is 2-D and shared by every batch.
Tensor matmul(const Tensor& a, const Tensor& b);
// x [..., C] @ weight[OC, C]^T + bias[OC] -> [..., OC]; bias may be undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// gelu(linear(x, weight, bias), GeluApprox::Erf) as one op, the same bits: GELU runs on each
// block of the GEMM's output while it is in cache, and the backward keeps GELU's slope instead
// of the pre-activation (a feed-forward's first layer; kernels::linear_gelu_forward).
Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// add(residual, linear(x, weight, bias)) as one op, the same bits: a residual connection after a
// projection, added while the GEMM's output block is in registers (kernels::
// linear_residual_forward); residual has the output's shape.
Tensor linear_residual(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual);

// ============================================================================================
// Transformer ops
// ============================================================================================
// weight [V, C], ids in [0, V) with shape ids_shape -> [ids_shape..., C]
Tensor embedding(const Tensor& weight, const std::vector<int32_t>& ids, const Shape& ids_shape);
// Over the last dimension. bias may be undefined.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps = 1e-5f);
Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps = 1e-5f);
Tensor softmax(const Tensor& x);  // over the last dimension

struct AttentionOptions {
  int64_t n_heads = 1;
  bool causal = false;
  // Key padding mask, [B, Tk] row-major, 1 = attend, 0 = padding; empty = no mask.
  std::vector<uint8_t> key_mask;
  float scale = 0.0f;  // 0 = 1/sqrt(head size)
};
// q [B, Tq, C], k [B, Tk, C], v [B, Tk, C] -> [B, Tq, C], C = n_heads * head size, heads
// split along C. Fused (kernels::attention_forward): the Tq x Tk scores are never stored.
// q, k, v may be column slices of one fused QKV tensor (no copy is made for them).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opt);
// Self-attention from one fused projection qkv [B, T, 3C] (q, k, v are its column blocks).
// Reads and writes gradients in place: no split copies.
Tensor attention_qkv(const Tensor& qkv, const AttentionOptions& opt);
// Cross-attention from q [B, Tq, C] and a fused kv [B, Tk, 2C] (k, v its column blocks).
Tensor attention_q_kv(const Tensor& q, const Tensor& kv, const AttentionOptions& opt);
// Inference with a KV cache (not differentiable). qkv [B, Tn, 3C] holds the projections of Tn
// new positions; kv_cache [B, max_len, 2C] holds the keys and values of past_len earlier ones.
// Appends the new keys and values at [past_len, past_len + Tn) and returns the attention of
// the new queries over all past_len + Tn positions ([B, Tn, C]); causal is bottom-right aligned.
Tensor attention_decode(const Tensor& qkv, Tensor& kv_cache, int64_t past_len, const AttentionOptions& opt);
// Rotary position embeddings on the Q and K blocks of qkv [B, T, 3C] (V passes unchanged): the
// positions are offset, offset + 1, ... (a KV cache's length when decoding). kernels::rope_forward.
Tensor rope_qkv(const Tensor& qkv, int64_t n_heads, int64_t offset, float base = 10000.0f);
// Grouped-query attention's projections qkv [B, T, C + 2 KV] (queries, n_kv_heads key heads,
// n_kv_heads value heads; KV = n_kv_heads * head size) widened to [B, T, 3C]: query head h gets
// key and value head h / (n_heads / n_kv_heads), as Hugging Face's repeat_kv and llama.cpp's
// broadcast. The backward sums each group's gradients into its key and value head.
Tensor expand_kv_heads(const Tensor& qkv, int64_t n_heads, int64_t n_kv_heads);
// The attention weights [B, n_heads, Tq, Tk] of the same computation (not differentiable).
Tensor attention_weights(const Tensor& q, const Tensor& k, const AttentionOptions& opt);

struct CrossEntropyOptions {
  int32_t ignore_index = -1;
  float label_smoothing = 0.0f;
  enum class Reduction { Mean, Sum } reduction = Reduction::Mean;
};
// logits [..., V], targets (one per row, row-major) -> [] : mean (or sum) over the targets
// that are not ignore_index. With no counted target the loss is 0 and has zero gradient.
Tensor cross_entropy(const Tensor& logits, const std::vector<int32_t>& targets, const CrossEntropyOptions& opt = {});
// cross_entropy(linear(x, weight, bias), targets, opt) without the [N, V] logits in memory: the
// rows go through the head in chunks of chunk_elems / V rows (0: kHeadChunkElems), each chunk's
// logits, loss and gradient computed before the next, so a 50,257-way head over 4 x 1024 tokens
// holds 2 x 64 MB, not 2 x 823 MB. The input's and the weight's gradients are computed in the
// forward (at a seed of 1) and scaled by the seed in the backward. Equal to the unfused ops up
// to rounding (the weight's gradient sums the chunks in order); the same bits for any thread
// count; fp32 and bf16 (under a PrecisionScope, as linear's GEMMs).
inline constexpr int64_t kHeadChunkElems = int64_t{1} << 24;
Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& bias,
                            const std::vector<int32_t>& targets, const CrossEntropyOptions& opt = {},
                            int64_t chunk_elems = 0);
// Number of targets that are not ignore_index (the denominator of the mean).
int64_t count_targets(const std::vector<int32_t>& targets, int32_t ignore_index = -1);

}  // namespace atto
