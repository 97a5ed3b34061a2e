// Views (reshape, transpose, permute, slice) and copies (contiguous, concat).
//
// A view's output shares the input's storage. Its backward applies the same view to the
// input's gradient buffer (contiguous, input-shaped) and adds the output gradient through it:
// the gradient lands on exactly the elements the view reads.
#include <functional>
#include <numeric>

#include "autograd/detail.h"
#include "autograd/ops.h"

namespace atto {

using detail::for_each_strided;

namespace {

struct Layout {
  Shape shape, strides;
  int64_t offset;
};
using ViewFn = std::function<Layout(const Layout&)>;

// dst (strided view) += src (any strides), same shape.
void add_into(Tensor dst, const Tensor& src) {
  float* d = dst.data();
  const float* s = src.data();
  const std::array<const Shape*, 2> st{&dst.strides(), &src.strides()};
  for_each_strided<2>(dst.shape(), st, [&](int64_t, const std::array<int64_t, 2>& o) { d[o[0]] += s[o[1]]; });
}

Tensor make_view(const Tensor& x, const char* op, const ViewFn& fn) {
  const Layout l = fn(Layout{x.shape(), x.strides(), x.offset()});
  Tensor out = x.detach().as_strided(l.shape, l.strides, l.offset);
  if (any_requires_grad({&x})) {
    detail::mark_output(out);
    tape().record(op, out, [x, out, fn]() mutable {
      if (!detail::out_grad(out)) return;
      detail::grad_ptr(x);
      Tensor gx = x.grad();
      const Layout gl = fn(Layout{gx.shape(), gx.strides(), gx.offset()});
      add_into(gx.as_strided(gl.shape, gl.strides, gl.offset), out.grad());
    });
  }
  return out;
}

}  // namespace

Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor out = x.detach().clone();
  if (any_requires_grad({&x})) {
    detail::mark_output(out);
    tape().record("contiguous", out, [x, out]() mutable {
      if (!detail::out_grad(out)) return;
      detail::grad_ptr(x);
      add_into(x.grad(), out.grad());
    });
  }
  return out;
}

Tensor reshape(const Tensor& x, Shape shape) {
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      ATTO_CHECK(infer < 0, "reshape: more than one -1 in the target shape {}", shape_str(shape));
      infer = static_cast<int>(i);
    } else {
      ATTO_CHECK(shape[i] >= 0, "reshape: negative dimension in the target shape {}", shape_str(shape));
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    ATTO_CHECK(known > 0 && x.numel() % known == 0, "reshape: cannot reshape {} into {}", shape_str(x.shape()),
               shape_str(shape));
    shape[infer] = x.numel() / known;
  }
  ATTO_CHECK(shape_numel(shape) == x.numel(), "reshape: cannot reshape {} ({} elements) into {} ({} elements)",
             shape_str(x.shape()), x.numel(), shape_str(shape), shape_numel(shape));
  Tensor src = contiguous(x);
  return make_view(src, "reshape", [shape](const Layout& l) {
    return Layout{shape, contiguous_strides(shape), l.offset};
  });
}

Tensor transpose(const Tensor& x, int dim0, int dim1) {
  const int a = x.wrap_dim(dim0), b = x.wrap_dim(dim1);
  return make_view(x, "transpose", [a, b](const Layout& l) {
    Layout o = l;
    std::swap(o.shape[a], o.shape[b]);
    std::swap(o.strides[a], o.strides[b]);
    return o;
  });
}

Tensor permute(const Tensor& x, const std::vector<int>& dims) {
  ATTO_CHECK(static_cast<int>(dims.size()) == x.ndim(), "permute: {} dims given for a tensor of shape {}", dims.size(),
             shape_str(x.shape()));
  std::vector<int> d(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    d[i] = x.wrap_dim(dims[i]);
    ATTO_CHECK(!seen[d[i]], "permute: dimension {} repeated in ({})", dims[i], fmt::join(dims, ", "));
    seen[d[i]] = true;
  }
  return make_view(x, "permute", [d](const Layout& l) {
    Layout o = l;
    for (size_t i = 0; i < d.size(); ++i) {
      o.shape[i] = l.shape[d[i]];
      o.strides[i] = l.strides[d[i]];
    }
    return o;
  });
}

Tensor slice(const Tensor& x, int dim, int64_t start, int64_t end) {
  const int d = x.wrap_dim(dim);
  ATTO_CHECK(0 <= start && start <= end && end <= x.shape()[d],
             "slice: range [{}, {}) is outside dimension {} of size {} (shape {})", start, end, dim, x.shape()[d],
             shape_str(x.shape()));
  return make_view(x, "slice", [d, start, end](const Layout& l) {
    Layout o = l;
    o.shape[d] = end - start;
    o.offset += start * l.strides[d];
    return o;
  });
}

Tensor concat(const std::vector<Tensor>& xs, int dim) {
  ATTO_CHECK(!xs.empty(), "concat: no tensors given");
  const int d = xs[0].wrap_dim(dim);
  Shape shape = xs[0].shape();
  int64_t total = 0;
  for (const Tensor& t : xs) {
    ATTO_CHECK(t.ndim() == xs[0].ndim(), "concat: shapes {} and {} differ in rank", shape_str(xs[0].shape()),
               shape_str(t.shape()));
    for (int i = 0; i < t.ndim(); ++i)
      ATTO_CHECK(i == d || t.shape()[i] == shape[i], "concat along dim {}: shapes {} and {} differ off that dim", dim,
                 shape_str(xs[0].shape()), shape_str(t.shape()));
    total += t.shape()[d];
  }
  shape[d] = total;
  Tensor out = Tensor::empty(shape);
  int64_t at = 0;
  std::vector<int64_t> starts;
  for (const Tensor& t : xs) {
    starts.push_back(at);
    Shape st = out.strides();
    out.as_strided(t.shape(), st, out.offset() + at * st[d]).copy_from(t);
    at += t.shape()[d];
  }
  std::vector<const Tensor*> ptrs;
  bool need = false;
  for (const Tensor& t : xs) need = need || any_requires_grad({&t});
  if (need) {
    detail::mark_output(out);
    tape().record("concat", out, [xs, out, starts, d]() mutable {
      if (!detail::out_grad(out)) return;
      Tensor g = out.grad();
      for (size_t i = 0; i < xs.size(); ++i) {
        if (!detail::grad_ptr(xs[i])) continue;
        add_into(xs[i].grad(), g.as_strided(xs[i].shape(), g.strides(), g.offset() + starts[i] * g.strides()[d]));
      }
    });
  }
  return out;
}

}  // namespace atto
