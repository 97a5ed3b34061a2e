#include <gtest/gtest.h>

#include "base/error.h"
#include "base/memory.h"
#include "tensor/tensor.h"

using namespace atto;

TEST(Tensor, CreationAndShape) {
  Tensor t = Tensor::zeros({2, 3, 4});
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.ndim(), 3);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_THROW(t.size(3), Error);
  EXPECT_THROW(Tensor::from_vector({2, 2}, {1, 2, 3}), Error);
}

TEST(Tensor, StridedViewSharesStorage) {
  Tensor x = Tensor::from_vector({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor t = x.as_strided({3, 2}, {1, 3}, 0);  // transpose
  EXPECT_TRUE(t.shares_storage(x));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.at({2, 1}), 5.0f);
  EXPECT_EQ(t.at({1, 0}), 1.0f);
  EXPECT_EQ(t.to_vector(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  Tensor c = t.contiguous();
  EXPECT_FALSE(c.shares_storage(x));
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.to_vector(), t.to_vector());
  x.at({0, 1}) = 42.0f;  // writes through the view
  EXPECT_EQ(t.at({1, 0}), 42.0f);
  EXPECT_THROW(x.as_strided({3, 3}, {3, 1}, 0), Error);  // outside the storage
}

TEST(Tensor, RngIsSeededAndReproducible) {
  Rng a(7), b(7), c(8);
  Tensor x = Tensor::randn({100}, a), y = Tensor::randn({100}, b), z = Tensor::randn({100}, c);
  EXPECT_EQ(x.to_vector(), y.to_vector());
  EXPECT_NE(x.to_vector(), z.to_vector());
  // Moments of a large sample.
  Rng r(1);
  double s = 0, s2 = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double v = r.normal();
    s += v;
    s2 += v * v;
  }
  EXPECT_NEAR(s / n, 0.0, 0.01);
  EXPECT_NEAR(s2 / n, 1.0, 0.01);
  // State save and restore continues the same stream.
  Rng q(3);
  q.next_u64();
  auto st = q.state();
  const uint64_t v1 = q.next_u64();
  q.set_state(st);
  EXPECT_EQ(q.next_u64(), v1);
}

// Varying shapes (seq2seq batches) must reuse larger cached buffers (up to twice the request),
// not grow the cache by one buffer per distinct size.
TEST(Tensor, AllocatorReusesLargerBuffersWithinTwice) {
#ifndef ATTO_NO_ALLOC_CACHE
  allocator_release_cached();
  { Tensor big = Tensor::empty({50000}); }
  const auto before = allocator_stats();
  { Tensor t = Tensor::empty({30000}); }  // served by the 50000 buffer
  const auto mid = allocator_stats();
  EXPECT_EQ(mid.system_allocs, before.system_allocs);
  EXPECT_EQ(mid.cache_hits, before.cache_hits + 1);
  { Tensor t = Tensor::empty({20000}); }  // under half: a new buffer of its own size
  const auto after = allocator_stats();
  EXPECT_EQ(after.system_allocs, mid.system_allocs + 1);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
#else
  GTEST_SKIP() << "allocator cache disabled in this build";
#endif
}

TEST(Tensor, AllocatorReusesBuffers) {
  { Tensor warm = Tensor::empty({1234}); }
  const auto before = allocator_stats();
  for (int i = 0; i < 10; ++i) Tensor t = Tensor::empty({1234});
  const auto after = allocator_stats();
#ifndef ATTO_NO_ALLOC_CACHE
  EXPECT_EQ(after.system_allocs, before.system_allocs);
  EXPECT_GE(after.cache_hits, before.cache_hits + 10);
#else
  EXPECT_GE(after.system_allocs, before.system_allocs + 10);
#endif
}

// Buffers are cache-line aligned; large ones (kHugeBytes up) start on a 2 MiB boundary so that
// madvise(MADV_HUGEPAGE) covers whole huge pages (base/memory.h); an impossible size is nullptr,
// not a wrapped small allocation.
TEST(Tensor, LargeBuffersStartOnHugePageBoundaries) {
  const Tensor small = Tensor::empty({100});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % 64, 0u);
  const Tensor big = Tensor::empty({static_cast<int64_t>(kHugeBytes / sizeof(float)) + 17});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % (uintptr_t{2} << 20), 0u);
  void* p = alloc_buffer(kHugeBytes + 1);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (uintptr_t{2} << 20), 0u);
  static_cast<char*>(p)[kHugeBytes] = 1;  // the whole request is there
  std::free(p);
  EXPECT_EQ(alloc_buffer(static_cast<size_t>(-1) - 10), nullptr);
}

// A quantized tensor: a matrix of rows of bytes, no floats. Reading it as floats is an error that
// says what it holds; every handle (and a detached one) sees the rows a parameter adopted.
TEST(QuantizedTensor, HoldsRowsAndRefusesFloats) {
  auto q = std::make_shared<QuantizedData>();
  q->type = 8;
  q->row_bytes = 34;
  q->bytes.assign(3 * 34, 1);
  const Tensor t = Tensor::quantized({3, 32}, q);
  EXPECT_EQ(t.shape(), (Shape{3, 32}));
  EXPECT_TRUE(t.is_contiguous());
  ASSERT_NE(t.quantized(), nullptr);
  EXPECT_EQ(t.quantized()->bytes.size(), 102u);
  try {
    (void)t.data();
    ADD_FAILURE() << "data() read a quantized tensor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds quantized weights"), std::string::npos) << e.what();
  }
  EXPECT_THROW(t.as_strided({32, 3}, {1, 32}, 0), Error);
  EXPECT_THROW(Tensor::quantized({4, 32}, q), Error);  // rows that do not fill the shape
  EXPECT_THROW(Tensor::quantized({96}, q), Error);     // not a matrix

  Tensor param = Tensor::ones({3, 32});
  Tensor alias = param;  // a module's member and its state_dict entry are two handles
  alias.adopt_quantized(t);
  EXPECT_EQ(param.quantized(), t.quantized());
  EXPECT_EQ(param.detach().quantized(), t.quantized());
  EXPECT_THROW((void)param.data(), Error);
  EXPECT_THROW(Tensor::ones({2, 32}).adopt_quantized(t), Error);  // another shape
  EXPECT_THROW(Tensor::ones({3, 32}).adopt_quantized(Tensor::ones({3, 32})), Error);
  EXPECT_EQ(Tensor::ones({2}).quantized(), nullptr);
}

// Under a NoInitScope rand and randn draw nothing (the Rng's state is unchanged); outside it they
// draw as always.
TEST(QuantizedTensor, NoInitScopeDrawsNothing) {
  Rng a(5), b(5);
  {
    NoInitScope no_init;
    EXPECT_TRUE(NoInitScope::active());
    Tensor x = Tensor::randn({64}, a);
    Tensor y = Tensor::rand({64}, a);
    EXPECT_EQ(x.shape(), (Shape{64}));
  }
  EXPECT_FALSE(NoInitScope::active());
  EXPECT_EQ(Tensor::randn({8}, a).to_vector(), Tensor::randn({8}, b).to_vector());
}
