// atto/mpi/mpi_collective.h: train/collective.h over Open MPI, for `mpirun -np N atto train`.
//
//   if (mpi::launched_by_mpirun()) world = mpi::MpiCollective::init();   // MPI_Init_thread
//   opts.dist.collective = world.get();
//
// Built only when CMake finds MPI (option ATTO_MPI); linked into the atto program, not libatto.
// Errors: MPI's calls return their codes (MPI_ERRORS_RETURN) and a failed call ends the run
// through abort(), which prints the reason and calls MPI_Abort so that every rank exits (a rank
// that merely exited would leave the others waiting in a collective). A rank killed outright is
// noticed by mpirun, which ends the others; a rank that hangs is caught by the exchange's
// deadline (Collective::timeout_s).
#pragma once

#include <memory>
#include <string>

#include "train/collective.h"

namespace atto::mpi {

// Whether an MPI launcher (Open MPI's mpirun, or a PMI/PMIx one) started this process.
bool launched_by_mpirun();
// The number of ranks on this host according to the launcher (1 when unknown).
int local_ranks();

class MpiCollective final : public Collective {
 public:
  static std::unique_ptr<MpiCollective> init();
  ~MpiCollective() override;  // MPI_Finalize

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string host() const override { return host_; }
  std::unique_ptr<Request> send(const float* data, int64_t n, int to, int tag) override;
  std::unique_ptr<Request> recv(float* data, int64_t n, int from, int tag) override;
  std::unique_ptr<Request> broadcast(float* data, int64_t n, int root) override;
  std::vector<std::string> all_gather(const std::string& mine) override;
  std::vector<std::string> all_gather_same_size(const std::string& mine) override;
  void allreduce_sum(float* data, int64_t n) override;
  [[noreturn]] void abort(const std::string& why) override;
  void barrier();

 private:
  MpiCollective() = default;
  int rank_ = 0, size_ = 1;
  std::string host_;
};

}  // namespace atto::mpi
