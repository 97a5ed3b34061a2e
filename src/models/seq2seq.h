// atto/models/seq2seq.h: the encoder-decoder Transformer of "Attention Is All You Need".
//
//   Seq2SeqConfig cfg;                          // paper-like defaults, small
//   cfg.src_vocab = src_tok.vocab_size();
//   cfg.tgt_vocab = tgt_tok.vocab_size();
//   Seq2Seq model(cfg, rng);
//   Tensor memory = model.encode(src, B, S, src_mask);                   // [B, S, C]
//   Tensor logits = model.decode(tgt_in, B, T, memory, src_mask, tgt_mask);  // [B, T, V_tgt]
//
// Reads like the paper (section 3):
//   encoder:  x = dropout(embed(src) * sqrt(C) + PE);  x = EncoderLayer_i(x)   (N layers)
//   decoder:  y = dropout(embed(tgt) * sqrt(C) + PE);  y = DecoderLayer_i(y, x)
//             logits = y W^T   (W tied to the target embedding when tie_weights)
// Encoder layers: self-attention (key padding mask) + FFN. Decoder layers: masked
// (look-ahead + padding) self-attention, cross-attention over the encoder output (source
// padding mask), FFN. Post-norm as in the paper, pre-norm as an option (then a final norm
// "ln_f" ends each stack).
//
// Parameter names: encoder.embed_tokens.weight, encoder.embed_positions.weight (learned
// positions only), encoder.layers.{i}.{ln_1,attn,ln_2,mlp}.*, encoder.ln_f.*,
// decoder.embed_tokens.weight, decoder.layers.{i}.{ln_1,attn,ln_2,cross_attn,ln_3,mlp}.*,
// decoder.ln_f.*, lm_head.weight. Sharing the vocabulary (share_embeddings) makes encoder and
// decoder embeddings one tensor; tie_weights makes lm_head that of the decoder (all three
// when both are on).
//
// Masks: src_mask and tgt_mask are [B, S] and [B, T] key padding masks (1 = token, 0 = pad);
// empty means no padding.
#pragma once

#include <memory>
#include <vector>

#include "models/gpt.h"

namespace atto {

struct Seq2SeqConfig {
  int64_t src_vocab = 0;
  int64_t tgt_vocab = 0;
  int64_t max_len = 256;  // longest source or target sequence (positions)
  int64_t n_enc_layers = 3;
  int64_t n_dec_layers = 3;
  int64_t n_heads = 4;
  int64_t d_model = 128;
  int64_t d_ff = 0;  // 0: 4 * d_model
  nn::Activation activation = nn::Activation::ReLU;
  nn::NormKind norm = nn::NormKind::LayerNorm;
  bool pre_norm = false;  // the paper is post-norm
  bool bias = true;
  float dropout = 0.1f;
  PosKind pos = PosKind::Sinusoidal;
  bool share_embeddings = false;  // one vocabulary for source and target
  bool tie_weights = true;        // lm_head = decoder embedding

  void validate() const;
  nn::BlockConfig block_config() const;
  bool rope() const { return false; }  // validate() refuses PosKind::Rope
};

class Seq2Seq : public nn::Module {
 public:
  Seq2Seq(const Seq2SeqConfig& cfg, Rng& rng);

  // src [B, S] -> the memory [B, S, C]. With an observer, it sees every encoder block.
  Tensor encode(const std::vector<int32_t>& src, int64_t B, int64_t S, const std::vector<uint8_t>& src_mask,
                nn::BlockObserver* observer = nullptr);
  // tgt [B, T] (teacher forcing) -> logits [B, T, V]. With an observer, it sees every decoder block.
  Tensor decode(const std::vector<int32_t>& tgt, int64_t B, int64_t T, const Tensor& memory,
                const std::vector<uint8_t>& src_mask, const std::vector<uint8_t>& tgt_mask,
                nn::BlockObserver* observer = nullptr);

  // Incremental decoding, with the GPT's verbs (make_cache, then *_cached calls): per decoder
  // layer, the self-attention KV cache and the memory's cross-attention keys and values
  // computed once per source.
  struct Cache {
    std::vector<nn::DecoderCache> layers;
    std::vector<uint8_t> src_mask;
    int64_t len = 0, max_len = 0;
    // Keep batch rows `rows` (in that order; repeats allowed), e.g. after a beam search step.
    void reorder(const std::vector<int64_t>& rows);
  };
  Cache make_cache(const Tensor& memory, const std::vector<uint8_t>& src_mask, int64_t max_len);
  // The next Tn target tokens of each of the B rows -> logits [B, Tn, V]. Under NoGradGuard.
  Tensor decode_cached(const std::vector<int32_t>& tgt, int64_t B, int64_t Tn, Cache& cache);

  const Seq2SeqConfig& config() const { return cfg_; }
  // `atto train --recompute`: every encoder and decoder layer keeps only its inputs for the
  // backward and runs again there (nn::Block::recompute).
  void set_recompute(bool on);

  // What both stacks start with: token embeddings scaled by sqrt(C) plus positions, then dropout;
  // and, pre-norm, the final norm ("ln_f", registered after the layers).
  struct Stack : nn::Module {
    Stack(const Seq2SeqConfig& cfg, int64_t vocab, Rng& rng);
    nn::Embedding embed_tokens;
    std::unique_ptr<nn::LearnedPositions> embed_positions;
    std::unique_ptr<nn::SinusoidalPositions> pe;
    nn::Dropout drop;
    std::unique_ptr<nn::Norm> ln_f;
    // embed(ids) * sqrt(C) + positions [offset, offset + T)
    Tensor embed(const std::vector<int32_t>& ids, int64_t B, int64_t T, int64_t offset) const;
    Tensor final_norm(const Tensor& x) const { return ln_f ? ln_f->forward(x) : x; }

   protected:
    void add_final_norm(const Seq2SeqConfig& cfg);
    int64_t d_model_;
  };
  // "encoder.layers.<i>": the source's self-attention blocks.
  struct EncoderStack : Stack {
    EncoderStack(const Seq2SeqConfig& cfg, Rng& rng);
    std::vector<std::unique_ptr<nn::Block>> layers;
    Tensor forward(const std::vector<int32_t>& src, int64_t B, int64_t S, const nn::AttentionMask& mask,
                   nn::BlockObserver* observer) const;
  };
  // "decoder.layers.<i>": masked self-attention, cross-attention over the memory, FFN. With
  // caches (one per layer), the T positions from `offset` are decoded incrementally.
  struct DecoderStack : Stack {
    DecoderStack(const Seq2SeqConfig& cfg, Rng& rng);
    std::vector<std::unique_ptr<nn::DecoderBlock>> layers;
    Tensor forward(const std::vector<int32_t>& tgt, int64_t B, int64_t T, int64_t offset, const Tensor& memory,
                   const nn::AttentionMask& self_mask, const nn::AttentionMask& memory_mask,
                   std::vector<nn::DecoderCache>* caches, nn::BlockObserver* observer) const;
  };
  EncoderStack encoder;
  DecoderStack decoder;
  nn::Linear lm_head;

 private:
  Seq2SeqConfig cfg_;
};

}  // namespace atto
