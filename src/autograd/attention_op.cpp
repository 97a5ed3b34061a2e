// Fused scaled dot-product attention as a differentiable op.
//
// Each of q, k, v is a column block of a contiguous [B, T, W] "source" tensor: the plain op
// uses three sources of width C; attention_qkv one source [B, T, 3C] with blocks at 0, C, 2C;
// attention_q_kv a q source and a [B, Tk, 2C] kv source. The kernel reads the blocks through
// a leading dimension (W) and writes gradients the same way straight into the sources'
// gradient buffers, so the fused projection never needs split copies.
#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/detail.h"
#include "autograd/ops.h"
#include "kernels/kernels.h"

namespace atto {

namespace {

struct Block {
  Tensor src;       // contiguous [B, T, W]
  int64_t col = 0;  // first column of the block
};

kernels::AttentionDims make_dims(const char* op, const Block& q, const Block& k, const Block& v, int64_t C,
                                 const AttentionOptions& opt) {
  ATTO_CHECK(opt.n_heads > 0, "{}: n_heads must be positive, got {}", op, opt.n_heads);
  ATTO_CHECK(C % opt.n_heads == 0, "{}: model width {} is not divisible by n_heads {}", op, C, opt.n_heads);
  for (const Block* b : {&q, &k, &v})
    ATTO_CHECK(b->src.ndim() == 3, "{}: inputs must be [B, T, C], got {}", op, shape_str(b->src.shape()));
  const int64_t B = q.src.size(0), Tq = q.src.size(1), Tk = k.src.size(1);
  ATTO_CHECK(k.src.size(0) == B && v.src.size(0) == B && v.src.size(1) == Tk,
             "{}: batch or key length mismatch: q {}, k {}, v {}", op, shape_str(q.src.shape()),
             shape_str(k.src.shape()), shape_str(v.src.shape()));
  ATTO_CHECK(opt.key_mask.empty() || static_cast<int64_t>(opt.key_mask.size()) == B * Tk,
             "{}: key_mask has {} entries, expected B*Tk = {}*{}", op, opt.key_mask.size(), B, Tk);
  kernels::AttentionDims d;
  d.B = B;
  d.NH = opt.n_heads;
  d.Tq = Tq;
  d.Tk = Tk;
  d.HS = C / opt.n_heads;
  d.ldq = q.src.size(2);
  d.ldk = k.src.size(2);
  d.ldv = v.src.size(2);
  d.ldo = C;
  d.causal = opt.causal;
  d.scale = opt.scale > 0.0f ? opt.scale : 1.0f / std::sqrt(static_cast<float>(d.HS));
  return d;
}

Tensor attention_blocks(const char* op, Block q, Block k, Block v, int64_t C, const AttentionOptions& opt) {
  const kernels::AttentionDims d = make_dims(op, q, k, v, C, opt);
  Tensor out = Tensor::empty({d.B, d.Tq, C});
  Tensor lse = Tensor::empty({d.B, d.NH, d.Tq});
  const uint8_t* mask = opt.key_mask.empty() ? nullptr : opt.key_mask.data();
  kernels::attention_forward(out.data(), lse.data(), q.src.data() + q.col, k.src.data() + k.col, v.src.data() + v.col,
                             mask, d);
  if (any_requires_grad({&q.src, &k.src, &v.src})) {
    detail::mark_output(out);
    tape().record(op, out, [q, k, v, out, lse, d, key_mask = opt.key_mask]() mutable {
      const float* g = detail::out_grad(out);
      if (!g) return;
      // Gradient buffers. When every wanted source's buffer is new and its blocks tile it
      // exactly (qkv: 3 blocks of C; kv: 2; a plain source: 1), the kernel writes them instead
      // of accumulating into zeros; otherwise new buffers are zeroed and it accumulates.
      Block* blocks[3] = {&q, &k, &v};
      float* base[3] = {nullptr, nullptr, nullptr};
      std::vector<Tensor*> new_sources;  // sources whose gradient buffer was just created
      bool overwrite = true;
      for (int i = 0; i < 3; ++i) {
        Tensor& src = blocks[i]->src;
        int first = i;  // the first block of the same source
        for (int j = i - 1; j >= 0; --j)
          if (blocks[j]->src.data() == src.data()) first = j;
        if (first < i) {
          base[i] = base[first];
          if (blocks[first]->col == blocks[i]->col) overwrite = false;  // overlapping blocks
          continue;
        }
        bool fresh = false;
        base[i] = detail::grad_ptr_fresh(src, &fresh);
        if (base[i] == nullptr) continue;
        if (fresh)
          new_sources.push_back(&src);
        else
          overwrite = false;
        int64_t nblocks = 0;
        for (const Block* b : blocks) nblocks += b->src.data() == src.data() ? 1 : 0;
        if (nblocks * d.NH * d.HS != src.size(2)) overwrite = false;  // not tiled exactly
      }
      if (!overwrite)
        for (Tensor* src : new_sources) src->grad().fill(0.0f);
      kernels::AttentionDims dd = d;
      dd.accumulate = !overwrite;
      auto at = [&](int i) { return base[i] ? base[i] + blocks[i]->col : nullptr; };
      kernels::attention_backward(at(0), at(1), at(2), g, out.data(), lse.data(), q.src.data() + q.col,
                                  k.src.data() + k.col, v.src.data() + v.col,
                                  key_mask.empty() ? nullptr : key_mask.data(), dd);
    });
  }
  return out;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opt) {
  ATTO_CHECK(q.ndim() == 3 && k.ndim() == 3 && v.ndim() == 3 && q.size(2) == k.size(2) && q.size(2) == v.size(2),
             "scaled_dot_product_attention: q, k, v must be [B, T, C] with equal C, got {}, {}, {}",
             shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape()));
  return attention_blocks("attention", {contiguous(q), 0}, {contiguous(k), 0}, {contiguous(v), 0}, q.size(2), opt);
}

Tensor attention_qkv(const Tensor& qkv_in, const AttentionOptions& opt) {
  ATTO_CHECK(qkv_in.ndim() == 3 && qkv_in.size(2) % 3 == 0, "attention_qkv: qkv must be [B, T, 3C], got {}",
             shape_str(qkv_in.shape()));
  Tensor qkv = contiguous(qkv_in);
  const int64_t C = qkv.size(2) / 3;
  return attention_blocks("attention_qkv", {qkv, 0}, {qkv, C}, {qkv, 2 * C}, C, opt);
}

Tensor attention_q_kv(const Tensor& q_in, const Tensor& kv_in, const AttentionOptions& opt) {
  ATTO_CHECK(q_in.ndim() == 3 && kv_in.ndim() == 3 && kv_in.size(2) == 2 * q_in.size(2),
             "attention_q_kv: q must be [B, Tq, C] and kv [B, Tk, 2C], got {} and {}", shape_str(q_in.shape()),
             shape_str(kv_in.shape()));
  Tensor q = contiguous(q_in), kv = contiguous(kv_in);
  const int64_t C = q.size(2);
  return attention_blocks("attention_q_kv", {q, 0}, {kv, 0}, {kv, C}, C, opt);
}

Tensor attention_decode(const Tensor& qkv_in, Tensor& kv_cache, int64_t past_len, const AttentionOptions& opt) {
  ATTO_CHECK(!any_requires_grad({&qkv_in}), "attention_decode is for inference: call it under NoGradGuard");
  ATTO_CHECK(qkv_in.ndim() == 3 && qkv_in.size(2) % 3 == 0, "attention_decode: qkv must be [B, Tn, 3C], got {}",
             shape_str(qkv_in.shape()));
  Tensor qkv = qkv_in.contiguous();
  const int64_t B = qkv.size(0), Tn = qkv.size(1), C = qkv.size(2) / 3;
  ATTO_CHECK(kv_cache.ndim() == 3 && kv_cache.size(0) == B && kv_cache.size(2) == 2 * C && kv_cache.is_contiguous(),
             "attention_decode: cache must be a contiguous [{}, max_len, {}], got {}", B, 2 * C,
             shape_str(kv_cache.shape()));
  const int64_t max_len = kv_cache.size(1);
  ATTO_CHECK(past_len >= 0 && past_len + Tn <= max_len,
             "attention_decode: {} cached + {} new positions exceed the "
             "cache length {}",
             past_len, Tn, max_len);
  ATTO_CHECK(opt.key_mask.empty(), "attention_decode: key padding masks are not supported with a KV cache");
  ATTO_CHECK(opt.n_heads > 0 && C % opt.n_heads == 0, "attention_decode: width {} is not divisible by n_heads {}", C,
             opt.n_heads);
  // Append the new keys and values (columns C..3C of qkv) to the cache.
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < Tn; ++t)
      std::copy_n(qkv.data() + (b * Tn + t) * 3 * C + C, 2 * C, kv_cache.data() + (b * max_len + past_len + t) * 2 * C);
  kernels::AttentionDims d;
  d.B = 1;  // one call per sequence: the cache's batch stride (max_len rows) differs from Tk rows
  d.NH = opt.n_heads;
  d.Tq = Tn;
  d.Tk = past_len + Tn;
  d.HS = C / opt.n_heads;
  d.ldq = 3 * C;
  d.ldk = d.ldv = 2 * C;
  d.ldo = C;
  d.causal = opt.causal;
  d.scale = opt.scale > 0.0f ? opt.scale : 1.0f / std::sqrt(static_cast<float>(d.HS));
  Tensor out = Tensor::empty({B, Tn, C});
  Tensor lse = Tensor::empty({d.NH, Tn});
  for (int64_t b = 0; b < B; ++b) {
    const float* kv = kv_cache.data() + b * max_len * 2 * C;
    kernels::attention_forward(out.data() + b * Tn * C, lse.data(), qkv.data() + b * Tn * 3 * C, kv, kv + C, nullptr,
                               d);
  }
  return out;
}

Tensor attention_weights(const Tensor& q_in, const Tensor& k_in, const AttentionOptions& opt) {
  NoGradGuard no_grad;
  Tensor q = contiguous(q_in).detach(), k = contiguous(k_in).detach();
  ATTO_CHECK(q.ndim() == 3 && k.ndim() == 3 && q.size(2) == k.size(2),
             "attention_weights: q and k must be [B, T, C] with equal C, got {} and {}", shape_str(q.shape()),
             shape_str(k.shape()));
  const int64_t C = q.size(2);
  const kernels::AttentionDims d = make_dims("attention_weights", {q, 0}, {k, 0}, {k, 0}, C, opt);
  Tensor probs = Tensor::empty({d.B, d.NH, d.Tq, d.Tk});
  kernels::attention_probs(probs.data(), q.data(), k.data(), opt.key_mask.empty() ? nullptr : opt.key_mask.data(), d);
  return probs;
}

}  // namespace atto
