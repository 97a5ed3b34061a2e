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
// Set keep_weights = true to keep the attention weights of the last forward ([B, NH, Tq, Tk],
// masked entries 0) in last_weights, for inspection.
#pragma once

#include "nn/layers.h"

namespace atto::nn {

struct AttentionConfig {
  int64_t d_model = 64;
  int64_t n_heads = 4;
  bool bias = true;
  float dropout = 0.0f;  // on the output projection (residual dropout)
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

class SelfAttention : public Module {
 public:
  SelfAttention(const AttentionConfig& cfg, Rng& rng);
  // [B, T, C] -> [B, T, C]. With a residual ([B, T, C]) the output is residual + attention, the
  // add fused into the output projection (project_residual).
  Tensor forward(const Tensor& x, const AttentionMask& mask, const Tensor& residual = Tensor());
  // Inference: x [B, Tn, C] are the next Tn positions; attends causally over the cache plus
  // themselves and appends their keys and values (cache.len += Tn). Call under NoGradGuard.
  Tensor forward_cached(const Tensor& x, KVCache& cache, const Tensor& residual = Tensor());
  KVCache make_cache(int64_t B, int64_t max_len) const;

  Linear c_attn, c_proj;
  Dropout resid_dropout;
  bool keep_weights = false;
  Tensor last_weights;

 private:
  int64_t C_, NH_;
};

class CrossAttention : public Module {
 public:
  CrossAttention(const AttentionConfig& cfg, Rng& rng);
  // x [B, Tq, C] attends over memory [B, Tk, C]; mask.key_mask masks memory positions.
  // With a residual ([B, Tq, C]), residual + attention (as SelfAttention::forward).
  Tensor forward(const Tensor& x, const Tensor& memory, const AttentionMask& mask,
                 const Tensor& residual = Tensor());
  // The memory's keys and values, [B, Tk, 2C]: computed once per source when decoding.
  Tensor memory_kv(const Tensor& memory) { return kv_proj.forward(memory); }
  // forward() with precomputed memory_kv(memory).
  Tensor forward_kv(const Tensor& x, const Tensor& kv, const AttentionMask& mask,
                    const Tensor& residual = Tensor());

  Linear q_proj, kv_proj, c_proj;
  Dropout resid_dropout;
  bool keep_weights = false;
  Tensor last_weights;

 private:
  int64_t C_, NH_;
};

}  // namespace atto::nn
