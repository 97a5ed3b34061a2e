#include "tensor/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "base/error.h"
#include "base/memory.h"

namespace atto {

// ============================================================================================
// Caching allocator: free lists of 64-byte aligned buffers by size class, best fit.
// ============================================================================================
namespace {

// Size classes: small buffers round up to 16 floats; larger ones to one of 8 steps per power of
// two (at most 12.5% waste).
size_t size_class(size_t n) {
  if (n <= 1024) return std::max<size_t>(16, (n + 15) / 16 * 16);
  size_t p = 1;
  while (p * 2 <= n) p *= 2;  // p <= n < 2p
  const size_t step = p / 8;
  return (n + step - 1) / step * step;
}

// A request is served by the smallest cached buffer of its class up to kMaxFit times its class.
// Exact classes alone are not enough when shapes vary from step to step (seq2seq batches of
// varying lengths): every new size would add a whole step's worth of buffers to the cache, and a
// Multi30k run grew to 6 GB resident. Best fit bounds the cache by the largest step instead.
constexpr size_t kMaxFit = 2;

struct Allocator {
  std::mutex mu;
  std::map<size_t, std::vector<float*>> free_lists;  // key: capacity in floats; no empty lists
  AllocatorStats stats;
#ifdef ATTO_NO_ALLOC_CACHE
  static constexpr bool kCache = false;
#else
  static constexpr bool kCache = true;
#endif

  // Returns a buffer of at least n floats; *cap receives its capacity (what put() needs).
  float* get(size_t n, size_t* cap) {
    n = size_class(n);
    std::lock_guard<std::mutex> lock(mu);
    float* p = nullptr;
    auto it = free_lists.lower_bound(n);
    if (it != free_lists.end() && it->first <= kMaxFit * n) {
      *cap = it->first;
      p = it->second.back();
      it->second.pop_back();
      if (it->second.empty()) free_lists.erase(it);
      stats.cache_hits++;
      stats.bytes_cached -= *cap * sizeof(float);
    } else {
      *cap = n;
      stats.system_allocs++;
      p = static_cast<float*>(alloc_buffer(n * sizeof(float)));
      if (!p && !free_lists.empty()) {  // the cache's buffers back to the system, and once more
        release_locked();
        p = static_cast<float*>(alloc_buffer(n * sizeof(float)));
      }
      if (!p)
        fail("out of memory allocating a tensor of {} floats ({:.1f} GB): use a smaller model, batch or block size", n,
             static_cast<double>(n) * sizeof(float) / 1e9);
    }
    stats.bytes_in_use += *cap * sizeof(float);
    stats.peak_bytes_in_use = std::max(stats.peak_bytes_in_use, stats.bytes_in_use);
    return p;
  }

  // Never throws (it runs in destructors, also while an out-of-memory error unwinds): a buffer
  // the cache cannot record goes back to the system.
  void put(float* p, size_t cap) noexcept {
    std::lock_guard<std::mutex> lock(mu);
    stats.bytes_in_use -= cap * sizeof(float);
    if (kCache) {
      try {
        free_lists[cap].push_back(p);
        stats.bytes_cached += cap * sizeof(float);
        return;
      } catch (const std::bad_alloc&) {
      }
    }
    std::free(p);
  }

