// Tests of the embedding kernels (embedding_forward gathers rows, embedding_backward
// scatter-adds them): against the plain loops, bit for bit, for column counts on both sides of
// the split by columns, and bit-identical results for 1 and 2 threads.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernel_support.h"
#include "kernels/kernels.h"

namespace atto::kernels {
namespace {

using test::expect_bit_identical;
using test::expect_thread_invariant;
using test::randn;

TEST(KernelEmbedding, GatherAndScatterAddMatchLoops) {
  for (int64_t C : {1, 5, 32, 67, 128, 200}) {  // both split strategies (C >= 128 by columns)
    for (int64_t N : {1, 3, 7, 64, 129, 1000}) {
      const int64_t V = 11;
      std::vector<int32_t> ids(N);
      for (int64_t n = 0; n < N; n++) ids[n] = static_cast<int32_t>((n * 7 + n / 3) % V);
      const std::vector<float> w = randn(V * C, 1), dout = randn(N * C, 2);
      std::vector<float> out(N * C);
      embedding_forward(out.data(), ids.data(), w.data(), N, C, V);
      for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++) ASSERT_EQ(out[n * C + c], w[ids[n] * C + c]);
      std::vector<float> dw = randn(V * C, 3), want = dw;
      embedding_backward(dw.data(), dout.data(), ids.data(), N, C, V);
      for (int64_t n = 0; n < N; n++)  // the naive scatter-add, in order of n
        for (int64_t c = 0; c < C; c++) want[ids[n] * C + c] += dout[n * C + c];
      expect_bit_identical(dw, want, "embedding backward C=" + std::to_string(C));
    }
  }
}

TEST(KernelEmbedding, BitIdenticalForOneAndTwoThreads) {
  for (int64_t C : {16, 256}) {
    const int64_t N = 4099, V = 97;
    std::vector<int32_t> ids(N);
    for (int64_t n = 0; n < N; n++) ids[n] = static_cast<int32_t>((n * n) % V);
    const std::vector<float> w = randn(V * C, 1), dout = randn(N * C, 2);
    expect_thread_invariant(
        [&] {
          std::vector<float> out(N * C), dw(V * C, 0.0f);
          embedding_forward(out.data(), ids.data(), w.data(), N, C, V);
          embedding_backward(dw.data(), dout.data(), ids.data(), N, C, V);
          out.insert(out.end(), dw.begin(), dw.end());
          return out;
        },
        "embedding C=" + std::to_string(C));
  }
}

}  // namespace
}  // namespace atto::kernels
