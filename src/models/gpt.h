// atto/models/gpt.h: a decoder-only GPT language model (GPT-2 / nanoGPT layout).
//
//   GPTConfig cfg;                       // defaults: a small model
//   cfg.vocab_size = tok.vocab_size();
//   Rng rng(1337);
//   GPT model(cfg, rng);                 // GPT-2 initialisation
//   Tensor logits = model.forward(idx, B, T);            // idx [B*T] -> [B, T, V]
//   Tensor loss = cross_entropy(logits, targets);        // targets -1 = ignored
//   Tensor loss = model.loss(idx, targets, B, T);        // the same, without [B, T, V] in memory
//
// Reads top-down like nanoGPT's model.py:
//   x = wte(idx) + pos(T)            token embedding + learned (wpe) or sinusoidal positions
//                                    (rope: x = wte(idx); each attention rotates Q and K)
//   x = dropout(x)
//   x = h[i](x) for each block       causal self-attention + FFN, pre- or post-norm
//   x = ln_f(x)                      (pre-norm only: a post-norm block already ends in a norm)
//   logits = lm_head(x)              no bias; weight tied to wte when tie_weights
//
// Parameter names are nanoGPT's state_dict names: transformer.wte.weight,
// transformer.wpe.weight, transformer.h.0.ln_1.weight, transformer.h.0.attn.c_attn.weight [3C, C],
// ..., transformer.ln_f.weight, lm_head.weight. With tied weights both wte and lm_head names are
// in state_dict() (as in PyTorch) and name one tensor.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "nn/blocks.h"

namespace atto {

// Where position information enters: a learned table (wpe) or the fixed sinusoidal one added to
// the token embedding, or rotary embeddings applied to each self-attention's queries and keys.
enum class PosKind { Learned, Sinusoidal, Rope };

// The longest context a config may ask for (GPT block_size, seq2seq max_len): a sinusoidal table
// has no tensor in the checkpoint to check a config.json against, so this bound keeps a damaged
// value (block_size 1000000000) from allocating the table and the KV caches. 64x GPT-2's context;
// training that long a context on a CPU is out of reach anyway (attention is quadratic in it).
inline constexpr int64_t kMaxPositions = 65536;

struct GPTConfig {
  int64_t vocab_size = 0;
  int64_t block_size = 32;  // longest context
  int64_t n_layers = 4;
  int64_t n_heads = 4;
  // Key/value heads (grouped-query attention: each serves n_heads / n_kv_heads query heads, as in
  // Llama 2/3 and Mistral); 0 = n_heads (multi-head attention).
  int64_t n_kv_heads = 0;
  int64_t d_model = 64;
  int64_t d_ff = 0;  // 0: 4 * d_model (for SwiGLU: the hidden width of each branch)
  nn::Activation activation = nn::Activation::GELU;
  nn::NormKind norm = nn::NormKind::LayerNorm;
  bool pre_norm = true;
  bool bias = true;
  float dropout = 0.0f;
  bool tie_weights = true;
  PosKind pos = PosKind::Learned;
  float rope_base = 10000.0f;  // rotary positions: theta_i = rope_base^(-2i / head size)
  // LoRA adapters (nn::Linear::add_lora) on the layers lora_targets names, comma-separated:
  // qkv (attn.c_attn), proj (attn.c_proj), fc (mlp.c_fc, and mlp.c_fc2 of SwiGLU: the FFN's
  // first layer), fc2 (mlp.c_proj: its second). With lora_rank > 0 every other parameter is
  // frozen (requires_grad false). lora_alpha 0 means lora_rank (scale alpha / rank = 1).
  int64_t lora_rank = 0;
  float lora_alpha = 0.0f;
  std::string lora_targets = "qkv";

  void validate() const;  // atto::Error naming the offending field and value
  nn::BlockConfig block_config() const;
  bool rope() const { return pos == PosKind::Rope; }
  int64_t kv_heads() const { return n_kv_heads > 0 ? n_kv_heads : n_heads; }
  bool lora() const { return lora_rank > 0; }
  float lora_scale() const { return (lora_alpha > 0.0f ? lora_alpha : static_cast<float>(lora_rank)) / lora_rank; }
  // The Linear layers lora_targets names in one block, by their names in it ("attn.c_attn", ...).
  std::vector<std::string> lora_layer_names() const;
};

class GPT : public nn::Module {
 public:
  GPT(const GPTConfig& cfg, Rng& rng);

