#include "models/seq2seq.h"

#include <cmath>

namespace atto {

void Seq2SeqConfig::validate() const {
  ATTO_CHECK(src_vocab > 0 && tgt_vocab > 0, "seq2seq config: vocabularies must be non-empty, got {} and {}",
             src_vocab, tgt_vocab);
  ATTO_CHECK(!share_embeddings || src_vocab == tgt_vocab,
             "seq2seq config: a shared vocabulary needs equal sizes, got {} and {}", src_vocab, tgt_vocab);
  ATTO_CHECK(max_len > 0 && max_len <= kMaxPositions,
             "seq2seq config: max_len must be in [1, {}] (atto's limit on positions), got {}", kMaxPositions, max_len);
  ATTO_CHECK(n_enc_layers > 0 && n_dec_layers > 0, "seq2seq config: layers must be at least 1, got {} and {}",
             n_enc_layers, n_dec_layers);
  ATTO_CHECK(n_head > 0 && d_model > 0 && d_model % n_head == 0,
             "seq2seq config: d_model ({}) must be a positive multiple of n_heads ({})", d_model, n_head);
  ATTO_CHECK(d_ff >= 0, "seq2seq config: d_ff must be >= 0 (0 = 4 * d_model), got {}", d_ff);
  ATTO_CHECK(dropout >= 0.0f && dropout < 1.0f, "seq2seq config: dropout {} is outside [0, 1)", dropout);
}

nn::BlockConfig Seq2SeqConfig::block_config() const {
  nn::BlockConfig b;
  b.d_model = d_model;
  b.n_heads = n_head;
  b.d_ff = d_ff > 0 ? d_ff : 4 * d_model;
  b.activation = activation;
  b.norm = norm;
  b.pre_norm = pre_norm;
  b.bias = bias;
  b.dropout = dropout;
  return b;
}

Seq2Seq::Stack::Stack(const Seq2SeqConfig& cfg, bool is_decoder, int64_t vocab, Rng& rng)
    : embed_tokens((cfg.validate(), vocab), cfg.d_model, rng), drop(cfg.dropout) {
  register_module("embed_tokens", embed_tokens);
  if (cfg.pos == PosKind::Learned) {
    embed_positions = std::make_unique<nn::LearnedPositions>(cfg.max_len, cfg.d_model, rng);
    register_module("embed_positions", *embed_positions);
  } else {
    pe = std::make_unique<nn::SinusoidalPositions>(cfg.max_len, cfg.d_model);
  }
  register_module("drop", drop);
  const nn::BlockConfig bc = cfg.block_config();
  const int64_t n = is_decoder ? cfg.n_dec_layers : cfg.n_enc_layers;
  for (int64_t i = 0; i < n; ++i) {
    if (is_decoder) {
      dec_layers.push_back(std::make_unique<nn::DecoderBlock>(bc, rng));
      register_module("layers." + std::to_string(i), *dec_layers.back());
    } else {
      enc_layers.push_back(std::make_unique<nn::EncoderBlock>(bc, rng));
      register_module("layers." + std::to_string(i), *enc_layers.back());
    }
  }
  if (cfg.pre_norm) {
    ln_f = std::make_unique<nn::Norm>(cfg.norm, cfg.d_model, cfg.bias, bc.norm_eps);
    register_module("ln_f", *ln_f);
  }
}

Tensor Seq2Seq::Stack::embed(const std::vector<int32_t>& ids, int64_t B, int64_t T, int64_t offset, int64_t C) {
  Tensor tok = scale(embed_tokens.forward(ids, {B, T}), std::sqrt(static_cast<float>(C)));
  Tensor pos = embed_positions ? embed_positions->forward(T, offset) : pe->forward(T, offset);
  return drop.forward(add(tok, pos));
}

Seq2Seq::Seq2Seq(const Seq2SeqConfig& cfg, Rng& rng)
    : encoder(cfg, false, cfg.src_vocab, rng),
      decoder(cfg, true, cfg.tgt_vocab, rng),
      lm_head(cfg.d_model, cfg.tgt_vocab, /*bias=*/false, rng),
      cfg_(cfg) {
  if (cfg.share_embeddings) decoder.embed_tokens.weight = encoder.embed_tokens.weight;
  if (cfg.tie_embeddings) lm_head.weight = decoder.embed_tokens.weight;
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
  ATTO_CHECK(B > 0 && T > 0 && static_cast<int64_t>(ids.size()) == B * T, "Seq2Seq: {} has {} ids for B={} T={}",
             what, ids.size(), B, T);
  ATTO_CHECK(T <= max_len, "Seq2Seq: {} length {} exceeds max_len {}", what, T, max_len);
  ATTO_CHECK(mask.empty() || static_cast<int64_t>(mask.size()) == B * T, "Seq2Seq: {} mask has {} entries for B*T={}",
             what, mask.size(), B * T);
}
}  // namespace

