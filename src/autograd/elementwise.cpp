// Elementwise ops: broadcasting binary arithmetic, unary math, activations, dropout.
#include <cmath>
#include <cstring>

#include "autograd/detail.h"
#include "autograd/ops.h"
#include "kernels/kernels.h"

namespace atto {

using detail::for_each_strided;

namespace {

// ---- broadcasting -------------------------------------------------------------------------
Shape broadcast_shape(const char* op, const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    ATTO_CHECK(da == db || da == 1 || db == 1, "{}: shapes {} and {} cannot be broadcast together", op, shape_str(a),
               shape_str(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Strides that read `shape`/`strides` as if broadcast to `out` (0 on stretched dimensions).
Shape broadcast_strides(const Shape& shape, const Shape& strides, const Shape& out) {
  Shape s(out.size(), 0);
  const size_t lead = out.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) s[lead + i] = shape[i] == 1 ? 0 : strides[i];
  return s;
}

enum class BinOp { Add, Sub, Mul, Div };

float apply(BinOp op, float a, float b) {
  switch (op) {
    case BinOp::Add: return a + b;
    case BinOp::Sub: return a - b;
    case BinOp::Mul: return a * b;
    case BinOp::Div: return a / b;
  }
  return 0.0f;
}

// d(out)/d(a) * g and d(out)/d(b) * g
float partial_a(BinOp op, float a, float b, float g) {
  switch (op) {
    case BinOp::Add:
    case BinOp::Sub: return g;
    case BinOp::Mul: return g * b;
    case BinOp::Div: return g / b;
  }
  return 0.0f;
}
float partial_b(BinOp op, float a, float b, float g) {
  switch (op) {
    case BinOp::Add: return g;
    case BinOp::Sub: return -g;
    case BinOp::Mul: return g * a;
    case BinOp::Div: return -g * a / (b * b);
  }
  return 0.0f;
}

const char* bin_name(BinOp op) {
  switch (op) {
    case BinOp::Add: return "add";
    case BinOp::Sub: return "sub";
    case BinOp::Mul: return "mul";
    case BinOp::Div: return "div";
  }
  return "?";
}

// The common fast case: a and b contiguous and b's shape a suffix of a's (same shape, or b
// broadcast over a's leading dimensions, like positions over a batch). Returns b's size, or 0.
int64_t suffix_broadcast(const Tensor& a, const Tensor& b) {
  if (!a.is_contiguous() || !b.is_contiguous() || b.ndim() > a.ndim() || b.numel() == 0) return 0;
  for (int i = 1; i <= b.ndim(); ++i)
    if (b.shape()[b.ndim() - i] != a.shape()[a.ndim() - i]) return 0;
  return b.numel();
}

Tensor binary_suffix(BinOp op, const Tensor& a, const Tensor& b, int64_t inner) {
  const int64_t outer = a.numel() / inner;
  Tensor out = Tensor::empty(a.shape());
  if (op == BinOp::Add) {  // b added to each of a's `outer` rows
    for (int64_t o = 0; o < outer; ++o)
      kernels::add_forward(out.data() + o * inner, a.data() + o * inner, b.data(), inner);
  } else {
    const float* pa = a.data();
    const float* pb = b.data();
    float* po = out.data();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) po[o * inner + i] = apply(op, pa[o * inner + i], pb[i]);
  }
  if (any_requires_grad({&a, &b})) {
    detail::mark_output(out);
    tape().record(bin_name(op), out, [op, a, b, out, outer, inner]() mutable {
      const float* g = detail::out_grad(out);
      if (!g) return;
      if (op == BinOp::Add) {
        // Same shapes (a residual): both get g. Out's gradient is released once this node has
        // run (Tape::record), so the first operand without a gradient yet takes the buffer
        // itself instead of a copy; a second one gets a copy (the first one's later += must not
        // reach it). b broadcast over a's rows (positions over a batch): b gets the sum of g's
        // rows, in order, before a may take g's buffer.
        if (outer > 1) {
          if (float* gb = detail::grad_ptr(b))
            for (int64_t o = 0; o < outer; ++o) kernels::add_forward(gb, gb, g + o * inner, inner);
        }
        const bool a_took = detail::pass_gradient(a, out, g, outer * inner, /*may_take=*/true);
        if (outer == 1) detail::pass_gradient(b, out, g, inner, /*may_take=*/!a_took);
        return;
      }
      float* ga = detail::grad_ptr(a);
      float* gb = detail::grad_ptr(b);
      const float* pa = a.data();
      const float* pb = b.data();
      for (int64_t o = 0; o < outer; ++o)  // serial over o: b's gradient sums in a fixed order
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t k = o * inner + i;
          if (ga) ga[k] += partial_a(op, pa[k], pb[i], g[k]);
          if (gb) gb[i] += partial_b(op, pa[k], pb[i], g[k]);
        }
    });
  }
  return out;
}

Tensor binary(BinOp op, const Tensor& a, const Tensor& b) {
  const char* name = bin_name(op);
  const Shape shape = broadcast_shape(name, a.shape(), b.shape());
  if (const int64_t inner = suffix_broadcast(a, b); inner > 0 && shape == a.shape())
    return binary_suffix(op, a, b, inner);
  Tensor out = Tensor::empty(shape);
  {
    const Shape sa = broadcast_strides(a.shape(), a.strides(), shape);
    const Shape sb = broadcast_strides(b.shape(), b.strides(), shape);
    const float* pa = a.data();
    const float* pb = b.data();
    float* po = out.data();
    for_each_strided<2>(shape, {&sa, &sb},
                        [&](int64_t k, const std::array<int64_t, 2>& o) { po[k] = apply(op, pa[o[0]], pb[o[1]]); });
  }
  if (any_requires_grad({&a, &b})) {
    detail::mark_output(out);
    tape().record(name, out, [op, a, b, out]() mutable {
      const float* g = detail::out_grad(out);
      if (!g) return;
      float* ga = detail::grad_ptr(a);
      float* gb = detail::grad_ptr(b);
      const Shape& shape = out.shape();
      // Gradient buffers are contiguous in the operand's own shape; broadcast them too.
      const Shape sa = broadcast_strides(a.shape(), a.strides(), shape);
      const Shape sb = broadcast_strides(b.shape(), b.strides(), shape);
      const Shape ga_s = broadcast_strides(a.shape(), contiguous_strides(a.shape()), shape);
      const Shape gb_s = broadcast_strides(b.shape(), contiguous_strides(b.shape()), shape);
      const float* pa = a.data();
      const float* pb = b.data();
      for_each_strided<4>(shape, {&sa, &sb, &ga_s, &gb_s}, [&](int64_t k, const std::array<int64_t, 4>& o) {
        if (ga) ga[o[2]] += partial_a(op, pa[o[0]], pb[o[1]], g[k]);
        if (gb) gb[o[3]] += partial_b(op, pa[o[0]], pb[o[1]], g[k]);
      });
    });
  }
  return out;
}

// ---- unary --------------------------------------------------------------------------------
// out = f(x) elementwise; backward dx += g * df(x, out).
template <typename F, typename DF>
Tensor unary(const char* name, const Tensor& x_in, F f, DF df) {
  Tensor x = contiguous(x_in);
  Tensor out = Tensor::empty(x.shape());
  const float* px = x.data();
  float* po = out.data();
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) po[i] = f(px[i]);
  if (any_requires_grad({&x})) {
    detail::mark_output(out);
    tape().record(name, out, [x, out, df, n]() mutable {
      const float* g = detail::out_grad(out);
      if (!g) return;
      float* gx = detail::grad_ptr(x);
      const float* px = x.data();
      const float* po = out.data();
      for (int64_t i = 0; i < n; ++i) gx[i] += g[i] * df(px[i], po[i]);
    });
  }
  return out;
}

// GELU (erf): the backward recomputes Phi(x) from the input (kernels::gelu_erf_backward),
// writing the input's gradient directly when its buffer is new.
Tensor gelu_erf(const Tensor& x_in) {
  Tensor x = contiguous(x_in);
  Tensor out = Tensor::empty(x.shape());
  kernels::gelu_erf_forward(out.data(), x.data(), x.numel());
  if (any_requires_grad({&x})) {
    detail::mark_output(out);
    tape().record("gelu_erf", out, [x, out]() mutable {
      const float* g = detail::out_grad(out);
      if (!g) return;
      bool fresh = false;
      float* gx = detail::grad_ptr_fresh(x, &fresh);
      kernels::gelu_erf_backward_ex(gx, g, x.data(), x.numel(), !fresh);
    });
  }
  return out;
}

using FwdKernel = void (*)(float*, const float*, int64_t);
using BwdKernel = void (*)(float*, const float*, const float*, int64_t);

// An activation with a forward and backward kernel of the form f(out, inp, n) and
// df(dinp, dout, inp, n).
Tensor activation(const char* name, const Tensor& x_in, FwdKernel fwd, BwdKernel bwd) {
  Tensor x = contiguous(x_in);
  Tensor out = Tensor::empty(x.shape());
  fwd(out.data(), x.data(), x.numel());
  if (any_requires_grad({&x})) {
    detail::mark_output(out);
    tape().record(name, out, [x, out, bwd]() mutable {
      const float* g = detail::out_grad(out);
      if (!g) return;
      bwd(detail::grad_ptr(x), g, x.data(), x.numel());
    });
  }
  return out;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary(BinOp::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinOp::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinOp::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinOp::Div, a, b); }

Tensor scale(const Tensor& x, float s) {
  return unary(
      "scale", x, [s](float v) { return v * s; }, [s](float, float) { return s; });
}
Tensor add_scalar(const Tensor& x, float s) {
  return unary(
      "add_scalar", x, [s](float v) { return v + s; }, [](float, float) { return 1.0f; });
}
Tensor exp(const Tensor& x) {
  return unary(
      "exp", x, [](float v) { return std::exp(v); }, [](float, float o) { return o; });
}
Tensor log(const Tensor& x) {
  return unary(
      "log", x, [](float v) { return std::log(v); }, [](float v, float) { return 1.0f / v; });
}
Tensor sqrt(const Tensor& x) {
  return unary(
      "sqrt", x, [](float v) { return std::sqrt(v); }, [](float, float o) { return 0.5f / o; });
}
Tensor tanh(const Tensor& x) {
  return unary(
      "tanh", x, [](float v) { return std::tanh(v); }, [](float, float o) { return 1.0f - o * o; });
}

Tensor relu(const Tensor& x) { return activation("relu", x, kernels::relu_forward, kernels::relu_backward); }
Tensor silu(const Tensor& x) { return activation("silu", x, kernels::silu_forward, kernels::silu_backward); }
Tensor gelu(const Tensor& x, GeluApprox approx) {
  if (approx == GeluApprox::Tanh)
    return activation("gelu_tanh", x, kernels::gelu_tanh_forward, kernels::gelu_tanh_backward);
  return gelu_erf(x);
}

Tensor swiglu(const Tensor& gate_in, const Tensor& up_in) {
  ATTO_CHECK(gate_in.shape() == up_in.shape(), "swiglu: gate shape {} differs from up shape {}",
             shape_str(gate_in.shape()), shape_str(up_in.shape()));
  Tensor gate = contiguous(gate_in), up = contiguous(up_in);
  Tensor out = Tensor::empty(gate.shape());
  kernels::swiglu_forward(out.data(), gate.data(), up.data(), out.numel());
  if (any_requires_grad({&gate, &up})) {
    detail::mark_output(out);
    tape().record("swiglu", out, [gate, up, out]() mutable {
      const float* g = detail::out_grad(out);
      if (!g) return;
      kernels::swiglu_backward(detail::grad_ptr(gate), detail::grad_ptr(up), g, gate.data(), up.data(), out.numel());
    });
  }
  return out;
}

Tensor dropout(const Tensor& x_in, float p, bool training, Rng& rng, int64_t first_in) {
  ATTO_CHECK(p >= 0.0f && p < 1.0f, "dropout: p = {} is outside [0, 1)", p);
  ATTO_CHECK(first_in >= 0, "dropout: first = {} must be >= 0", first_in);
  const auto first = static_cast<uint64_t>(first_in);
  if (!training || p == 0.0f) return x_in;
  Tensor x = contiguous(x_in);
  const uint64_t seed = rng.next_u64();
  Tensor out = Tensor::empty(x.shape());
  kernels::dropout_forward(out.data(), x.data(), x.numel(), p, seed, first);
  if (any_requires_grad({&x})) {
    detail::mark_output(out);
    tape().record("dropout", out, [x, out, p, seed, first]() mutable {
      const float* g = detail::out_grad(out);
      if (!g) return;
      kernels::dropout_backward(detail::grad_ptr(x), g, x.numel(), p, seed, first);
    });
  }
  return out;
}

}  // namespace atto
