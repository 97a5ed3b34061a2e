#include "models/gpt.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "kernels/kernels.h"

namespace atto {

void GPTConfig::validate() const {
  ATTO_CHECK(vocab_size > 0, "GPT config: vocab_size must be positive, got {}", vocab_size);
  ATTO_CHECK(block_size > 0 && block_size <= kMaxPositions,
             "GPT config: block_size must be in [1, {}] (atto's limit on positions), got {}", kMaxPositions,
             block_size);
  ATTO_CHECK(n_layers > 0, "GPT config: n_layers must be at least 1, got {}", n_layers);
  ATTO_CHECK(n_heads > 0, "GPT config: n_heads must be positive, got {}", n_heads);
  ATTO_CHECK(d_model > 0 && d_model % n_heads == 0,
             "GPT config: d_model ({}) must be a positive multiple of n_heads ({})", d_model, n_heads);
  ATTO_CHECK(n_kv_heads >= 0 && n_kv_heads <= n_heads && (n_kv_heads == 0 || n_heads % n_kv_heads == 0),
             "GPT config: n_kv_heads ({}) must divide n_heads ({}); 0 = n_heads", n_kv_heads, n_heads);
  ATTO_CHECK(std::isfinite(rope_base) && rope_base > 1.0f, "GPT config: rope_base must be a number above 1, got {}",
             rope_base);
  ATTO_CHECK(d_ff >= 0, "GPT config: d_ff must be >= 0 (0 = 4 * d_model), got {}", d_ff);
  ATTO_CHECK(dropout >= 0.0f && dropout < 1.0f, "GPT config: dropout {} is outside [0, 1)", dropout);
  ATTO_CHECK(pos != PosKind::Rope || (d_model / n_heads) % 2 == 0,
             "GPT config: rotary positions need an even head size, got d_model / n_heads = {} / {}", d_model, n_heads);
  ATTO_CHECK(lora_rank >= 0 && lora_rank <= d_model,
             "GPT config: lora_rank must be in [0, d_model = {}] (0: no adapters), got {}", d_model, lora_rank);
  ATTO_CHECK(std::isfinite(lora_alpha) && lora_alpha >= 0.0f,
             "GPT config: lora_alpha must be >= 0 (0: the rank), got {}", lora_alpha);
  if (lora_rank > 0) (void)lora_layer_names();  // checks lora_targets
}

std::vector<std::string> GPTConfig::lora_layer_names() const {
  static const std::pair<const char*, const char*> kTargets[] = {
      {"qkv", "attn.c_attn"}, {"proj", "attn.c_proj"}, {"fc", "mlp.c_fc"}, {"fc2", "mlp.c_proj"}};
  std::vector<std::string> names;
  size_t pos = 0;
  while (pos <= lora_targets.size()) {
    size_t end = lora_targets.find(',', pos);
    if (end == std::string::npos) end = lora_targets.size();
    const std::string t = lora_targets.substr(pos, end - pos);
    pos = end + 1;
    const auto* it =
        std::find_if(std::begin(kTargets), std::end(kTargets), [&](const auto& k) { return t == k.first; });
    ATTO_CHECK(it != std::end(kTargets),
               "GPT config: lora_targets \"{}\": \"{}\" is not a target; use a comma-separated list of qkv, proj, fc "
               "and fc2",
               lora_targets, t);
    ATTO_CHECK(std::find(names.begin(), names.end(), it->second) == names.end(),
               "GPT config: lora_targets \"{}\" names {} twice", lora_targets, t);
    names.push_back(it->second);
    if (t == "fc" && activation == nn::Activation::SwiGLU) names.push_back("mlp.c_fc2");
  }
  return names;
}

nn::BlockConfig GPTConfig::block_config() const {
  nn::BlockConfig b = nn::block_config_of(*this, d_model, n_heads);
  b.n_kv_heads = n_kv_heads;
  b.rope_base = rope_base;
  return b;
}

GPT::Transformer::Transformer(const GPTConfig& cfg, Rng& rng)
    : wte((cfg.validate(), cfg.vocab_size), cfg.d_model, rng), drop(cfg.dropout) {
  register_module("wte", wte);
  if (cfg.pos == PosKind::Learned) {
    wpe = std::make_unique<nn::LearnedPositions>(cfg.block_size, cfg.d_model, rng);
    register_module("wpe", *wpe);
  } else if (cfg.pos == PosKind::Sinusoidal) {
    pe = std::make_unique<nn::SinusoidalPositions>(cfg.block_size, cfg.d_model);
  }  // rope: no table, the attention rotates Q and K
  register_module("drop", drop);
  const nn::BlockConfig bc = cfg.block_config();
  for (int64_t i = 0; i < cfg.n_layers; ++i) {
    h.push_back(std::make_unique<nn::Block>(bc, rng));
    register_module("h." + std::to_string(i), *h.back());
  }
  if (cfg.pre_norm) {
    ln_f = std::make_unique<nn::Norm>(cfg.norm, cfg.d_model, cfg.bias, bc.norm_eps);
    register_module("ln_f", *ln_f);
  }
}

GPT::GPT(const GPTConfig& cfg, Rng& rng)
    : transformer(cfg, rng), lm_head(cfg.d_model, cfg.vocab_size, /*bias=*/false, rng), cfg_(cfg) {
  register_module("transformer", transformer);
  if (cfg.tie_weights) lm_head.weight = transformer.wte.weight;  // one tensor, two names
  register_module("lm_head", lm_head);
  init_gpt2(rng);
  if (!cfg.lora()) return;
  // The adapters come after the base initialisation (its random numbers stay the same), and
  // every parameter but theirs is frozen.
  for (auto& p : named_parameters()) p.tensor.set_requires_grad(false);
  for (auto& [name, layer] : lora_layers()) layer->add_lora(cfg.lora_rank, cfg.lora_scale(), rng);
}

std::vector<std::pair<std::string, nn::Linear*>> GPT::lora_layers() const {
  if (!cfg_.lora()) return {};
  return block_layers(cfg_.lora_layer_names());
}

std::vector<std::pair<std::string, nn::Linear*>> GPT::block_layers(const std::vector<std::string>& names) const {
  std::vector<std::pair<std::string, nn::Linear*>> out;
  for (size_t i = 0; i < transformer.h.size(); ++i) {
    nn::Block& b = *transformer.h[i];
    for (const std::string& n : names) {
      nn::Linear* l = n == "attn.c_attn"   ? &b.attn.c_attn
                      : n == "attn.c_proj" ? &b.attn.c_proj
                      : n == "mlp.c_fc"    ? &b.mlp.c_fc
                      : n == "mlp.c_fc2"   ? b.mlp.c_fc2.get()
                      : n == "mlp.c_proj"  ? &b.mlp.c_proj
                                           : nullptr;
      ATTO_CHECK(l != nullptr, "GPT: no Linear layer {} in block {}", n, i);
      out.emplace_back(fmt::format("transformer.h.{}.{}", i, n), l);
    }
  }
  return out;
}

void GPT::init_gpt2(Rng& rng) {
  if (NoInitScope::active()) return;  // a file's weights replace these at once
  const float resid_std = 0.02f / std::sqrt(2.0f * static_cast<float>(cfg_.n_layers));
  for (auto& p : named_parameters()) {
    Tensor t = p.tensor;
    const bool residual_proj = p.name.ends_with("c_proj.weight");
    switch (p.kind) {
      case ParamKind::Weight:
      case ParamKind::Embedding:
        t.copy_from(Tensor::randn(t.shape(), rng, 0.0f, residual_proj ? resid_std : 0.02f));
        break;
      case ParamKind::Bias: t.fill(0.0f); break;
      case ParamKind::Norm: break;  // LayerNorm/RMSNorm keep weight 1, bias 0
    }
  }
}

Tensor GPT::add_positions(const Tensor& tok, int64_t T, int64_t offset) const {
  switch (cfg_.pos) {
    case PosKind::Learned: return add(tok, transformer.wpe->forward(T, offset));
    case PosKind::Sinusoidal: return add(tok, transformer.pe->forward(T, offset));
    case PosKind::Rope: return tok;  // the attention rotates Q and K
  }
  return tok;
}

GPT::Cache GPT::make_cache(int64_t B, int64_t max_len) const {
  ATTO_CHECK(B > 0 && max_len > 0 && max_len <= cfg_.block_size,
             "GPT::make_cache: B={} max_len={} (max_len must be in [1, block size {}])", B, max_len, cfg_.block_size);
  Cache c;
  c.max_len = max_len;
  for (const auto& block : transformer.h) c.layers.push_back(block->attn.make_cache(B, max_len));
  return c;
}

// Token embeddings [R, T, C] plus their positions: the rows of caches[g] at that cache's
// length, all rows at 0 without caches (rope: none added; the attention rotates Q and K).
Tensor GPT::embed(const std::vector<int32_t>& idx, int64_t R, int64_t T, std::span<Cache* const> caches) const {
  Tensor x = transformer.wte.forward(idx, {R, T});
  if (caches.size() <= 1) return add_positions(x, T, caches.empty() ? 0 : caches[0]->len);
  if (cfg_.rope()) return x;
  std::vector<Tensor> parts;
  int64_t r0 = 0;
  for (const Cache* c : caches) {
    const int64_t rows = c->layers[0].kv.size(0);
    parts.push_back(add_positions(slice(x, 0, r0, r0 + rows), T, c->len));
    r0 += rows;
  }
  return concat(parts, 0);
}

// The one forward of the blocks, ln_f and lm_head, which every entry point ends in: x [R, T, C]
// holds the rows of caches[0], then of caches[1], ... (no caches: training and scoring), and
// each layer attends over its own layer of each cache.
Tensor GPT::blocks_and_head(Tensor x, std::span<Cache* const> caches, nn::BlockObserver* observer, Trace* trace) {
  x = blocks(std::move(x), caches, observer);
  if (trace) trace->final_hidden = x.detach();
  return lm_head.forward(x);  // [R, T, V]
}

void GPT::set_recompute(bool on) {
  for (auto& b : transformer.h) b->recompute = on;
}

Tensor GPT::blocks(Tensor x, std::span<Cache* const> caches, nn::BlockObserver* observer) {
  const nn::AttentionMask causal{.causal = true, .key_mask = {}};
  std::vector<nn::KVCache*> layer(caches.size());
  for (size_t i = 0; i < transformer.h.size(); ++i) {
    for (size_t g = 0; g < caches.size(); ++g) layer[g] = &caches[g]->layers[i];
    x = transformer.h[i]->forward(x, causal, layer, observer);
  }
  if (transformer.ln_f) x = transformer.ln_f->forward(x);
  return x;
}

Tensor GPT::forward_cached(const std::vector<int32_t>& idx, int64_t B, int64_t Tn, Cache& cache) {
  ATTO_CHECK(!grad_enabled() || !training(), "GPT::forward_cached is for inference: use NoGradGuard and eval()");
  ATTO_CHECK(B > 0 && Tn > 0 && static_cast<int64_t>(idx.size()) == B * Tn,
             "GPT::forward_cached: {} token ids for B={} Tn={}", idx.size(), B, Tn);
  ATTO_CHECK(cache.len + Tn <= cache.max_len,
             "GPT::forward_cached: {} cached + {} new positions exceed the cache "
             "length {}",
             cache.len, Tn, cache.max_len);
  ATTO_CHECK(cache.layers.at(0).kv.size(0) == B, "GPT::forward_cached: B={} for a cache of {} sequences", B,
             cache.layers[0].kv.size(0));
  Cache* one[] = {&cache};
  if (Tn == 1) return forward_step(idx, one);
  NoGradGuard no_grad;
  Tensor logits = blocks_and_head(embed(idx, B, Tn, one), one, nullptr, nullptr);
  cache.len += Tn;
  return logits;
}

Tensor GPT::forward_step(const std::vector<int32_t>& idx, std::span<Cache* const> caches) {
  ATTO_CHECK(!grad_enabled() || !training(), "GPT::forward_step is for inference: use NoGradGuard and eval()");
  ATTO_CHECK(!caches.empty(), "GPT::forward_step: no caches");
  int64_t R = 0;
  for (const Cache* c : caches) {
    ATTO_CHECK(c->len + 1 <= c->max_len, "GPT::forward_step: a cache of length {} is full", c->max_len);
    R += c->layers.at(0).kv.size(0);
  }
  ATTO_CHECK(static_cast<int64_t>(idx.size()) == R, "GPT::forward_step: {} token ids for {} cached sequences",
             idx.size(), R);
  NoGradGuard no_grad;
  kernels::RowStableScope row_stable;
  Tensor logits = blocks_and_head(embed(idx, R, 1, caches), caches, nullptr, nullptr);
  for (Cache* c : caches) c->len += 1;
  return logits;
}

Tensor GPT::forward(const std::vector<int32_t>& idx, int64_t B, int64_t T, Trace* trace) {
  ATTO_CHECK(B > 0 && T > 0 && static_cast<int64_t>(idx.size()) == B * T, "GPT::forward: {} token ids for B={} T={}",
             idx.size(), B, T);
  ATTO_CHECK(T <= cfg_.block_size, "GPT::forward: sequence length {} exceeds the block size {}", T, cfg_.block_size);
  Tensor emb = embed(idx, B, T, {});  // [B, T, C]
  std::optional<nn::BlockRecorder> recorder;
  if (trace) {
    trace->embeddings = emb.detach();
    recorder.emplace(trace->blocks);
  }
  return blocks_and_head(transformer.drop.forward(emb), {}, recorder ? &*recorder : nullptr, trace);
}

Tensor GPT::loss(const std::vector<int32_t>& idx, const std::vector<int32_t>& targets, int64_t B, int64_t T,
                 const CrossEntropyOptions& ce) {
  ATTO_CHECK(B > 0 && T > 0 && static_cast<int64_t>(idx.size()) == B * T, "GPT::loss: {} token ids for B={} T={}",
             idx.size(), B, T);
  ATTO_CHECK(T <= cfg_.block_size, "GPT::loss: sequence length {} exceeds the block size {}", T, cfg_.block_size);
  if (lm_head.has_lora()) return cross_entropy(forward(idx, B, T), targets, ce);  // no fused form with an adapter
  Tensor x = blocks(transformer.drop.forward(embed(idx, B, T, {})), {}, nullptr);
  return linear_cross_entropy(x, lm_head.weight, lm_head.bias, targets, ce);
}

}  // namespace atto
