// atto/nn/attention.h: multi-head attention, self and cross.
//
//   nn::SelfAttention attn({.d_model = 64, .n_heads = 4}, rng);
//   Tensor y = attn.forward(x, {.causal = true});          // x [B, T, 64] -> [B, T, 64]
//   nn::CrossAttention xattn({.d_model = 64, .n_heads = 4}, rng);
//   Tensor z = xattn.forward(y, memory, {.key_mask = src_mask});   // memory [B, S, 64]
//
// Self-attention projects Q, K and V with one fused Linear "c_attn" ([3C, C], as nanoGPT), so
// the three projections are one GEMM, and the fused attention kernel reads Q, K, V straight
// out of its [B, T, 3C] output. Cross-attention projects the queries with "q_proj" [C, C] and
// the memory's keys and values with one fused "kv_proj" [2C, C]. Both end in "c_proj" [C, C]
// and residual dropout. Heads split C into n_heads slices of C / n_heads.
//
// Grouped-query attention (n_kv_heads < n_heads): c_attn is [C + 2 KV, C] (KV = n_kv_heads *
// head size: queries, then keys, then values, as llama's attn_q, attn_k, attn_v stacked), and its
// output is widened to [B, T, 3C] (expand_kv_heads: each key/value head repeated for its group of
// query heads) before RoPE and the attention kernels, which are those of multi-head attention.
// The KV cache holds the widened keys and values.
//
// For inspection, a forward given `weights` also stores the attention weights there ([B, NH, Tq,
// Tk], masked entries 0); nothing extra is computed without it.
#pragma once

#include <span>

#include "nn/layers.h"

namespace atto::nn {

struct AttentionConfig {
  int64_t d_model = 64;
  int64_t n_heads = 4;
  // Self-attention: heads of keys and values (grouped-query attention, as Llama 2/3 and Mistral):
  // query head h uses key/value head h / (n_heads / n_kv_heads). 0 = n_heads (multi-head).
  int64_t n_kv_heads = 0;
  bool bias = true;
  float dropout = 0.0f;  // on the output projection (residual dropout)
  bool rope = false;     // self-attention: rotary position embeddings on Q and K (rope_qkv)
  float rope_base = 10000.0f;
};

struct AttentionMask {
  bool causal = false;
  std::vector<uint8_t> key_mask;  // [B, Tk], 1 = attend, 0 = padding; empty = none
};

// Keys and values of the positions seen so far, for incremental decoding.
struct KVCache {
  Tensor kv;        // [B, max_len, 2C]: keys in columns [0, C), values in [C, 2C)
  int64_t len = 0;  // positions filled
};
// The caches of a cached forward, in row order: cache i holds the next kv.size(0) sequences of
// the input. One cache is the usual case; several are batches of sequences at different
// positions decoded in one pass (a server's decode step), each attending over its own cache.
using KVCaches = std::span<KVCache* const>;

class SelfAttention : public Module {
 public:
  SelfAttention(const AttentionConfig& cfg, Rng& rng);
  // [B, T, C] -> [B, T, C]. With a residual ([B, T, C]) the output is residual + attention, the
  // add fused into the output projection (project_residual).
  // With caches (inference, under NoGradGuard; the mask must be causal with no key mask): x are
  // the next T positions of each cache's sequences; they attend causally over their cache's
  // positions and themselves, and their keys and values are appended (len += T, per cache).
  Tensor forward(const Tensor& x, const AttentionMask& mask, const Tensor& residual = Tensor(), KVCaches caches = {},
                 Tensor* weights = nullptr);
  KVCache make_cache(int64_t B, int64_t max_len) const;

  Linear c_attn, c_proj;
  Dropout resid_dropout;

 private:
  // The attention of cached decoding: one cache, or several caches' rows in order.
  Tensor attend_cached(Tensor qkv, KVCache& cache, const AttentionOptions& o) const;
  Tensor attend_cached_groups(const Tensor& qkv, KVCaches caches, const AttentionOptions& o) const;
  // qkv [B, T, C + 2 KV] -> [B, T, 3C] (itself without grouped-query attention).
  Tensor widen(const Tensor& qkv) const;
  int64_t C_, NH_, NKV_;
  bool rope_;
  float rope_base_;
};

class CrossAttention : public Module {
 public:
  CrossAttention(const AttentionConfig& cfg, Rng& rng);
  // x [B, Tq, C] attends over memory [B, Tk, C]; mask.key_mask masks memory positions.
  // With a residual ([B, Tq, C]), residual + attention (as SelfAttention::forward). With
  // memory_kv (decoding: memory_kv(memory), computed once per source) the memory's keys and
  // values are taken from there and memory is not read.
  Tensor forward(const Tensor& x, const Tensor& memory, const AttentionMask& mask, const Tensor& residual = Tensor(),
                 const Tensor* memory_kv = nullptr, Tensor* weights = nullptr);
  // The memory's keys and values, [B, Tk, 2C].
  Tensor memory_kv(const Tensor& memory) { return kv_proj.forward(memory); }

  Linear q_proj, kv_proj, c_proj;
  Dropout resid_dropout;

 private:
  int64_t C_, NH_;
};

}  // namespace atto::nn
