#include "nn/layers.h"

#include <algorithm>
#include <cmath>

namespace atto::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool use_bias, Rng& rng) {
  ATTO_CHECK(in_features > 0 && out_features > 0, "Linear: features must be positive, got in={} out={}", in_features,
             out_features);
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_features));
  weight = Tensor::rand({out_features, in_features}, rng, -bound, bound);
  register_parameter("weight", weight, ParamKind::Weight);
  if (use_bias) {
    bias = Tensor::rand({out_features}, rng, -bound, bound);
    register_parameter("bias", bias, ParamKind::Bias);
  }
}

void Linear::add_lora(int64_t rank, float scale, Rng& rng) {
  ATTO_CHECK(!has_lora(), "add_lora: this Linear already has an adapter");
  const int64_t in = weight.size(1), out = weight.size(0);
  ATTO_CHECK(rank > 0 && rank <= std::min(in, out), "LoRA rank {} must be in [1, {}] for a {} x {} weight", rank,
             std::min(in, out), out, in);
  const float bound = 1.0f / std::sqrt(static_cast<float>(in));
  lora_A = Tensor::rand({rank, in}, rng, -bound, bound);
  lora_B = Tensor::zeros({out, rank});
  lora_scale = scale;
  register_parameter("lora_A.weight", lora_A, ParamKind::Weight);
  register_parameter("lora_B.weight", lora_B, ParamKind::Weight);
}

Tensor Linear::with_lora(const Tensor& x, const Tensor& y) const {
  if (!has_lora()) return y;
  // The rank-r activation is scaled (r numbers a row), then B's product adds onto y.
  return linear_residual(scale(linear(x, lora_A, Tensor()), lora_scale), lora_B, Tensor(), y);
}

void merge_lora(Tensor& weight, const Tensor& a, const Tensor& b, float scale) {
  const int64_t out = weight.size(0), in = weight.size(1), r = a.size(0);
  ATTO_CHECK(a.shape() == Shape({r, in}) && b.shape() == Shape({out, r}),
             "merge_lora: adapter A {} and B {} do not fit the weight {}", shape_str(a.shape()), shape_str(b.shape()),
             shape_str(weight.shape()));
  const Tensor ac = contiguous(a), bc = contiguous(b);
  float* w = weight.data();
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) {
      double d = 0.0;
      for (int64_t k = 0; k < r; ++k) d += static_cast<double>(bc.data()[o * r + k]) * ac.data()[k * in + i];
      w[o * in + i] = static_cast<float>(w[o * in + i] + scale * d);
    }
}

Embedding::Embedding(int64_t num_embeddings, int64_t dim, Rng& rng) {
  ATTO_CHECK(num_embeddings > 0 && dim > 0, "Embedding: sizes must be positive, got {} x {}", num_embeddings, dim);
  weight = Tensor::randn({num_embeddings, dim}, rng);
  register_parameter("weight", weight, ParamKind::Embedding);
}

Norm::Norm(NormKind kind, int64_t dim, bool use_bias, float eps) : kind_(kind), eps_(eps) {
  ATTO_CHECK(dim > 0, "Norm: dim must be positive, got {}", dim);
  ATTO_CHECK(eps > 0.0f, "Norm: eps must be positive, got {}", eps);
  weight = Tensor::ones({dim});
  register_parameter("weight", weight, ParamKind::Norm);
  if (kind == NormKind::LayerNorm && use_bias) {
    bias = Tensor::zeros({dim});
    register_parameter("bias", bias, ParamKind::Norm);
  }
}

Dropout::Dropout(float p_) : p(p_) { ATTO_CHECK(p >= 0.0f && p < 1.0f, "dropout p = {} is outside [0, 1)", p); }

Tensor Dropout::forward(const Tensor& x) const {
  if (!training() || p == 0.0f) return x;
  ATTO_CHECK(rng() != nullptr, "Dropout in training mode needs an Rng: call set_rng(&rng) on the model");
  // A shard of a batch takes its rows' part of the whole batch's mask (Module::set_rng).
  const int64_t per_row = x.ndim() > 0 && x.size(0) > 0 ? x.numel() / x.size(0) : 0;
  return dropout(x, p, true, *rng(), first_row() * per_row);
}

Tensor project_residual(const Linear& proj, const Dropout& drop, const Tensor& h, const Tensor& residual) {
  if (!residual.defined()) return drop.forward(proj.forward(h));
  if (!drop.active()) return proj.forward_residual(h, residual);
  return add(residual, drop.forward(proj.forward(h)));
}

SinusoidalPositions::SinusoidalPositions(int64_t max_len, int64_t dim) {
  ATTO_CHECK(max_len > 0 && dim > 0, "SinusoidalPositions: sizes must be positive, got {} x {}", max_len, dim);
  table_ = Tensor::empty({max_len, dim});
  float* p = table_.data();
  for (int64_t pos = 0; pos < max_len; ++pos)
    for (int64_t i = 0; i < dim; i += 2) {
      // Angles in double so long tables stay accurate.
      const double angle = static_cast<double>(pos) / std::pow(10000.0, static_cast<double>(i) / dim);
      p[pos * dim + i] = static_cast<float>(std::sin(angle));
      if (i + 1 < dim) p[pos * dim + i + 1] = static_cast<float>(std::cos(angle));
    }
}

Tensor SinusoidalPositions::forward(int64_t T, int64_t offset) const {
  ATTO_CHECK(offset >= 0 && offset + T <= table_.size(0),
             "positions [{}, {}) exceed the sinusoidal table of {} positions", offset, offset + T, table_.size(0));
  return slice(table_, 0, offset, offset + T);
}

LearnedPositions::LearnedPositions(int64_t max_len, int64_t dim, Rng& rng) {
  ATTO_CHECK(max_len > 0 && dim > 0, "LearnedPositions: sizes must be positive, got {} x {}", max_len, dim);
  weight = Tensor::randn({max_len, dim}, rng);
  register_parameter("weight", weight, ParamKind::Embedding);
}

Tensor LearnedPositions::forward(int64_t T, int64_t offset) const {
  ATTO_CHECK(offset >= 0 && offset + T <= weight.size(0),
             "positions [{}, {}) exceed the block size {} of the learned position table", offset, offset + T,
             weight.size(0));
  std::vector<int32_t> ids(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) ids[t] = static_cast<int32_t>(offset + t);
  return embedding(weight, ids, {T});
}

}  // namespace atto::nn
