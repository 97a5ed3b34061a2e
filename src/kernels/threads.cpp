// atto/kernels/threads.cpp: one knob for the thread count of OpenMP and OpenBLAS, and the
// shard runner data-parallel training uses.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <exception>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/parallel.h"

namespace atto::kernels {

void set_num_threads(int n) {
  if (n <= 0) n = omp_get_num_procs();
  omp_set_num_threads(n);
  // The OpenMP build of OpenBLAS follows omp_get_max_threads() anyway; set it for clarity.
  openblas_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

ThreadScope::ThreadScope(int n) : previous_(omp_get_max_threads()) {
  omp_set_num_threads(n <= 0 ? omp_get_num_procs() : n);
}
ThreadScope::~ThreadScope() { omp_set_num_threads(previous_); }

namespace {
thread_local bool t_row_stable = false;
}  // namespace
bool row_stable_enabled() { return t_row_stable; }
RowStableScope::RowStableScope() : previous_(t_row_stable) { t_row_stable = true; }
RowStableScope::~RowStableScope() { t_row_stable = previous_; }

void run_shards(int shards, const std::function<void(int)>& fn) {
  if (shards <= 0) return;
  const int total = num_threads();
  const int outer = std::min(shards, total);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(shards));
  auto run_one = [&](int s) {
    try {
      fn(s);
    } catch (...) {
      errors[static_cast<size_t>(s)] = std::current_exception();
    }
  };
  if (outer <= 1 || omp_in_parallel()) {
    for (int s = 0; s < shards; ++s) run_one(s);
  } else {
    // Each shard's kernels open their own (nested) regions of `inner` threads. nthreads-var is
    // per task: omp_set_num_threads inside the region leaves the caller's setting alone.
    const int inner = std::max(1, total / shards);
    if (inner > 1 && omp_get_max_active_levels() < 2) omp_set_max_active_levels(2);
    // The caller's precision and bf16 weight cache go with its shards (as autocast's state with
    // PyTorch's data-parallel threads).
    const Precision precision = current_precision();
    Bf16WeightCache* cache = current_weight_cache();
#pragma omp parallel num_threads(outer)
    {
      omp_set_num_threads(inner);
      const PrecisionScope scope(precision, cache);
      for (int s = omp_get_thread_num(); s < shards; s += outer) run_one(s);
    }
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

void for_each_chunk(const int64_t* n, size_t count, int64_t chunk, int64_t min_parallel,
                    const std::function<void(size_t, int64_t, int64_t)>& f) {
  struct Item {
    size_t i;
    int64_t begin, end;
  };
  std::vector<Item> items;
  int64_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    for (int64_t b = 0; b < n[i]; b += chunk) items.push_back({i, b, std::min(n[i], b + chunk)});
    total += n[i];
  }
  const auto m = static_cast<int64_t>(items.size());
  // Dynamic: the chunks differ in size (a bias beside a weight matrix); which thread runs a chunk
  // changes nothing in it.
  if (use_threads(total >= min_parallel && m > 1)) {
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t k = 0; k < m; ++k) {
      const Item& it = items[static_cast<size_t>(k)];
      f(it.i, it.begin, it.end);
    }
  } else {
    for (const Item& it : items) f(it.i, it.begin, it.end);
  }
}

}  // namespace atto::kernels
