// atto/kernels/parallel.h: how a kernel opens its OpenMP region (internal to src/kernels).
//
// libgomp builds a team for every parallel region it enters, even one of a single thread (an
// `if (false)` clause, or a region nested in a data-parallel shard, where each shard has one
// thread): ~1 us each, measured with an empty body. A shard's training step of the small models
// opens ~130 such regions, a few percent of model (a)'s step. parallel_region runs the body
// directly instead when it would get one thread.
//
// A body gets its share of the work from (t, nt) (static_range), never from OpenMP: run
// directly inside a shard, omp_get_thread_num(), `omp for` and `omp barrier` would refer to the
// shards' own team.
#pragma once

#include "kernels/isa.h"
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace ATTO_KERNELS_NS {

// Whether a region asked for (`want`: enough work to share) would get more than one thread.
inline bool use_threads(bool want) { return want && omp_get_max_threads() > 1; }

// body(t, nt) for every thread t of nt in a parallel region when use_threads(want), else
// body(0, 1) directly on this thread.
template <class F>
inline void parallel_region(bool want, F&& body) {
  if (use_threads(want)) {
#pragma omp parallel
    body(int64_t{omp_get_thread_num()}, int64_t{omp_get_num_threads()});
  } else {
    body(int64_t{0}, int64_t{1});
  }
}

// Thread t's share [begin, end) of n iterations, as OpenMP's static schedule cuts them: one
// contiguous run each, the first n % nt runs one longer.
inline std::pair<int64_t, int64_t> static_range(int64_t n, int64_t t, int64_t nt) {
  const int64_t q = n / nt, r = n % nt;
  const int64_t begin = t * q + std::min(t, r);
  return {begin, begin + q + (t < r ? 1 : 0)};
}

// f(i) for i in [0, n), each thread one contiguous run (static_range), or all in order here.
template <class F>
inline void parallel_for(int64_t n, bool want, F&& f) {
  parallel_region(want, [&](int64_t t, int64_t nt) {
    const auto [begin, end] = static_range(n, t, nt);
    for (int64_t i = begin; i < end; i++) f(i);
  });
}

}  // namespace atto::kernels
