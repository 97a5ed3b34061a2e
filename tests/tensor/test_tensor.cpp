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
