#include "mpi/comm_bench.h"

#include <algorithm>
#include <chrono>

#include "train/grad_exchange.h"

namespace atto::mpi {

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The exchange of `floats` gradient floats cut into parameters of one bucket each (a model's
// layers), one shard per rank; the gradients are attached again after begin() drops them on
// ranks > 0 (as a fresh backward would write them).
double time_exchange(MpiCollective& c, int64_t floats, int runs) {
  std::vector<Tensor> params, grads;
  for (int64_t done = 0; done < floats;) {
    const int64_t n = std::min(GradExchange::kBucketFloats, floats - done);
    params.push_back(Tensor::zeros({n}).set_requires_grad(true));
    grads.push_back(Tensor::full({n}, 0.5f + static_cast<float>(c.rank())));
    done += n;
  }
  GradExchange ex(c, {params}, /*overlap=*/false);
  std::vector<double> ms;
  for (int r = 0; r <= runs; ++r) {
    c.barrier();
    const auto t0 = Clock::now();
    ex.begin();
    for (size_t i = 0; i < params.size(); ++i)
      if (!params[i].grad().defined()) params[i].set_grad(grads[i]);
    ex.finish();
    if (r > 0) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return median(ms);
}

double time_allreduce(MpiCollective& c, int64_t floats, int runs) {
  std::vector<float> buf(static_cast<size_t>(floats), 1.0f);
  std::vector<double> ms;
  for (int r = 0; r <= runs; ++r) {
    c.barrier();
    const auto t0 = Clock::now();
    c.allreduce_sum(buf.data(), floats);
    if (r > 0) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return median(ms);
}

}  // namespace

std::vector<CommBenchResult> bench_comm(MpiCollective& c, const std::vector<CommBenchSize>& sizes, int runs) {
  std::vector<CommBenchResult> out;
  for (const CommBenchSize& s : sizes) {
    CommBenchResult r{s.name, s.floats, 0.0, 0.0};
    r.exchange_ms = time_exchange(c, s.floats, runs);
    r.allreduce_ms = time_allreduce(c, s.floats, runs);
    out.push_back(r);
  }
  return out;
}

}  // namespace atto::mpi
