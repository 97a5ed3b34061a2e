// atto/tensor/tensor.h: float32 tensors with shape, strides and shared storage.
//
//   atto::Rng rng(0);
//   atto::Tensor x = atto::Tensor::randn({2, 3}, rng);     // [2, 3], N(0, 1)
//   atto::Tensor t = x.as_strided({3, 2}, {1, 3}, 0);       // a view: shares x's storage
//   float v = t.at({2, 1});                                 // == x.at({1, 2})
//   atto::Tensor c = t.contiguous();                        // a copy in row-major order
//
// Conventions
// - Element (i0, i1, ...) lives at storage[offset + i0*stride0 + i1*stride1 + ...].
//   Strides count elements, not bytes. A fresh tensor is row-major ("contiguous").
// - Copying a Tensor copies a handle: both handles name the same tensor (as in PyTorch).
// - This layer knows nothing of autograd ops; it only carries the per-tensor autograd state
//   (requires_grad and the accumulated gradient), which the autograd layer fills in. The
//   differentiable views (reshape, transpose, slice) are atto::reshape etc. in autograd/ops.h.
// - Buffers come from a caching allocator: a steady-state training step reuses the buffers of
//   the previous one instead of asking the system for memory.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "tensor/rng.h"

namespace atto {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);
Shape contiguous_strides(const Shape& shape);
std::string shape_str(const Shape& shape);  // "[2, 3]"

// A float buffer owned by the caching allocator. Contents are uninitialised on creation.
class Storage {
 public:
  explicit Storage(size_t n);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t size() const { return n_; }

 private:
  float* data_ = nullptr;
  size_t n_ = 0;    // floats requested
  size_t cap_ = 0;  // floats in the buffer (>= n_: its size class, or a larger cached one)
};

// Statistics of the caching allocator (for tests and benchmarks).
struct AllocatorStats {
  uint64_t system_allocs = 0;  // buffers obtained from the system
  uint64_t cache_hits = 0;     // buffers served from the cache
  uint64_t bytes_cached = 0;   // bytes held in the cache, not in use
  uint64_t bytes_in_use = 0;
  uint64_t peak_bytes_in_use = 0;
};
AllocatorStats allocator_stats();

// WeightStorage kept in a block-quantized layout (ggml's q8_0, q4_0, Q4_K, Q5_K or Q6_K rows: kernels/quant.h) instead
// of floats, for inference: a matrix of rows x cols values as rows of row_bytes bytes each.
struct QuantizedData {
  int type = 0;           // ggml's type id (kernels::QuantType)
  int layout = 0;         // how the rows are arranged (kernels::QuantLayout: 0 as in the file)
  int64_t row_bytes = 0;  // bytes of one row
  std::vector<uint8_t> bytes;
};
void allocator_release_cached();  // return all cached buffers to the system

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor; defined() is false

  // ---- creation ----
  static Tensor empty(const Shape& shape);  // uninitialised
  static Tensor zeros(const Shape& shape);
  static Tensor ones(const Shape& shape);
  static Tensor full(const Shape& shape, float value);
  static Tensor from_vector(const Shape& shape, const std::vector<float>& values);
  static Tensor scalar(float value) { return from_vector({}, {value}); }
  static Tensor randn(const Shape& shape, Rng& rng, float mean = 0.0f, float std = 1.0f);
  static Tensor rand(const Shape& shape, Rng& rng, float lo = 0.0f, float hi = 1.0f);
  // A [rows, cols] matrix held as quantized rows (no floats): only the linear layers and the
  // embedding lookup read it (autograd/ops.h: they compute on the blocks); data() refuses it.
  static Tensor quantized(const Shape& shape, std::shared_ptr<const QuantizedData> q);

  // ---- shape ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  const Shape& strides() const;
  int64_t offset() const;
  int ndim() const { return static_cast<int>(shape().size()); }
  int64_t size(int dim) const;  // negative dims count from the end
  int64_t stride(int dim) const;
  int64_t numel() const;
  bool is_contiguous() const;
  int wrap_dim(int dim) const;  // -1 -> ndim-1, with a range check

  // ---- quantized weights ----
  const QuantizedData* quantized() const;  // nullptr for a tensor of floats
  // This tensor (every handle to it) takes src's quantized rows (same shape) and frees its floats.
  void adopt_quantized(const Tensor& src);

  // ---- data ----
  // Pointer to element (0, 0, ...). For a non-contiguous tensor, index with strides(). A
  // quantized tensor has no floats: an error names it.
  float* data();
  const float* data() const;
  const std::shared_ptr<Storage>& storage() const;
  float at(std::initializer_list<int64_t> index) const;
  float& at(std::initializer_list<int64_t> index);
  float item() const;                    // the value of a one-element tensor
  std::vector<float> to_vector() const;  // row-major copy of the logical contents

  // ---- non-differentiable views and copies (the autograd layer builds on these) ----
  Tensor as_strided(const Shape& shape, const Shape& strides, int64_t offset) const;
  Tensor contiguous() const;          // *this if already contiguous, else a row-major copy
  Tensor clone() const;               // always a new row-major copy
  void copy_from(const Tensor& src);  // same shape; any strides on either side
  void fill(float value);
  Tensor detach() const;  // same data, no autograd state
  bool shares_storage(const Tensor& other) const;
  bool same(const Tensor& other) const { return impl_ == other.impl_; }
  const void* id() const { return impl_.get(); }  // the identity same() compares (nullptr: undefined)

  // ---- autograd state ----
  bool requires_grad() const;
  Tensor& set_requires_grad(bool on);
  Tensor grad() const;    // undefined until a gradient has been accumulated
  Tensor& ensure_grad();  // allocate a zero gradient (contiguous, same shape) if absent
  void zero_grad();       // set the gradient to zero if it exists
  void clear_grad();      // drop the gradient buffer
  void set_grad(const Tensor& g);

 private:
  struct Impl;
  explicit Tensor(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

// While one lives on this thread, Tensor::rand and Tensor::randn draw nothing and leave their
// values uninitialised (models/gpt.cpp skips its initialisation too): for a model whose every
// weight a file overwrites at once, so that weights about to be replaced by quantized rows never
// take memory (untouched pages stay unmapped).
class NoInitScope {
 public:
  NoInitScope();
  ~NoInitScope();
  NoInitScope(const NoInitScope&) = delete;
  NoInitScope& operator=(const NoInitScope&) = delete;
  static bool active();

 private:
  bool prev_;
};

// Max |a - b| over all elements; shapes must match.
float max_abs_diff(const Tensor& a, const Tensor& b);

}  // namespace atto
