// atto/train/collective.h: what data-parallel training needs from the processes it runs in.
//
//   mpi::MpiCollective world;                   // src/mpi (built with MPI): mpirun's ranks
//   TrainerOptions o{.out_dir = "runs/x", .collective = &world};
//   train_run(cfg, o);                           // every rank calls it; rank 0 writes the run
//
// The trainer and DataParallel speak only this interface; the MPI implementation lives in
// src/mpi, outside libatto, so the library and a build without MPI never link it. With no
// collective (nullptr) training is one process, as before.
//
// Point-to-point messages are nonblocking (a Request to poll), so that the gradient exchange's
// thread can wait with a deadline and sleep between polls instead of spinning on a core the
// backward pass needs. Every call made by several ranks must be made in the same order on each.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace atto {

class Collective {
 public:
  // A message or collective in flight.
  class Request {
   public:
    virtual ~Request() = default;
    virtual bool test() = 0;  // true once it has completed (then the buffer may be reused)
  };

  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string host() const = 0;  // this rank's host name, for messages

  // Floats to / from one rank; tag tells messages between the same two ranks apart.
  virtual std::unique_ptr<Request> send(const float* data, int64_t n, int to, int tag) = 0;
  virtual std::unique_ptr<Request> recv(float* data, int64_t n, int from, int tag) = 0;
  // Every rank's data becomes root's (n floats); every rank calls it.
  virtual std::unique_ptr<Request> broadcast(float* data, int64_t n, int root) = 0;
  // Every rank's `mine` in rank order; blocking. all_gather_same_size: one message round
  // instead of two, when the caller knows that every rank's string has the same length.
  virtual std::vector<std::string> all_gather(const std::string& mine) = 0;
  virtual std::vector<std::string> all_gather_same_size(const std::string& mine) = 0;
  // The plain MPI_Allreduce sum of n floats in place (its order depends on the library and the
  // rank count: what the exact exchange is compared against in `atto bench comm`).
  virtual void allreduce_sum(float* data, int64_t n) = 0;

  // How long a wait for other ranks may take before the run is declared broken (seconds).
  double timeout_s = 300.0;
  // Ends every rank's process with an error (a rank died, or timed out): MPI_Abort.
  [[noreturn]] virtual void abort(const std::string& why) = 0;

  // Waits for r with the deadline, sleeping between polls; aborts the run with `what` when the
  // deadline passes. Returns false, leaving r in flight, once *cancel becomes true.
  bool wait(Request& r, const char* what, const std::atomic<bool>* cancel = nullptr);
  // rank 0's string on every rank (broadcast by all_gather; small strings only).
  std::string from_rank0(const std::string& mine) { return all_gather(mine).at(0); }
};

// How a training run spreads over processes: none (one process) unless a collective of several
// ranks is given.
struct DistOptions {
  Collective* collective = nullptr;
  bool overlap = true;  // send gradient buckets while the backward runs (off: after it)
  int ranks() const { return collective != nullptr ? collective->size() : 1; }
};

}  // namespace atto
