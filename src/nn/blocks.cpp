#include "nn/blocks.h"

namespace atto::nn {

AttentionConfig attention_config(const BlockConfig& c) {
  return {.d_model = c.d_model,
          .n_heads = c.n_heads,
          .n_kv_heads = c.n_kv_heads,
          .bias = c.bias,
          .dropout = c.dropout,
          .rope = c.rope,
          .rope_base = c.rope_base};
}
FeedForwardConfig feed_forward_config(const BlockConfig& c) {
  return {c.d_model, c.d_ff, c.activation, c.bias, c.dropout};
}

FeedForward::FeedForward(const FeedForwardConfig& cfg, Rng& rng)
    : c_fc(cfg.d_model, cfg.d_ff, cfg.bias, rng),
      c_fc2(cfg.activation == Activation::SwiGLU ? std::make_unique<Linear>(cfg.d_model, cfg.d_ff, cfg.bias, rng)
                                                 : nullptr),
      c_proj(cfg.d_ff, cfg.d_model, cfg.bias, rng),
      dropout(cfg.dropout),
      act_(cfg.activation) {
  register_module("c_fc", c_fc);
  if (c_fc2) register_module("c_fc2", *c_fc2);
  register_module("c_proj", c_proj);
  register_module("dropout", dropout);
}

Tensor FeedForward::forward(const Tensor& x, const Tensor& residual) {
  Tensor h;
  switch (act_) {
    case Activation::ReLU: h = relu(c_fc.forward(x)); break;
    case Activation::GELU:  // one fused op, unless an adapter adds to the pre-activation
      h = c_fc.has_lora() ? gelu(c_fc.forward(x), GeluApprox::Erf) : linear_gelu(x, c_fc.weight, c_fc.bias);
      break;
    case Activation::GELUTanh: h = gelu(c_fc.forward(x), GeluApprox::Tanh); break;
    case Activation::SwiGLU: h = swiglu(c_fc.forward(x), c_fc2->forward(x)); break;
  }
  return project_residual(c_proj, dropout, h, residual);
}

Block::Block(const BlockConfig& cfg, Rng& rng)
    : ln_1(cfg.norm, cfg.d_model, cfg.bias, cfg.norm_eps),
      attn(attention_config(cfg), rng),
      ln_2(cfg.norm, cfg.d_model, cfg.bias, cfg.norm_eps),
      mlp(feed_forward_config(cfg), rng),
      pre_norm_(cfg.pre_norm) {
  register_module("ln_1", ln_1);
  register_module("attn", attn);
  register_module("ln_2", ln_2);
  register_module("mlp", mlp);
}

void BlockRecorder::input(const Tensor& x) {
  out_.emplace_back();
  out_.back().input = x;
}

void BlockRecorder::update(Sublayer sublayer, const Tensor& added, const Tensor& weights) {
  BlockTrace& t = out_.back();
  switch (sublayer) {
    case Sublayer::SelfAttention: t.attn_update = added, t.attn_weights = weights; break;
    case Sublayer::CrossAttention: t.cross_update = added, t.cross_weights = weights; break;
    case Sublayer::FeedForward: t.ffn_update = added; break;
  }
}

namespace {
using Sublayer = BlockObserver::Sublayer;

// One residual sublayer: x + f(norm(x)) (pre-norm) or norm(x + f(x)) (post-norm), bound once
// per block call to the norm placement and the observer, so that a block's forward reads as its
// equations. f(input, residual, weights) returns residual + the sublayer's output (its output
// projection adds the residual: linear_residual), and stores attention weights when asked.
// Observed, the sublayer's output is computed alone, reported, and added here: the same bits.
class Sublayers {
 public:
  Sublayers(bool pre_norm, BlockObserver* observer) : pre_norm_(pre_norm), observer_(observer) {}
  template <typename F>
  Tensor operator()(const Tensor& x, const Norm& norm, Sublayer s, F&& f) const {
    const Tensor in = pre_norm_ ? norm.forward(x) : x;
    Tensor y;
    if (observer_) {
      Tensor w;
      const Tensor out = f(in, Tensor(), s == Sublayer::FeedForward ? nullptr : &w);
      observer_->update(s, out.detach(), w);
      y = add(x, out);
    } else {
      y = f(in, x, nullptr);
    }
    return pre_norm_ ? y : norm.forward(y);
  }

