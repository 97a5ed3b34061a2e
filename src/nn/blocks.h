// atto/nn/blocks.h: the position-wise feed-forward network and the transformer blocks.
//
//   nn::BlockConfig cfg{.d_model = 64, .n_heads = 4, .d_ff = 256};
//   nn::Block block(cfg, rng);                     // the GPT's and the encoder's layer
//   Tensor y = block.forward(x, {.causal = true});
//   nn::DecoderBlock dec(cfg, rng);
//   Tensor z = dec.forward(y, memory, {.causal = true, .key_mask = tgt_pad}, {.key_mask = src_pad});
//
// Pre-norm (GPT-2, nanoGPT):  x = x + Attn(LN1(x));  x = x + FFN(LN2(x))
// Post-norm (the 2017 paper): x = LN1(x + Attn(x));  x = LN2(x + FFN(x))
// The decoder block adds cross-attention between the two (LN "ln_2", cross_attn), and its
// FFN norm is "ln_3". Parameter names: ln_1, attn, ln_2, mlp (+ cross_attn, ln_3).
//
// One forward serves training and decoding (given a cache, the new positions attend over the
// cached ones) and inspection (given a BlockObserver, it is told what each sublayer adds).
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
  bool rope = false;  // rotary position embeddings in the self-attention
  float rope_base = 10000.0f;
  int64_t n_kv_heads = 0;  // self-attention's key/value heads (grouped-query); 0 = n_heads
};

// The blocks of a model whose configuration names these fields (GPT and Seq2Seq): d_ff 0 means
// 4 * d_model (for SwiGLU, the hidden width of each branch).
template <class ModelConfig>
BlockConfig block_config_of(const ModelConfig& m, int64_t d_model, int64_t n_heads) {
  return {.d_model = d_model,
          .n_heads = n_heads,
          .d_ff = m.d_ff > 0 ? m.d_ff : 4 * d_model,
          .activation = m.activation,
          .norm = m.norm,
          .pre_norm = m.pre_norm,
          .bias = m.bias,
          .dropout = m.dropout,
          .rope = m.rope()};
}

// What inspection watches in a block. A block given an observer calls input() with the residual
// stream entering it, then update() for each sublayer in order with what that sublayer adds to the
// stream (before any post-norm) and, for attention, its weights [B, NH, Tq, Tk] (undefined for the
// FFN). All tensors detached. Without an observer the block computes none of this.
class BlockObserver {
 public:
  enum class Sublayer { SelfAttention, CrossAttention, FeedForward };
  virtual ~BlockObserver() = default;
  virtual void input(const Tensor& x) = 0;
  virtual void update(Sublayer sublayer, const Tensor& added, const Tensor& weights) = 0;
};

// What a block adds to the residual stream, for inspection (detached [B, T, C] tensors).
struct BlockTrace {
  Tensor input;          // the residual stream entering the block
  Tensor attn_update;    // what self-attention adds (before any post-norm)
  Tensor cross_update;   // what cross-attention adds (decoder blocks only)
  Tensor ffn_update;     // what the FFN adds
  Tensor attn_weights;   // [B, NH, T, T] self-attention weights
  Tensor cross_weights;  // [B, NH, T, S] cross-attention weights (decoder blocks only)
};

// The observer that keeps one BlockTrace per block it sees, in order.
class BlockRecorder : public BlockObserver {
 public:
  explicit BlockRecorder(std::vector<BlockTrace>& out) : out_(out) { out_.clear(); }
  void input(const Tensor& x) override;
  void update(Sublayer sublayer, const Tensor& added, const Tensor& weights) override;

 private:
  std::vector<BlockTrace>& out_;
};

// A decoder block's decoding state: its self-attention cache and the memory's keys and values
// (cross_attn.memory_kv(memory), computed once per source).
struct DecoderCache {
  KVCache self;
  Tensor memory_kv;
};

// Self-attention + FFN: the GPT's layer (with a causal mask) and the encoder's (with the source's
// padding mask).
class Block : public Module {
 public:
  Block(const BlockConfig& cfg, Rng& rng);
  // With a cache: inference (see SelfAttention::forward).
  Tensor forward(const Tensor& x, const AttentionMask& mask, KVCaches caches = {}, BlockObserver* observer = nullptr);
  Norm ln_1;
  SelfAttention attn;
  Norm ln_2;
  FeedForward mlp;
  // Training keeps only the block's input and recomputes the rest in the backward (autograd's
  // recompute, `atto train --recompute`): the same bits, one more forward of the block.
  bool recompute = false;

 private:
  bool pre_norm_;
  Tensor forward_once(const Tensor& x, const AttentionMask& mask, KVCaches caches, BlockObserver* observer);
};

// Masked self-attention + cross-attention over the encoder output + FFN.
class DecoderBlock : public Module {
 public:
  DecoderBlock(const BlockConfig& cfg, Rng& rng);
  // With a cache: inference, the next positions x (memory is then not read: the cache holds its
  // keys and values).
  Tensor forward(const Tensor& x, const Tensor& memory, const AttentionMask& self_mask,
                 const AttentionMask& memory_mask, DecoderCache* cache = nullptr, BlockObserver* observer = nullptr);
  DecoderCache make_cache(const Tensor& memory, int64_t max_len);
  Norm ln_1;
  SelfAttention attn;
  Norm ln_2;
  CrossAttention cross_attn;
  Norm ln_3;
  FeedForward mlp;
  bool recompute = false;  // as Block's (the inputs kept: x and the memory)

 private:
  bool pre_norm_;
  Tensor forward_once(const Tensor& x, const Tensor& memory, const AttentionMask& self_mask,
                      const AttentionMask& memory_mask, DecoderCache* cache, BlockObserver* observer);
};

AttentionConfig attention_config(const BlockConfig& cfg);
FeedForwardConfig feed_forward_config(const BlockConfig& cfg);

}  // namespace atto::nn