  void release() {
    std::lock_guard<std::mutex> lock(mu);
    release_locked();
  }
  void release_locked() {
    for (auto& [n, list] : free_lists)
      for (float* p : list) std::free(p);
    free_lists.clear();
    stats.bytes_cached = 0;
  }
};

Allocator& allocator() {
  static Allocator* a = new Allocator();  // never destroyed: storages may outlive main()
  return *a;
}

}  // namespace

Storage::Storage(size_t n) : n_(n) { data_ = allocator().get(n, &cap_); }
Storage::~Storage() { allocator().put(data_, cap_); }

AllocatorStats allocator_stats() {
  std::lock_guard<std::mutex> lock(allocator().mu);
  return allocator().stats;
}
void allocator_release_cached() { allocator().release(); }

// ============================================================================================
// Shapes
// ============================================================================================
int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape s(shape.size());
  int64_t acc = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

std::string shape_str(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// ============================================================================================
// Tensor
// ============================================================================================
struct Tensor::Impl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;
  int64_t offset = 0;
  bool requires_grad = false;
  std::shared_ptr<Impl> grad;
  std::shared_ptr<const QuantizedData> quant;  // set: the values are these rows, storage is empty
};

namespace {
void check_shape(const Shape& shape) {
  for (int64_t d : shape) ATTO_CHECK(d >= 0, "tensor shape {} has a negative dimension", shape_str(shape));
}
}  // namespace

Tensor Tensor::empty(const Shape& shape) {
  check_shape(shape);
  auto impl = std::make_shared<Impl>();
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(shape_numel(shape)));
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape) {
  Tensor t = empty(shape);
  std::memset(t.data(), 0, sizeof(float) * static_cast<size_t>(t.numel()));
  return t;
}
Tensor Tensor::ones(const Shape& shape) { return full(shape, 1.0f); }

Tensor Tensor::full(const Shape& shape, float value) {
  Tensor t = empty(shape);
  std::fill_n(t.data(), t.numel(), value);
  return t;
}

Tensor Tensor::from_vector(const Shape& shape, const std::vector<float>& values) {
  ATTO_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape),
             "from_vector: {} values do not fill shape {} ({} elements)", values.size(), shape_str(shape),
             shape_numel(shape));
  Tensor t = empty(shape);
  std::copy(values.begin(), values.end(), t.data());
  return t;
}

namespace {
thread_local bool t_no_init = false;
}  // namespace
NoInitScope::NoInitScope() : prev_(t_no_init) { t_no_init = true; }
NoInitScope::~NoInitScope() { t_no_init = prev_; }
bool NoInitScope::active() { return t_no_init; }

Tensor Tensor::randn(const Shape& shape, Rng& rng, float mean, float std) {
  Tensor t = empty(shape);
  if (t_no_init) return t;
  float* p = t.data();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = rng.normal(mean, std);
  return t;
}

Tensor Tensor::rand(const Shape& shape, Rng& rng, float lo, float hi) {
  Tensor t = empty(shape);
  if (t_no_init) return t;
  float* p = t.data();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = rng.uniform(lo, hi);
  return t;
}

const Shape& Tensor::shape() const {
  ATTO_CHECK(impl_, "use of an undefined tensor");
  return impl_->shape;
}
const Shape& Tensor::strides() const {
  ATTO_CHECK(impl_, "use of an undefined tensor");
  return impl_->strides;
}
int64_t Tensor::offset() const { return impl_ ? impl_->offset : 0; }

int Tensor::wrap_dim(int dim) const {
  const int n = ndim();
  const int d = dim < 0 ? dim + n : dim;
  ATTO_CHECK(d >= 0 && d < n, "dimension {} is out of range for a tensor of shape {}", dim, shape_str(shape()));
  return d;
}
int64_t Tensor::size(int dim) const { return shape()[wrap_dim(dim)]; }
int64_t Tensor::stride(int dim) const { return strides()[wrap_dim(dim)]; }
int64_t Tensor::numel() const { return impl_ ? shape_numel(impl_->shape) : 0; }

bool Tensor::is_contiguous() const {
  const Shape& sh = shape();
  const Shape& st = strides();
  int64_t acc = 1;
  for (int i = static_cast<int>(sh.size()) - 1; i >= 0; --i) {
    if (sh[i] != 1 && st[i] != acc) return false;
    acc *= sh[i];
  }
  return true;
}

namespace {
[[noreturn]] void refuse_quantized(const Shape& shape) {
  throw Error(
      fmt::format("a tensor {} holds quantized weights (q8_0, q4_0, Q4_K, Q5_K or Q6_K rows), which only the linear layers "
                  "and the embedding lookup read; this use needs floats: load the model with its weights "
                  "dequantized (atto's commands that train, export or inspect do)",
                  shape_str(shape)));
}
}  // namespace

