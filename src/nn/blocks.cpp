#include "nn/blocks.h"

namespace atto::nn {

AttentionConfig attention_config(const BlockConfig& c) { return {c.d_model, c.n_heads, c.bias, c.dropout}; }
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

Tensor FeedForward::forward(const Tensor& x) {
  Tensor h = c_fc.forward(x);
  switch (act_) {
    case Activation::ReLU: h = relu(h); break;
    case Activation::GELU: h = gelu(h, GeluApprox::Erf); break;
    case Activation::GELUTanh: h = gelu(h, GeluApprox::Tanh); break;
    case Activation::SwiGLU: h = swiglu(h, c_fc2->forward(x)); break;
  }
  return dropout.forward(c_proj.forward(h));
}

EncoderBlock::EncoderBlock(const BlockConfig& cfg, Rng& rng)
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

Tensor EncoderBlock::forward(const Tensor& x, const AttentionMask& mask) {
  if (pre_norm_) {
    Tensor h = add(x, attn.forward(ln_1.forward(x), mask));
    return add(h, mlp.forward(ln_2.forward(h)));
  }
  Tensor h = ln_1.forward(add(x, attn.forward(x, mask)));
  return ln_2.forward(add(h, mlp.forward(h)));
}

Tensor EncoderBlock::forward_cached(const Tensor& x, KVCache& cache) {
  if (pre_norm_) {
    Tensor h = add(x, attn.forward_cached(ln_1.forward(x), cache));
    return add(h, mlp.forward(ln_2.forward(h)));
  }
  Tensor h = ln_1.forward(add(x, attn.forward_cached(x, cache)));
  return ln_2.forward(add(h, mlp.forward(h)));
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
                             const AttentionMask& memory_mask) {
  if (pre_norm_) {
    Tensor h = add(x, attn.forward(ln_1.forward(x), self_mask));
    h = add(h, cross_attn.forward(ln_2.forward(h), memory, memory_mask));
    return add(h, mlp.forward(ln_3.forward(h)));
  }
  Tensor h = ln_1.forward(add(x, attn.forward(x, self_mask)));
  h = ln_2.forward(add(h, cross_attn.forward(h, memory, memory_mask)));
  return ln_3.forward(add(h, mlp.forward(h)));
}

}  // namespace atto::nn
