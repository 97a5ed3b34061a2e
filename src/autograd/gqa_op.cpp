// Grouped-query attention's key/value heads widened to one per query head, as a differentiable op.
// Copies only (memory-bound, a small part of a step beside the projections' GEMMs): one thread.
#include <algorithm>
#include <cstring>

#include "autograd/detail.h"
#include "autograd/ops.h"

namespace atto {

namespace {

struct GqaShape {
  int64_t rows, C, HS, NH, NKV;
  int64_t in_width() const { return C + 2 * NKV * HS; }
  // The column of row `in` that column j of the widened row reads.
  int64_t source(int64_t j) const {
    if (j < C) return j;
    const int64_t block = j < 2 * C ? 0 : 1, within = j - C - block * C;  // keys, then values
    const int64_t h = within / HS, kv = h / (NH / NKV);
    return C + block * NKV * HS + kv * HS + within % HS;
  }
};

void widen_rows(float* out, const float* in, const GqaShape& s) {
  for (int64_t r = 0; r < s.rows; ++r) {
    const float* x = in + r * s.in_width();
    float* y = out + r * 3 * s.C;
    std::memcpy(y, x, sizeof(float) * static_cast<size_t>(s.C));
    for (int64_t j = s.C; j < 3 * s.C; j += s.HS)
      std::memcpy(y + j, x + s.source(j), sizeof(float) * static_cast<size_t>(s.HS));
  }
}

// gin (+)= the widened gradient g summed back over each group, in a fixed order (head 0 of the
// group first).
void narrow_rows(float* gin, const float* g, const GqaShape& s, bool accumulate) {
  for (int64_t r = 0; r < s.rows; ++r) {
    float* x = gin + r * s.in_width();
    const float* y = g + r * 3 * s.C;
    if (!accumulate) std::fill(x, x + s.in_width(), 0.0f);
    for (int64_t j = 0; j < s.C; ++j) x[j] += y[j];
    for (int64_t j = s.C; j < 3 * s.C; j += s.HS) {
      float* dst = x + s.source(j);
      for (int64_t i = 0; i < s.HS; ++i) dst[i] += y[j + i];
    }
  }
}

}  // namespace

Tensor expand_kv_heads(const Tensor& qkv_in, int64_t n_heads, int64_t n_kv_heads) {
  ATTO_CHECK(n_heads > 0 && n_kv_heads > 0 && n_heads % n_kv_heads == 0,
             "expand_kv_heads: n_kv_heads ({}) must be positive and divide n_heads ({})", n_kv_heads, n_heads);
  ATTO_CHECK(qkv_in.ndim() == 3, "expand_kv_heads: qkv must be [B, T, C + 2 KV], got {}", shape_str(qkv_in.shape()));
  const int64_t width = qkv_in.size(2), group = n_heads / n_kv_heads;
  // width = C + 2 C / group  =>  C = width * group / (group + 2)
  const int64_t C = width * group / (group + 2);
  ATTO_CHECK(C > 0 && C % n_heads == 0 && C + 2 * (C / group) == width,
             "expand_kv_heads: width {} is not C + 2 KV for {} query and {} key/value heads", width, n_heads,
             n_kv_heads);
  const GqaShape s{qkv_in.size(0) * qkv_in.size(1), C, C / n_heads, n_heads, n_kv_heads};
  Tensor qkv = contiguous(qkv_in);
  Tensor out = Tensor::empty({qkv.size(0), qkv.size(1), 3 * C});
  widen_rows(out.data(), qkv.data(), s);
  if (any_requires_grad({&qkv})) {
    detail::mark_output(out);
    tape().record("expand_kv_heads", out, [qkv, out, s]() mutable {
      const float* g = detail::out_grad(out);
      if (!g) return;
      bool fresh = false;
      float* gx = detail::grad_ptr_fresh(qkv, &fresh);
      narrow_rows(gx, g, s, !fresh);
    });
  }
  return out;
}

}  // namespace atto