float* Tensor::data() {
  ATTO_CHECK(impl_, "use of an undefined tensor");
  if (impl_->quant) refuse_quantized(impl_->shape);
  return impl_->storage->data() + impl_->offset;
}
const float* Tensor::data() const {
  ATTO_CHECK(impl_, "use of an undefined tensor");
  if (impl_->quant) refuse_quantized(impl_->shape);
  return impl_->storage->data() + impl_->offset;
}

Tensor Tensor::quantized(const Shape& shape, std::shared_ptr<const QuantizedData> q) {
  ATTO_CHECK(shape.size() == 2 && shape[0] >= 0 && shape[1] >= 0, "a quantized tensor is a matrix, not {}",
             shape_str(shape));
  ATTO_CHECK(q && q->row_bytes > 0 && static_cast<int64_t>(q->bytes.size()) == shape[0] * q->row_bytes,
             "quantized rows of {} bytes do not fill a tensor {}", q ? q->bytes.size() : 0, shape_str(shape));
  auto impl = std::make_shared<Impl>();
  impl->storage = std::make_shared<Storage>(0);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->quant = std::move(q);
  return Tensor(std::move(impl));
}

const QuantizedData* Tensor::quantized() const { return impl_ ? impl_->quant.get() : nullptr; }

void Tensor::adopt_quantized(const Tensor& src) {
  ATTO_CHECK(impl_ && src.quantized(), "adopt_quantized: the source holds no quantized rows");
  ATTO_CHECK(src.shape() == shape(), "adopt_quantized: source shape {} differs from destination shape {}",
             shape_str(src.shape()), shape_str(shape()));
  impl_->quant = src.impl_->quant;
  impl_->storage = std::make_shared<Storage>(0);
  impl_->strides = contiguous_strides(impl_->shape);
  impl_->offset = 0;
  impl_->grad.reset();
}
const std::shared_ptr<Storage>& Tensor::storage() const {
  ATTO_CHECK(impl_, "use of an undefined tensor");
  return impl_->storage;
}

namespace {
int64_t linear_index(const Tensor& t, std::initializer_list<int64_t> index) {
  ATTO_CHECK(static_cast<int>(index.size()) == t.ndim(), "index with {} coordinates into a tensor of shape {}",
             index.size(), shape_str(t.shape()));
  int64_t off = 0;
  int i = 0;
  for (int64_t v : index) {
    ATTO_CHECK(v >= 0 && v < t.shape()[i], "index {} is out of range for dimension {} of shape {}", v, i,
               shape_str(t.shape()));
    off += v * t.strides()[i];
    ++i;
  }
  return off;
}
}  // namespace

float Tensor::at(std::initializer_list<int64_t> index) const { return data()[linear_index(*this, index)]; }
float& Tensor::at(std::initializer_list<int64_t> index) { return data()[linear_index(*this, index)]; }

float Tensor::item() const {
  ATTO_CHECK(numel() == 1, "item() needs a one-element tensor, got shape {}", shape_str(shape()));
  return data()[0];
}

namespace {
// Visit every element of `shape` in row-major order, calling f(offset_a, offset_b).
template <typename F>
void for_each_index2(const Shape& shape, const Shape& sa, const Shape& sb, F&& f) {
  const int n = static_cast<int>(shape.size());
  if (shape_numel(shape) == 0) return;
  std::vector<int64_t> idx(n, 0);
  int64_t oa = 0, ob = 0;
  while (true) {
    f(oa, ob);
    int d = n - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        oa += sa[d];
        ob += sb[d];
        break;
      }
      oa -= sa[d] * (shape[d] - 1);
      ob -= sb[d] * (shape[d] - 1);
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}
}  // namespace

std::vector<float> Tensor::to_vector() const {
  std::vector<float> out(static_cast<size_t>(numel()));
  const float* src = data();
  size_t k = 0;
  const Shape cs = contiguous_strides(shape());
  for_each_index2(shape(), strides(), cs, [&](int64_t oa, int64_t) { out[k++] = src[oa]; });
  return out;
}