 private:
  bool pre_norm_;
  BlockObserver* observer_;
};

// The parameters a recomputed block reads, for the tape's gradient-ready callbacks (only a
// watching tape needs them).
std::vector<Tensor> watched_parameters(const Module& m) {
  std::vector<Tensor> out;
  if (!tape().watching()) return out;
  for (const auto& p : m.named_parameters()) out.push_back(p.tensor);
  return out;
}

}  // namespace

Tensor Block::forward(const Tensor& x, const AttentionMask& mask, KVCaches caches, BlockObserver* observer) {
  if (!recompute || !caches.empty() || observer != nullptr || !grad_enabled())
    return forward_once(x, mask, caches, observer);
  return atto::recompute([this, mask](const std::vector<Tensor>& in) { return forward_once(in[0], mask, {}, nullptr); },
                         {x}, watched_parameters(*this), rng());
}

Tensor Block::forward_once(const Tensor& x, const AttentionMask& mask, KVCaches caches, BlockObserver* observer) {
  if (observer) observer->input(x.detach());
  const Sublayers residual(pre_norm_, observer);
  const Tensor h = residual(x, ln_1, Sublayer::SelfAttention, [&](const Tensor& a, const Tensor& r, Tensor* w) {
    return attn.forward(a, mask, r, caches, w);
  });
  return residual(h, ln_2, Sublayer::FeedForward,
                  [&](const Tensor& a, const Tensor& r, Tensor*) { return mlp.forward(a, r); });
}

DecoderBlock::DecoderBlock(const BlockConfig& cfg, Rng& rng)
    : ln_1(cfg.norm, cfg.d_model, cfg.bias, cfg.norm_eps),
      attn(attention_config(cfg), rng),
      ln_2(cfg.norm, cfg.d_model, cfg.bias, cfg.norm_eps),
      cross_attn(attention_config(cfg), rng),
      ln_3(cfg.norm, cfg.d_model, cfg.bias, cfg.norm_eps),
      mlp(feed_forward_config(cfg), rng),
      pre_norm_(cfg.pre_norm) {
  register_module("ln_1", ln_1);
  register_module("attn", attn);
  register_module("ln_2", ln_2);
  register_module("cross_attn", cross_attn);
  register_module("ln_3", ln_3);
  register_module("mlp", mlp);
}

Tensor DecoderBlock::forward(const Tensor& x, const Tensor& memory, const AttentionMask& self_mask,
                             const AttentionMask& memory_mask, DecoderCache* cache, BlockObserver* observer) {
  if (!recompute || cache != nullptr || observer != nullptr || !grad_enabled())
    return forward_once(x, memory, self_mask, memory_mask, cache, observer);
  return atto::recompute(
      [this, self_mask, memory_mask](const std::vector<Tensor>& in) {
        return forward_once(in[0], in[1], self_mask, memory_mask, nullptr, nullptr);
      },
      {x, memory}, watched_parameters(*this), rng());
}

Tensor DecoderBlock::forward_once(const Tensor& x, const Tensor& memory, const AttentionMask& self_mask,
                                  const AttentionMask& memory_mask, DecoderCache* cache, BlockObserver* observer) {
  if (observer) observer->input(x.detach());
  KVCache* self_cache[] = {cache ? &cache->self : nullptr};
  const KVCaches self_caches = cache ? KVCaches(self_cache) : KVCaches();
  const Tensor* memory_kv = cache ? &cache->memory_kv : nullptr;
  const Sublayers residual(pre_norm_, observer);
  Tensor h = residual(x, ln_1, Sublayer::SelfAttention, [&](const Tensor& a, const Tensor& r, Tensor* w) {
    return attn.forward(a, self_mask, r, self_caches, w);
  });
  h = residual(h, ln_2, Sublayer::CrossAttention, [&](const Tensor& a, const Tensor& r, Tensor* w) {
    return cross_attn.forward(a, memory, memory_mask, r, memory_kv, w);
  });
  return residual(h, ln_3, Sublayer::FeedForward,
                  [&](const Tensor& a, const Tensor& r, Tensor*) { return mlp.forward(a, r); });
}

DecoderCache DecoderBlock::make_cache(const Tensor& memory, int64_t max_len) {
  return {attn.make_cache(memory.size(0), max_len), cross_attn.memory_kv(memory)};
}

}  // namespace atto::nn
