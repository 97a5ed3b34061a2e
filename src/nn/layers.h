// atto/nn/layers.h: the basic layers, parameters named as in PyTorch.
//
//   Rng rng(0);
//   nn::Linear fc(64, 256, /*bias=*/true, rng);      // weight [256, 64], bias [256]
//   Tensor y = fc.forward(x);                        // x [..., 64] -> [..., 256]
//   nn::Norm ln(nn::NormKind::LayerNorm, 64, /*bias=*/true, 1e-5f);  // weight = 1, bias = 0
//   nn::SinusoidalPositions pe(/*max_len=*/512, 64);  // table [512, 64]
//   Tensor p = pe.forward(T);                         // [T, 64], rows 0..T-1
//
// Initialisation follows PyTorch's defaults (Linear: U(-1/sqrt(in), 1/sqrt(in)) for weight and
// bias; Embedding: N(0, 1)); models re-initialise as their paper says (GPT-2: N(0, 0.02)).
#pragma once

#include "nn/module.h"

namespace atto::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, Rng& rng);
  Tensor forward(const Tensor& x) const { return with_lora(x, linear(x, weight, bias)); }
  // residual + forward(x) as one op (linear_residual): the residual connection after a projection.
  Tensor forward_residual(const Tensor& x, const Tensor& residual) const {
    return with_lora(x, linear_residual(x, weight, bias, residual));
  }

  // LoRA (Hu et al. 2021, as PEFT builds it): forward(x) gains scale * (x A^T) B^T, with
  // parameters "lora_A.weight" [rank, in] (PyTorch's Linear initialisation) and "lora_B.weight"
  // [out, rank] (zeros, so the layer starts as it was). The caller freezes the rest.
  void add_lora(int64_t rank, float scale, Rng& rng);
  bool has_lora() const { return lora_A.defined(); }
  // y + scale * (x A^T) B^T; y as it is without an adapter.
  Tensor with_lora(const Tensor& x, const Tensor& y) const;
  Tensor weight;  // [out, in]
  Tensor bias;    // [out], or undefined
  Tensor lora_A, lora_B;
  float lora_scale = 0.0f;
};

// weight += scale * B A (weight [out, in], a [rank, in], b [out, rank]): a LoRA adapter merged
// into the weight it adapts. Accumulates in double per element; one rounding into weight.
void merge_lora(Tensor& weight, const Tensor& a, const Tensor& b, float scale);

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, Rng& rng);
  // ids with shape ids_shape -> [ids_shape..., dim]
  Tensor forward(const std::vector<int32_t>& ids, const Shape& ids_shape) const {
    return embedding(weight, ids, ids_shape);
  }
  Tensor weight;  // [V, C]
};

enum class NormKind { LayerNorm, RMSNorm };

// LayerNorm or RMSNorm, chosen by configuration (parameters "weight" and, for LayerNorm with
// bias, "bias").
class Norm : public Module {
 public:
  Norm(NormKind kind, int64_t dim, bool bias, float eps);
  Tensor forward(const Tensor& x) const {
    return kind_ == NormKind::LayerNorm ? layer_norm(x, weight, bias, eps_) : rms_norm(x, weight, eps_);
  }
  Tensor weight, bias;  // [C]; bias undefined for RMSNorm or when disabled
  float eps() const { return eps_; }

 private:
  NormKind kind_;
  float eps_;
};

// Inverted dropout; active in training mode with p > 0, drawing its seed from the Rng given
// to set_rng.
class Dropout : public Module {
 public:
  explicit Dropout(float p);
  Tensor forward(const Tensor& x) const;
  bool active() const { return training() && p != 0.0f; }  // whether forward changes anything
  float p;
};

// A sublayer's output projection, its dropout and the residual connection around it:
// residual + drop(proj(h)), or drop(proj(h)) when residual is undefined. While the dropout does
// nothing (p = 0, or evaluation), the add is fused into the projection (linear_residual).
Tensor project_residual(const Linear& proj, const Dropout& drop, const Tensor& h, const Tensor& residual);

// "Attention Is All You Need" positions: PE[pos, 2i] = sin(pos / 10000^(2i/C)),
// PE[pos, 2i+1] = cos(pos / 10000^(2i/C)). A fixed table, not a parameter.
class SinusoidalPositions : public Module {
 public:
  SinusoidalPositions(int64_t max_len, int64_t dim);
  // Rows [offset, offset + T) of the table: [T, C].
  Tensor forward(int64_t T, int64_t offset = 0) const;
  const Tensor& table() const { return table_; }

 private:
  Tensor table_;  // [max_len, C]
};

// Learned absolute positions (GPT-2 "wpe"): parameter "weight" [max_len, C].
class LearnedPositions : public Module {
 public:
  LearnedPositions(int64_t max_len, int64_t dim, Rng& rng);
  Tensor forward(int64_t T, int64_t offset = 0) const;
  Tensor weight;
};

}  // namespace atto::nn
