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

Tensor FeedForward::forward(const Tensor& x, const Tensor& residual) {
  Tensor h;
  switch (act_) {
    case Activation::ReLU: h = relu(c_fc.forward(x)); break;
    case Activation::GELU: h = linear_gelu(x, c_fc.weight, c_fc.bias); break;  // one fused op
    case Activation::GELUTanh: h = gelu(c_fc.forward(x), GeluApprox::Tanh); break;
    case Activation::SwiGLU: h = swiglu(c_fc.forward(x), c_fc2->forward(x)); break;
  }
  return project_residual(c_proj, dropout, h, residual);
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

namespace {
// Runs f with the attention module keeping its weights when a trace is wanted.
template <typename Attn, typename F>
Tensor with_weights(Attn& a, bool on, Tensor* weights, F&& f) {
  a.keep_weights = on;
  Tensor y = f();
  if (on) {
    *weights = a.last_weights;
    a.keep_weights = false;
    a.last_weights = Tensor();
  }
  return y;
}

// residual + a sublayer's output. run(residual) adds it inside the sublayer's output projection
// (project_residual); traced (on), run(Tensor()) gives the output alone, kept in *update, and the
// add is separate. The same bits either way.
template <typename F>
Tensor residual_sublayer(bool on, const Tensor& residual, Tensor* update, F&& run) {
  if (!on) return run(residual);
  const Tensor y = run(Tensor());
  *update = y.detach();
  return add(residual, y);
}
}  // namespace

Tensor EncoderBlock::forward(const Tensor& x, const AttentionMask& mask, BlockTrace* trace) {
  const bool on = trace != nullptr;
  BlockTrace local;
  BlockTrace& t = on ? *trace : local;
  if (on) t.input = x.detach();
  const Tensor xa = pre_norm_ ? ln_1.forward(x) : x;
  Tensor h = residual_sublayer(on, x, &t.attn_update, [&](const Tensor& r) {
    return with_weights(attn, on, &t.attn_weights, [&] { return attn.forward(xa, mask, r); });
  });
  if (!pre_norm_) h = ln_1.forward(h);
  const Tensor xf = pre_norm_ ? ln_2.forward(h) : h;
  const Tensor y = residual_sublayer(on, h, &t.ffn_update, [&](const Tensor& r) { return mlp.forward(xf, r); });
  return pre_norm_ ? y : ln_2.forward(y);
}

Tensor EncoderBlock::forward_cached(const Tensor& x, KVCache& cache) {
  if (pre_norm_) {
    const Tensor h = attn.forward_cached(ln_1.forward(x), cache, x);
    return mlp.forward(ln_2.forward(h), h);
  }
  const Tensor h = ln_1.forward(attn.forward_cached(x, cache, x));
  return ln_2.forward(mlp.forward(h, h));
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
                             const AttentionMask& memory_mask, BlockTrace* trace) {
  const bool on = trace != nullptr;
  BlockTrace local;
  BlockTrace& t = on ? *trace : local;
  if (on) t.input = x.detach();
  const Tensor xa = pre_norm_ ? ln_1.forward(x) : x;
  Tensor h = residual_sublayer(on, x, &t.attn_update, [&](const Tensor& r) {
    return with_weights(attn, on, &t.attn_weights, [&] { return attn.forward(xa, self_mask, r); });
  });
  if (!pre_norm_) h = ln_1.forward(h);
  const Tensor hc = pre_norm_ ? ln_2.forward(h) : h;
  h = residual_sublayer(on, h, &t.cross_update, [&](const Tensor& r) {
    return with_weights(cross_attn, on, &t.cross_weights, [&] { return cross_attn.forward(hc, memory, memory_mask, r); });
  });
  if (!pre_norm_) h = ln_2.forward(h);
  const Tensor xf = pre_norm_ ? ln_3.forward(h) : h;
  const Tensor y = residual_sublayer(on, h, &t.ffn_update, [&](const Tensor& r) { return mlp.forward(xf, r); });
  return pre_norm_ ? y : ln_3.forward(y);
}

Tensor DecoderBlock::forward_cached(const Tensor& x, KVCache& cache, const Tensor& memory_kv,
                                    const AttentionMask& memory_mask) {
  if (pre_norm_) {
    Tensor h = attn.forward_cached(ln_1.forward(x), cache, x);
    h = cross_attn.forward_kv(ln_2.forward(h), memory_kv, memory_mask, h);
    return mlp.forward(ln_3.forward(h), h);
  }
  Tensor h = ln_1.forward(attn.forward_cached(x, cache, x));
  h = ln_2.forward(cross_attn.forward_kv(h, memory_kv, memory_mask, h));
  return ln_3.forward(mlp.forward(h, h));
}

}  // namespace atto::nn
