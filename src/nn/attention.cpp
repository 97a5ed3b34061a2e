#include "nn/attention.h"

namespace atto::nn {

namespace {
void check_config(const AttentionConfig& cfg) {
  ATTO_CHECK(cfg.n_heads > 0, "attention: n_heads must be positive, got {}", cfg.n_heads);
  ATTO_CHECK(cfg.d_model > 0 && cfg.d_model % cfg.n_heads == 0,
             "attention: d_model ({}) must be a positive multiple of n_heads ({})", cfg.d_model, cfg.n_heads);
  ATTO_CHECK(cfg.n_kv_heads >= 0 && (cfg.n_kv_heads == 0 || cfg.n_heads % cfg.n_kv_heads == 0),
             "attention: n_kv_heads ({}) must divide n_heads ({})", cfg.n_kv_heads, cfg.n_heads);
}
int64_t kv_heads(const AttentionConfig& cfg) { return cfg.n_kv_heads > 0 ? cfg.n_kv_heads : cfg.n_heads; }
// c_attn's output width: queries C, keys and values n_kv_heads * head size each.
int64_t qkv_width(const AttentionConfig& cfg) {
  check_config(cfg);
  return cfg.d_model + 2 * kv_heads(cfg) * (cfg.d_model / cfg.n_heads);
}
AttentionOptions options(int64_t NH, const AttentionMask& m) {
  AttentionOptions o;
  o.n_heads = NH;
  o.causal = m.causal;
  o.key_mask = m.key_mask;
  return o;
}
}  // namespace

SelfAttention::SelfAttention(const AttentionConfig& cfg, Rng& rng)
    : c_attn(cfg.d_model, qkv_width(cfg), cfg.bias, rng),
      c_proj(cfg.d_model, cfg.d_model, cfg.bias, rng),
      resid_dropout(cfg.dropout),
      C_(cfg.d_model),
      NH_(cfg.n_heads),
      NKV_(kv_heads(cfg)),
      rope_(cfg.rope),
      rope_base_(cfg.rope_base) {
  register_module("c_attn", c_attn);
  register_module("c_proj", c_proj);
  register_module("resid_dropout", resid_dropout);
}

Tensor SelfAttention::forward(const Tensor& x, const AttentionMask& mask, const Tensor& residual, KVCaches caches,
                              Tensor* weights) {
  ATTO_CHECK(x.ndim() == 3 && x.size(2) == C_, "SelfAttention: input must be [B, T, {}], got {}", C_,
             shape_str(x.shape()));
  Tensor qkv = widen(c_attn.forward(x));  // [B, T, 3C]
  const AttentionOptions o = options(NH_, mask);
  if (!caches.empty()) {  // inference: no dropout, no weights
    ATTO_CHECK(mask.causal && mask.key_mask.empty() && !weights,
               "SelfAttention: a cached forward is causal, without a key mask or weights");
    const Tensor y = caches.size() == 1 ? attend_cached(qkv, *caches[0], o) : attend_cached_groups(qkv, caches, o);
    return residual.defined() ? c_proj.forward_residual(y, residual) : c_proj.forward(y);
  }
  if (rope_) qkv = rope_qkv(qkv, NH_, 0, rope_base_);
  if (weights) *weights = attention_weights(slice(qkv, 2, 0, C_), slice(qkv, 2, C_, 2 * C_), o);
  Tensor y = attention_qkv(qkv, o);  // [B, T, C]
  return project_residual(c_proj, resid_dropout, y, residual);
}

Tensor SelfAttention::widen(const Tensor& qkv) const { return NKV_ == NH_ ? qkv : expand_kv_heads(qkv, NH_, NKV_); }

Tensor SelfAttention::attend_cached(Tensor qkv, KVCache& cache, const AttentionOptions& o) const {
  if (rope_) qkv = rope_qkv(qkv, NH_, cache.len, rope_base_);  // positions continue the cache
  Tensor y = attention_decode(qkv, cache.kv, cache.len, o);
  cache.len += qkv.size(1);
  return y;
}

Tensor SelfAttention::attend_cached_groups(const Tensor& qkv, KVCaches caches, const AttentionOptions& o) const {
  std::vector<Tensor> ys;
  int64_t r0 = 0;
  for (KVCache* c : caches) {
    const int64_t rows = c->kv.size(0);
    ys.push_back(attend_cached(slice(qkv, 0, r0, r0 + rows).contiguous(), *c, o));
    r0 += rows;
  }
  ATTO_CHECK(r0 == qkv.size(0), "SelfAttention: the caches hold {} sequences, the input {}", r0, qkv.size(0));
  return concat(ys, 0);
}

KVCache SelfAttention::make_cache(int64_t B, int64_t max_len) const {
  return KVCache{Tensor::zeros({B, max_len, 2 * C_}), 0};
}

CrossAttention::CrossAttention(const AttentionConfig& cfg, Rng& rng)
    : q_proj((check_config(cfg), cfg.d_model), cfg.d_model, cfg.bias, rng),
      kv_proj(cfg.d_model, 2 * cfg.d_model, cfg.bias, rng),
      c_proj(cfg.d_model, cfg.d_model, cfg.bias, rng),
      resid_dropout(cfg.dropout),
      C_(cfg.d_model),
      NH_(cfg.n_heads) {
  register_module("q_proj", q_proj);
  register_module("kv_proj", kv_proj);
  register_module("c_proj", c_proj);
  register_module("resid_dropout", resid_dropout);
}

Tensor CrossAttention::forward(const Tensor& x, const Tensor& memory, const AttentionMask& mask, const Tensor& residual,
                               const Tensor* memory_kv, Tensor* weights) {
  ATTO_CHECK(x.ndim() == 3 && x.size(2) == C_, "CrossAttention: x must be [B, Tq, {}], got {}", C_,
             shape_str(x.shape()));
  ATTO_CHECK(memory_kv || (memory.ndim() == 3 && memory.size(2) == C_ && memory.size(0) == x.size(0)),
             "CrossAttention: memory must be [{}, Tk, {}], got {}", x.size(0), C_, shape_str(memory.shape()));
  const Tensor kv = memory_kv ? *memory_kv : this->memory_kv(memory);  // [B, Tk, 2C]
  ATTO_CHECK(kv.ndim() == 3 && kv.size(2) == 2 * C_ && kv.size(0) == x.size(0),
             "CrossAttention: memory keys/values must be [{}, Tk, {}], got {}", x.size(0), 2 * C_,
             shape_str(kv.shape()));
  Tensor q = q_proj.forward(x);  // [B, Tq, C]
  const AttentionOptions o = options(NH_, mask);
  if (weights) *weights = attention_weights(q, slice(kv, 2, 0, C_), o);
  Tensor y = attention_q_kv(q, kv, o);
  return project_residual(c_proj, resid_dropout, y, residual);
}

}  // namespace atto::nn
