#include "models/seq2seq.h"

#include <cmath>

namespace atto {

void Seq2SeqConfig::validate() const {
  ATTO_CHECK(pos != PosKind::Rope, "seq2seq config: rotary positions (pos rope) are for the GPT; use learned or "
             "sinusoidal");
  ATTO_CHECK(src_vocab > 0 && tgt_vocab > 0, "seq2seq config: vocabularies must be non-empty, got {} and {}", src_vocab,
             tgt_vocab);
  ATTO_CHECK(!share_embeddings || src_vocab == tgt_vocab,
             "seq2seq config: a shared vocabulary needs equal sizes, got {} and {}", src_vocab, tgt_vocab);
  ATTO_CHECK(max_len > 0 && max_len <= kMaxPositions,
             "seq2seq config: max_len must be in [1, {}] (atto's limit on positions), got {}", kMaxPositions, max_len);
  ATTO_CHECK(n_enc_layers > 0 && n_dec_layers > 0, "seq2seq config: layers must be at least 1, got {} and {}",
             n_enc_layers, n_dec_layers);
  ATTO_CHECK(n_heads > 0 && d_model > 0 && d_model % n_heads == 0,
             "seq2seq config: d_model ({}) must be a positive multiple of n_heads ({})", d_model, n_heads);
  ATTO_CHECK(d_ff >= 0, "seq2seq config: d_ff must be >= 0 (0 = 4 * d_model), got {}", d_ff);
  ATTO_CHECK(dropout >= 0.0f && dropout < 1.0f, "seq2seq config: dropout {} is outside [0, 1)", dropout);
}

nn::BlockConfig Seq2SeqConfig::block_config() const { return nn::block_config_of(*this, d_model, n_heads); }

Seq2Seq::Stack::Stack(const Seq2SeqConfig& cfg, int64_t vocab, Rng& rng)
    : embed_tokens((cfg.validate(), vocab), cfg.d_model, rng), drop(cfg.dropout), d_model_(cfg.d_model) {
  register_module("embed_tokens", embed_tokens);
  if (cfg.pos == PosKind::Learned) {
    embed_positions = std::make_unique<nn::LearnedPositions>(cfg.max_len, cfg.d_model, rng);
    register_module("embed_positions", *embed_positions);
  } else {
    pe = std::make_unique<nn::SinusoidalPositions>(cfg.max_len, cfg.d_model);
  }
  register_module("drop", drop);
}

void Seq2Seq::Stack::add_final_norm(const Seq2SeqConfig& cfg) {
  if (!cfg.pre_norm) return;
  const nn::BlockConfig bc = cfg.block_config();
  ln_f = std::make_unique<nn::Norm>(bc.norm, bc.d_model, bc.bias, bc.norm_eps);
  register_module("ln_f", *ln_f);
}

Tensor Seq2Seq::Stack::embed(const std::vector<int32_t>& ids, int64_t B, int64_t T, int64_t offset) const {
  Tensor tok = scale(embed_tokens.forward(ids, {B, T}), std::sqrt(static_cast<float>(d_model_)));
  Tensor pos = embed_positions ? embed_positions->forward(T, offset) : pe->forward(T, offset);
  return drop.forward(add(tok, pos));
}

Seq2Seq::EncoderStack::EncoderStack(const Seq2SeqConfig& cfg, Rng& rng) : Stack(cfg, cfg.src_vocab, rng) {
  for (int64_t i = 0; i < cfg.n_enc_layers; ++i) {
    layers.push_back(std::make_unique<nn::Block>(cfg.block_config(), rng));
    register_module("layers." + std::to_string(i), *layers.back());
  }
  add_final_norm(cfg);
}

void Seq2Seq::set_recompute(bool on) {
  for (auto& l : encoder.layers) l->recompute = on;
  for (auto& l : decoder.layers) l->recompute = on;
}

Tensor Seq2Seq::EncoderStack::forward(const std::vector<int32_t>& src, int64_t B, int64_t S,
                                      const nn::AttentionMask& mask, nn::BlockObserver* observer) const {
  Tensor x = embed(src, B, S, 0);
  for (const auto& layer : layers) x = layer->forward(x, mask, {}, observer);
  return final_norm(x);
}

Seq2Seq::DecoderStack::DecoderStack(const Seq2SeqConfig& cfg, Rng& rng) : Stack(cfg, cfg.tgt_vocab, rng) {
  for (int64_t i = 0; i < cfg.n_dec_layers; ++i) {
    layers.push_back(std::make_unique<nn::DecoderBlock>(cfg.block_config(), rng));
    register_module("layers." + std::to_string(i), *layers.back());
  }
  add_final_norm(cfg);
}

Tensor Seq2Seq::DecoderStack::forward(const std::vector<int32_t>& tgt, int64_t B, int64_t T, int64_t offset,
                                      const Tensor& memory, const nn::AttentionMask& self_mask,
                                      const nn::AttentionMask& memory_mask, std::vector<nn::DecoderCache>* caches,
                                      nn::BlockObserver* observer) const {
  Tensor y = embed(tgt, B, T, offset);
  for (size_t i = 0; i < layers.size(); ++i)
    y = layers[i]->forward(y, memory, self_mask, memory_mask, caches ? &(*caches)[i] : nullptr, observer);
  return final_norm(y);
}

Seq2Seq::Seq2Seq(const Seq2SeqConfig& cfg, Rng& rng)
    : encoder(cfg, rng), decoder(cfg, rng), lm_head(cfg.d_model, cfg.tgt_vocab, /*bias=*/false, rng), cfg_(cfg) {
  if (cfg.share_embeddings) decoder.embed_tokens.weight = encoder.embed_tokens.weight;
  if (cfg.tie_weights) lm_head.weight = decoder.embed_tokens.weight;
  register_module("encoder", encoder);
  register_module("decoder", decoder);
  register_module("lm_head", lm_head);
  // Initialisation as in common implementations of the paper: Xavier-uniform matrices, zero
  // biases, embeddings N(0, C^-1/2) (they are scaled by sqrt(C) in the forward).
  for (auto& p : named_parameters()) {
    Tensor t = p.tensor;
    if (p.kind == ParamKind::Weight) {
      const float bound = std::sqrt(6.0f / static_cast<float>(t.size(0) + t.size(1)));
      t.copy_from(Tensor::rand(t.shape(), rng, -bound, bound));
    } else if (p.kind == ParamKind::Embedding) {
      t.copy_from(Tensor::randn(t.shape(), rng, 0.0f, 1.0f / std::sqrt(static_cast<float>(cfg.d_model))));
    } else if (p.kind == ParamKind::Bias) {
      t.fill(0.0f);
    }
  }
}

namespace {
void check_ids(const char* what, const std::vector<int32_t>& ids, int64_t B, int64_t T, int64_t max_len,
               const std::vector<uint8_t>& mask) {
  ATTO_CHECK(B > 0 && T > 0 && static_cast<int64_t>(ids.size()) == B * T, "Seq2Seq: {} has {} ids for B={} T={}", what,
             ids.size(), B, T);
  ATTO_CHECK(T <= max_len, "Seq2Seq: {} length {} exceeds max_len {}", what, T, max_len);
  ATTO_CHECK(mask.empty() || static_cast<int64_t>(mask.size()) == B * T, "Seq2Seq: {} mask has {} entries for B*T={}",
             what, mask.size(), B * T);
}
}  // namespace

Tensor Seq2Seq::encode(const std::vector<int32_t>& src, int64_t B, int64_t S, const std::vector<uint8_t>& src_mask,
                       nn::BlockObserver* observer) {
  check_ids("source", src, B, S, cfg_.max_len, src_mask);
  return encoder.forward(src, B, S, {.causal = false, .key_mask = src_mask}, observer);
}

Tensor Seq2Seq::decode(const std::vector<int32_t>& tgt, int64_t B, int64_t T, const Tensor& memory,
                       const std::vector<uint8_t>& src_mask, const std::vector<uint8_t>& tgt_mask,
                       nn::BlockObserver* observer) {
  check_ids("target", tgt, B, T, cfg_.max_len, tgt_mask);
  return lm_head.forward(decoder.forward(tgt, B, T, 0, memory, {.causal = true, .key_mask = tgt_mask},
                                         {.causal = false, .key_mask = src_mask}, nullptr, observer));
}

Seq2Seq::Cache Seq2Seq::make_cache(const Tensor& memory, const std::vector<uint8_t>& src_mask, int64_t max_len) {
  NoGradGuard no_grad;
  ATTO_CHECK(max_len > 0 && max_len <= cfg_.max_len, "Seq2Seq: decoding length {} must be in [1, max_len {}]", max_len,
             cfg_.max_len);
  Cache c;
  c.max_len = max_len;
  c.src_mask = src_mask;
  for (auto& layer : decoder.layers) c.layers.push_back(layer->make_cache(memory, max_len));
  return c;
}

Tensor Seq2Seq::decode_cached(const std::vector<int32_t>& tgt, int64_t B, int64_t Tn, Cache& cache) {
  NoGradGuard no_grad;
  ATTO_CHECK(cache.len + Tn <= cache.max_len, "Seq2Seq: {} decoded + {} new positions exceed the decoding length {}",
             cache.len, Tn, cache.max_len);
  check_ids("target", tgt, B, Tn, cfg_.max_len, {});
  const Tensor y = decoder.forward(tgt, B, Tn, cache.len, Tensor(), {.causal = true, .key_mask = {}},
                                   {.causal = false, .key_mask = cache.src_mask}, &cache.layers, nullptr);
  cache.len += Tn;
  return lm_head.forward(y);
}

namespace {
// out rows = in rows[rows[i]] along dimension 0 of a contiguous tensor.
Tensor gather_rows(const Tensor& in, const std::vector<int64_t>& rows) {
  Shape shape = in.shape();
  const int64_t row = in.numel() / shape[0];
  shape[0] = static_cast<int64_t>(rows.size());
  Tensor out = Tensor::empty(shape);
  for (size_t i = 0; i < rows.size(); ++i) {
    ATTO_CHECK(rows[i] >= 0 && rows[i] < in.size(0), "reorder: row {} out of range [0, {})", rows[i], in.size(0));
    std::copy_n(in.data() + rows[i] * row, row, out.data() + static_cast<int64_t>(i) * row);
  }
  return out;
}
}  // namespace

void Seq2Seq::Cache::reorder(const std::vector<int64_t>& rows) {
  if (!src_mask.empty()) {
    const int64_t S = layers.at(0).memory_kv.size(1), B = layers.at(0).memory_kv.size(0);
    std::vector<uint8_t> m(rows.size() * static_cast<size_t>(S));
    for (size_t i = 0; i < rows.size(); ++i) {
      ATTO_CHECK(rows[i] >= 0 && rows[i] < B, "reorder: row {} out of range [0, {})", rows[i], B);
      std::copy_n(src_mask.begin() + rows[i] * S, S, m.begin() + static_cast<int64_t>(i) * S);
    }
    src_mask = std::move(m);
  }
  for (auto& layer : layers) {
    layer.self.kv = gather_rows(layer.self.kv, rows);
    layer.memory_kv = gather_rows(layer.memory_kv, rows);
  }
}

}  // namespace atto
