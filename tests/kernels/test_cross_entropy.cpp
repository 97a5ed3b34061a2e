// Tests of the cross-entropy kernels (loss and log-sum-exp forward, gradient of the logits
// backward, label smoothing, ignored rows): a hand-computed case (torch's values), the fast
// kernels against the naive twins over swept sizes, and bit-identical results for 1 and 2
// threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernel_support.h"
#include "kernels/kernels.h"

namespace atto::kernels {
namespace {

using test::expect_thread_invariant;
using test::randn;

// Values from torch.nn.functional.cross_entropy(reduction='none') in float64.
TEST(KernelCrossEntropy, HandComputedTinyCase) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, 0.5f, -1.0f, 2.0f};
  const std::vector<int32_t> targets = {2, 0};
  const std::vector<float> dloss = {1.0f, 1.0f};
  struct Want {
    float ls;
    std::vector<double> loss, grad;
  };
  const Want wants[] = {
      {0.0f,
       {0.4076059644443804, 1.7413112966571571},
       {0.09003057317038043, 0.24472847105479764, -0.3347590442251782, -0.8247096078599633, 0.03911257327068745,
        0.7855970345892759}},
      {0.1f,
       {0.5076059644443804, 1.7413112966571571},
       {0.0566972398370471, 0.21139513772146432, -0.26809237755851156, -0.7580429411932966, 0.0057792399373541165,
        0.7522637012559426}},
  };
  for (const Want& w : wants) {
    for (bool naive : {false, true}) {
      std::vector<float> losses(2), lse(2), dlogits(6, 0.0f);
      auto fwd = naive ? cross_entropy_forward_naive : cross_entropy_forward;
      auto bwd = naive ? cross_entropy_backward_naive : cross_entropy_backward;
      EXPECT_EQ(fwd(losses.data(), lse.data(), logits.data(), targets.data(), 2, 3, -100, w.ls), 2);
      bwd(dlogits.data(), dloss.data(), logits.data(), lse.data(), targets.data(), 2, 3, -100, w.ls);
      EXPECT_NEAR(lse[0], 3.4076059644443806, 1e-6);
      EXPECT_NEAR(lse[1], 2.241311296657157, 1e-6);
      for (int i = 0; i < 2; i++) EXPECT_NEAR(losses[i], w.loss[i], 1e-6) << "ls=" << w.ls;
      for (int i = 0; i < 6; i++) EXPECT_NEAR(dlogits[i], w.grad[i], 1e-6) << "ls=" << w.ls;
    }
  }
}

struct CeOut {
  std::vector<float> losses, lse, dlogits;
  int64_t count = 0;
};

CeOut run_ce(int64_t N, int64_t V, float ls, bool naive) {
  const std::vector<float> logits = randn(N * V, 1, 3.0f), dloss = randn(N, 2);
  std::vector<int32_t> targets(N);
  for (int64_t n = 0; n < N; n++) targets[n] = n % 4 == 1 ? -1 : static_cast<int32_t>(n % V);
  CeOut r;
  r.losses.assign(N, 123.0f);
  r.lse.assign(N, 0.0f);
  r.dlogits = randn(N * V, 3);
  auto fwd = naive ? cross_entropy_forward_naive : cross_entropy_forward;
  auto bwd = naive ? cross_entropy_backward_naive : cross_entropy_backward;
  r.count = fwd(r.losses.data(), r.lse.data(), logits.data(), targets.data(), N, V, -1, ls);
  bwd(r.dlogits.data(), dloss.data(), logits.data(), r.lse.data(), targets.data(), N, V, -1, ls);
  return r;
}

TEST(KernelCrossEntropy, MatchesNaiveAndIgnoresRows) {
  for (int64_t N : {1, 3, 7, 64, 129})
    for (int64_t V : {1, 5, 32, 67, 128})
      for (float ls : {0.0f, 0.1f}) {
        const CeOut f = run_ce(N, V, ls, false), n = run_ce(N, V, ls, true);
        const std::string what = "N=" + std::to_string(N) + " V=" + std::to_string(V);
        EXPECT_EQ(f.count, n.count) << what;
        EXPECT_EQ(f.count, N - (N + 2) / 4) << what;  // rows n % 4 == 1 ignored
        const std::vector<float> dl0 = randn(N * V, 3);
        for (int64_t r = 0; r < N; r++) {
          ASSERT_NEAR(f.lse[r], n.lse[r], 2e-6 * (1 + std::fabs(n.lse[r]))) << what;
          ASSERT_NEAR(f.losses[r], n.losses[r], 2e-5 * (1 + std::fabs(n.losses[r]))) << what;
          for (int64_t j = 0; j < V; j++)
            ASSERT_NEAR(f.dlogits[r * V + j], n.dlogits[r * V + j], 2e-6 * (1 + std::fabs(n.dlogits[r * V + j])))
                << what;
          if (r % 4 != 1) continue;
          EXPECT_EQ(f.losses[r], 0.0f) << what;  // ignored row: no loss, no gradient
          for (int64_t j = 0; j < V; j++) EXPECT_EQ(f.dlogits[r * V + j], dl0[r * V + j]);
        }
      }
}

TEST(KernelCrossEntropy, BitIdenticalForOneAndTwoThreads) {
  expect_thread_invariant(
      [&] {
        CeOut r = run_ce(257, 1031, 0.1f, false);
        r.losses.insert(r.losses.end(), r.lse.begin(), r.lse.end());
        r.losses.insert(r.losses.end(), r.dlogits.begin(), r.dlogits.end());
        return r.losses;
      },
      "cross_entropy");
}

}  // namespace
}  // namespace atto::kernels