  // What inspection looks at: the embedding sum and every block's trace.
  struct Trace {
    Tensor embeddings;                   // [B, T, C] token + position (before dropout)
    std::vector<nn::BlockTrace> blocks;  // one per layer
    Tensor final_hidden;                 // [B, T, C] after ln_f (the input of lm_head)
  };

  // idx: B*T token ids, row-major [B, T], T <= block_size. Returns logits [B, T, V].
  // With a trace, also records the residual stream and attention weights of every layer.
  Tensor forward(const std::vector<int32_t>& idx, int64_t B, int64_t T, Trace* trace = nullptr);
  // cross_entropy(forward(idx, B, T), targets, ce) with the head and the loss computed in row
  // chunks (linear_cross_entropy): what training and evaluation use, the logits never whole.
  Tensor loss(const std::vector<int32_t>& idx, const std::vector<int32_t>& targets, int64_t B, int64_t T,
              const CrossEntropyOptions& ce = {});

  // Incremental decoding: one KV cache per layer. forward_cached takes the next Tn tokens of
  // each of the B sequences ([B, Tn] ids), at positions cache.len .. cache.len + Tn - 1, and
  // returns their logits [B, Tn, V]; each new token costs one position, not the whole prefix.
  // Call under NoGradGuard. max_len <= block_size.
  struct Cache {
    std::vector<nn::KVCache> layers;
    int64_t len = 0;
    int64_t max_len = 0;
  };
  Cache make_cache(int64_t B, int64_t max_len) const;
  Tensor forward_cached(const std::vector<int32_t>& idx, int64_t B, int64_t Tn, Cache& cache);
  // One decoding step of several caches at once (a server's continuous batch): the next token of
  // every sequence of caches[0], then of caches[1], ... (idx holds one id per cache row), each at
  // its own cache's position. Returns logits [R, 1, V] for the R rows. Linear layers run under
  // kernels::RowStableScope, so a sequence's logits are the same bits whichever caches come with
  // it; forward_cached with Tn = 1 is this step with one cache.
  Tensor forward_step(const std::vector<int32_t>& idx, std::span<Cache* const> caches);

  const GPTConfig& config() const { return cfg_; }
  // `atto train --recompute`: each block keeps only its input for the backward and runs again
  // there (nn::Block::recompute); the same bits, less memory, one more forward of the blocks.
  void set_recompute(bool on);
  // Applies GPT-2 initialisation: N(0, 0.02) for weights and embeddings, zero biases,
  // residual projections (attn.c_proj, mlp.c_proj) N(0, 0.02 / sqrt(2 n_layers)).
  void init_gpt2(Rng& rng);

  // The Linear layers that carry adapters (empty without LoRA), named as in state_dict()
  // ("transformer.h.0.attn.c_attn").
  std::vector<std::pair<std::string, nn::Linear*>> lora_layers() const;
  // Every block's Linear layers of the given names in a block (GPTConfig::lora_layer_names).
  std::vector<std::pair<std::string, nn::Linear*>> block_layers(const std::vector<std::string>& names) const;

  // Submodules, named as in nanoGPT ("transformer.wte", "transformer.h.<i>", ...).
  struct Transformer : nn::Module {
    Transformer(const GPTConfig& cfg, Rng& rng);
    nn::Embedding wte;
    std::unique_ptr<nn::LearnedPositions> wpe;    // PosKind::Learned
    std::unique_ptr<nn::SinusoidalPositions> pe;  // PosKind::Sinusoidal (a fixed table)
    nn::Dropout drop;
    std::vector<std::unique_ptr<nn::Block>> h;
    std::unique_ptr<nn::Norm> ln_f;  // pre-norm only
  };
  Transformer transformer;
  nn::Linear lm_head;

 private:
  // The token embeddings [B, T, C] of positions offset .. offset + T - 1 plus their position
  // vectors (learned, sinusoidal), or as they are (rope: the attention rotates Q and K).
  Tensor add_positions(const Tensor& tok, int64_t T, int64_t offset) const;
  Tensor embed(const std::vector<int32_t>& idx, int64_t R, int64_t T, std::span<Cache* const> caches) const;
  Tensor blocks_and_head(Tensor x, std::span<Cache* const> caches, nn::BlockObserver* observer, Trace* trace);
  Tensor blocks(Tensor x, std::span<Cache* const> caches, nn::BlockObserver* observer);  // to ln_f
  GPTConfig cfg_;
};

}  // namespace atto
