// atto/nn/blocks.h: the position-wise feed-forward network and the transformer blocks.
//
//   nn::BlockConfig cfg{.d_model = 64, .n_heads = 4, .d_ff = 256};
//   nn::EncoderBlock block(cfg, rng);              // also the GPT block (with a causal mask)
//   Tensor y = block.forward(x, {.causal = true});
//   nn::DecoderBlock dec(cfg, rng);
//   Tensor z = dec.forward(y, memory, {.causal = true, .key_mask = tgt_pad}, {.key_mask = src_pad});
//
// Pre-norm (GPT-2, nanoGPT):  x = x + Attn(LN1(x));  x = x + FFN(LN2(x))
// Post-norm (the 2017 paper): x = LN1(x + Attn(x));  x = LN2(x + FFN(x))
// The decoder block adds cross-attention between the two (LN "ln_2", cross_attn), and its
// FFN norm is "ln_3". Parameter names: ln_1, attn, ln_2, mlp (+ cross_attn, ln_3).
//
// FFN: mlp.c_proj(act(mlp.c_fc(x))); for SwiGLU, c_proj(silu(c_fc(x)) * c_fc2(x)), where
// c_fc is the gated branch and c_fc2 the linear one (both [d_ff, C]).
#pragma once

#include <memory>

#include "nn/attention.h"

namespace atto::nn {

enum class Activation { ReLU, GELU, GELUTanh, SwiGLU };  // GELU = exact erf, as torch.nn.GELU()

struct FeedForwardConfig {
  int64_t d_model = 64;
  int64_t d_ff = 256;
  Activation activation = Activation::GELU;
  bool bias = true;
  float dropout = 0.0f;
};

class FeedForward : public Module {
 public:
  FeedForward(const FeedForwardConfig& cfg, Rng& rng);
  // With a residual (x's shape), residual + the network's output, the add fused into c_proj.
  Tensor forward(const Tensor& x, const Tensor& residual = Tensor());
  Linear c_fc;
  std::unique_ptr<Linear> c_fc2;  // SwiGLU only
  Linear c_proj;
  Dropout dropout;

 private:
  Activation act_;
};

struct BlockConfig {
  int64_t d_model = 64;
  int64_t n_heads = 4;
  int64_t d_ff = 256;
  Activation activation = Activation::GELU;
  NormKind norm = NormKind::LayerNorm;
  bool pre_norm = true;
  bool bias = true;
  float dropout = 0.0f;
  float norm_eps = 1e-5f;
};

// What a block adds to the residual stream, for inspection (detached [B, T, C] tensors).
struct BlockTrace {
  Tensor input;        // the residual stream entering the block
  Tensor attn_update;  // what self-attention adds (before any post-norm)
  Tensor cross_update; // what cross-attention adds (decoder blocks only)
  Tensor ffn_update;   // what the FFN adds
  Tensor attn_weights;   // [B, NH, T, T] self-attention weights
  Tensor cross_weights;  // [B, NH, T, S] cross-attention weights (decoder blocks only)
};

// Self-attention + FFN: the encoder block, and the GPT block when the mask is causal.
class EncoderBlock : public Module {
 public:
  EncoderBlock(const BlockConfig& cfg, Rng& rng);
  Tensor forward(const Tensor& x, const AttentionMask& mask, BlockTrace* trace = nullptr);
  // Inference with a causal KV cache (GPT decoding); see SelfAttention::forward_cached.
  Tensor forward_cached(const Tensor& x, KVCache& cache);
  Norm ln_1;
  SelfAttention attn;
  Norm ln_2;
  FeedForward mlp;

 private:
  bool pre_norm_;
};

// Masked self-attention + cross-attention over the encoder output + FFN.
class DecoderBlock : public Module {
 public:
  DecoderBlock(const BlockConfig& cfg, Rng& rng);
  Tensor forward(const Tensor& x, const Tensor& memory, const AttentionMask& self_mask,
                 const AttentionMask& memory_mask, BlockTrace* trace = nullptr);
  // Inference: the next positions x given the self-attention cache and the memory's
  // precomputed keys/values (cross_attn.memory_kv(memory)).
  Tensor forward_cached(const Tensor& x, KVCache& cache, const Tensor& memory_kv, const AttentionMask& memory_mask);
  Norm ln_1;
  SelfAttention attn;
  Norm ln_2;
  CrossAttention cross_attn;
  Norm ln_3;
  FeedForward mlp;

 private:
  bool pre_norm_;
};

AttentionConfig attention_config(const BlockConfig& cfg);
FeedForwardConfig feed_forward_config(const BlockConfig& cfg);

}  // namespace atto::nn