Tensor Tensor::as_strided(const Shape& shape, const Shape& strides, int64_t offset) const {
  ATTO_CHECK(shape.size() == strides.size(), "as_strided: shape {} and strides {} differ in rank", shape_str(shape),
             shape_str(strides));
  if (impl_->quant) refuse_quantized(impl_->shape);
  check_shape(shape);
  // Bounds: the largest element reached must lie inside the storage.
  int64_t lo = offset, hi = offset;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) {
      lo = hi = offset;
      break;
    }
    const int64_t span = (shape[i] - 1) * strides[i];
    (span >= 0 ? hi : lo) += span;
  }
  ATTO_CHECK(lo >= 0 && hi < static_cast<int64_t>(storage()->size()) + (shape_numel(shape) == 0),
             "as_strided: view {} with strides {} at offset {} is outside a storage of {} elements", shape_str(shape),
             shape_str(strides), offset, storage()->size());
  auto impl = std::make_shared<Impl>();
  impl->storage = impl_->storage;
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  return Tensor(std::move(impl));
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape());
  out.copy_from(*this);
  return out;
}

void Tensor::copy_from(const Tensor& src) {
  ATTO_CHECK(src.shape() == shape(), "copy_from: source shape {} differs from destination shape {}",
             shape_str(src.shape()), shape_str(shape()));
  if (is_contiguous() && src.is_contiguous()) {
    std::memmove(data(), src.data(), static_cast<size_t>(numel()) * sizeof(float));
    return;
  }
  float* d = data();
  const float* s = src.data();
  for_each_index2(shape(), strides(), src.strides(), [&](int64_t od, int64_t os) { d[od] = s[os]; });
}

void Tensor::fill(float value) {
  float* d = data();
  for_each_index2(shape(), strides(), strides(), [&](int64_t od, int64_t) { d[od] = value; });
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<Impl>();
  impl->storage = storage();
  impl->shape = impl_->shape;
  impl->strides = impl_->strides;
  impl->offset = impl_->offset;
  impl->quant = impl_->quant;
  return Tensor(std::move(impl));
}

bool Tensor::shares_storage(const Tensor& other) const {
  return impl_ && other.impl_ && impl_->storage == other.impl_->storage;
}

bool Tensor::requires_grad() const { return impl_ && impl_->requires_grad; }
Tensor& Tensor::set_requires_grad(bool on) {
  ATTO_CHECK(impl_, "set_requires_grad on an undefined tensor");
  impl_->requires_grad = on;
  return *this;
}
Tensor Tensor::grad() const { return impl_ ? Tensor(impl_->grad) : Tensor(); }
Tensor& Tensor::ensure_grad() {
  ATTO_CHECK(impl_, "ensure_grad on an undefined tensor");
  if (!impl_->grad) impl_->grad = zeros(impl_->shape).impl_;
  return *this;
}
void Tensor::zero_grad() {
  if (impl_ && impl_->grad) Tensor(impl_->grad).fill(0.0f);
}
void Tensor::clear_grad() {
  if (impl_) impl_->grad.reset();
}
void Tensor::set_grad(const Tensor& g) {
  ATTO_CHECK(impl_, "set_grad on an undefined tensor");
  ATTO_CHECK(!g.defined() || g.shape() == shape(), "set_grad: gradient shape {} differs from tensor shape {}",
             shape_str(g.shape()), shape_str(shape()));
  impl_->grad = g.impl_;
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  ATTO_CHECK(a.shape() == b.shape(), "max_abs_diff: shapes {} and {} differ", shape_str(a.shape()),
             shape_str(b.shape()));
  const auto va = a.to_vector();
  const auto vb = b.to_vector();
  float m = 0.0f;
  for (size_t i = 0; i < va.size(); ++i) {
    const float d = std::fabs(va[i] - vb[i]);
    if (std::isnan(d)) return d;
    m = std::max(m, d);
  }
  return m;
}

}  // namespace atto
