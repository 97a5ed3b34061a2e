// atto/mpi/comm_bench.h: `mpirun -np N atto bench comm`: the time to sum a model's gradients
// across the ranks, by the exact exchange training uses (GradExchange: the chain in shard order,
// then a broadcast) and by a plain MPI_Allreduce, for gradient sizes of the models in
// docs/distributed.md's scaling table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mpi/mpi_collective.h"

namespace atto::mpi {

struct CommBenchSize {
  std::string name;
  int64_t floats = 0;
};

struct CommBenchResult {
  std::string name;
  int64_t floats = 0;
  double exchange_ms = 0.0;   // GradExchange (exact, rank-count independent), median
  double allreduce_ms = 0.0;  // MPI_Allreduce in place, median
};

// Times each size `runs` times (after one warm-up) on every rank; rank 0's medians.
std::vector<CommBenchResult> bench_comm(MpiCollective& c, const std::vector<CommBenchSize>& sizes, int runs);

}  // namespace atto::mpi