Tensor Seq2Seq::encode(const std::vector<int32_t>& src, int64_t B, int64_t S, const std::vector<uint8_t>& src_mask,
                       std::vector<nn::BlockTrace>* trace) {
  check_ids("source", src, B, S, cfg_.max_len, src_mask);
  Tensor x = encoder.embed(src, B, S, 0, cfg_.d_model);
  const nn::AttentionMask mask{.causal = false, .key_mask = src_mask};
  if (trace) trace->assign(encoder.enc_layers.size(), {});
  for (size_t i = 0; i < encoder.enc_layers.size(); ++i)
    x = encoder.enc_layers[i]->forward(x, mask, trace ? &(*trace)[i] : nullptr);
  return encoder.ln_f ? encoder.ln_f->forward(x) : x;
}

Tensor Seq2Seq::decode(const std::vector<int32_t>& tgt, int64_t B, int64_t T, const Tensor& memory,
                       const std::vector<uint8_t>& src_mask, const std::vector<uint8_t>& tgt_mask,
                       std::vector<nn::BlockTrace>* trace) {
  check_ids("target", tgt, B, T, cfg_.max_len, tgt_mask);
  Tensor y = decoder.embed(tgt, B, T, 0, cfg_.d_model);
  const nn::AttentionMask self_mask{.causal = true, .key_mask = tgt_mask};
  const nn::AttentionMask mem_mask{.causal = false, .key_mask = src_mask};
  if (trace) trace->assign(decoder.dec_layers.size(), {});
  for (size_t i = 0; i < decoder.dec_layers.size(); ++i)
    y = decoder.dec_layers[i]->forward(y, memory, self_mask, mem_mask, trace ? &(*trace)[i] : nullptr);
  if (decoder.ln_f) y = decoder.ln_f->forward(y);
  return lm_head.forward(y);
}

Seq2Seq::Cache Seq2Seq::start_decoding(const Tensor& memory, const std::vector<uint8_t>& src_mask, int64_t max_len) {
  NoGradGuard no_grad;
  ATTO_CHECK(max_len > 0 && max_len <= cfg_.max_len, "Seq2Seq: decoding length {} must be in [1, max_len {}]", max_len,
             cfg_.max_len);
  Cache c;
  c.max_len = max_len;
  c.src_mask = src_mask;
  const int64_t B = memory.size(0);
  for (auto& layer : decoder.dec_layers) {
    c.self.push_back(layer->attn.make_cache(B, max_len));
    c.memory_kv.push_back(layer->cross_attn.memory_kv(memory));
  }
  return c;
}

Tensor Seq2Seq::decode_step(const std::vector<int32_t>& tgt, int64_t B, int64_t Tn, Cache& cache) {
  NoGradGuard no_grad;
  ATTO_CHECK(cache.len + Tn <= cache.max_len, "Seq2Seq: {} decoded + {} new positions exceed the decoding length {}",
             cache.len, Tn, cache.max_len);
  check_ids("target", tgt, B, Tn, cfg_.max_len, {});
  Tensor y = decoder.embed(tgt, B, Tn, cache.len, cfg_.d_model);
  const nn::AttentionMask mem_mask{.causal = false, .key_mask = cache.src_mask};
  for (size_t i = 0; i < decoder.dec_layers.size(); ++i)
    y = decoder.dec_layers[i]->forward_cached(y, cache.self[i], cache.memory_kv[i], mem_mask);
  cache.len += Tn;
  if (decoder.ln_f) y = decoder.ln_f->forward(y);
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
    const int64_t S = memory_kv.at(0).size(1), B = memory_kv.at(0).size(0);
    std::vector<uint8_t> m(rows.size() * static_cast<size_t>(S));
    for (size_t i = 0; i < rows.size(); ++i) {
      ATTO_CHECK(rows[i] >= 0 && rows[i] < B, "reorder: row {} out of range [0, {})", rows[i], B);
      std::copy_n(src_mask.begin() + rows[i] * S, S, m.begin() + static_cast<int64_t>(i) * S);
    }
    src_mask = std::move(m);
  }
  for (auto& s : self) s.kv = gather_rows(s.kv, rows);
  for (auto& kv : memory_kv) kv = gather_rows(kv, rows);
}

}  // namespace atto
