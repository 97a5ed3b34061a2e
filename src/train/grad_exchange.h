// atto/train/grad_exchange.h: the gradient sum of data-parallel training across processes,
// in the same order as one process would add its shards, so that N ranks x S shards give the
// same bits as one process with N * S shards.
//
//   GradExchange ex(collective, params, /*overlap=*/true);   // params[s][i]: shard s's parameter i
//   ex.begin();                    // before the shards' forward
//   ... shard s's backward calls ex.ready(s, i) as parameter i's gradient is final (Tape::watch)
//   ex.finish();                   // after the shards: every rank's model holds the global sum
//
// Why not MPI_Allreduce: its summation order depends on the rank count, the message size and
// the library's algorithm, so the bits would change with N. One process adds its shards'
// gradients in shard order: ((g0 + g1) + g2) + ... Here every bucket of gradients is cut into
// N segments (and at parameter boundaries, into pieces) and rank j owns segment j: every rank
// sends rank j its shards' parts of segment j, each shard's separately (an ordered
// reduce-scatter), and rank j adds them in global shard order, exactly as one process adds the
// whole, into its own gradient buffers; then each piece goes from its owner to every rank
// (MPI_Ibcast straight into their gradient buffers: a copy, which cannot change a bit). With
// one shard per rank each rank sends and receives 2 (N - 1) / N of the gradient, as a ring
// allreduce does; with S shards a rank sends its S parts of every segment. Parts go straight
// from the gradient buffers and the sums land in them: no packing. What it costs against a
// plain MPI_Allreduce is measured by `atto bench comm`.
//
// Messages between two ranks all carry one tag: both sides post them in the same order (bucket,
// shard, piece) and MPI delivers messages between a pair with the same tag in order.
//
// Overlap: the parameters are cut into buckets of about kBucketFloats in backward order (the
// last layers first). A bucket's parts go as soon as every local shard has finished its
// parameters, while the backward pass goes on with the earlier layers. One thread per process
// runs the exchange and sleeps while nothing is in flight, so it takes little of a core that the
// backward needs. With overlap off the same exchange starts after the backward (what `atto
// train --no-overlap` measures).
//
// An undefined gradient (a parameter no op of a shard used) adds nothing, as in one process:
// with each shard's parts of a bucket goes a defined flag per parameter.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tensor/tensor.h"
#include "train/collective.h"

namespace atto {

class GradExchange {
 public:
  static constexpr int64_t kBucketFloats = int64_t{1} << 18;  // 1 MiB of fp32 gradient

  GradExchange(Collective& c, const std::vector<std::vector<Tensor>>& params, bool overlap);
  ~GradExchange();
  GradExchange(const GradExchange&) = delete;
  GradExchange& operator=(const GradExchange&) = delete;

  bool overlap() const { return overlap_; }
  // Before the shards run: on ranks > 0 the model's own gradients are dropped (its shard's must
  // be fresh, as a replica's in one process); rank 0's stay (gradient accumulation adds to them).
  void begin();
  // Local shard s's gradient of parameter i is final. Any thread.
  void ready(int shard, size_t param);
  // After the shards: marks what is not final yet (shards without rows, unused parameters),
  // waits for the exchange and leaves the global sum in the model's gradients on every rank.
  void finish();
  // After a failed shard: stops the exchange thread's waits for this step (the process then
  // exits with the error, and the other ranks with it).
  void cancel();

 private:
  // Part of one parameter's gradient, floats [at, at + n) of it, summed by rank `owner`.
  struct Piece {
    size_t j = 0;  // the parameter's index in the bucket
    int64_t at = 0, n = 0;
    int owner = 0;
    int64_t staged = -1;  // owned here: its first float in each `in` buffer
  };
  struct Bucket {
    std::vector<size_t> params;    // parameter indices, backward order
    std::vector<int64_t> offsets;  // each one's first float in the bucket
    int64_t floats = 0;
    std::vector<Piece> pieces;                  // the bucket cut into ranks_ segments, at parameter boundaries too
    std::vector<std::vector<float>> flags_out;  // [s]: local shard s's defined flag per parameter
    std::vector<std::vector<float>> flags_in;   // [g]: global shard g's (other ranks' shards)
    std::vector<std::vector<float>> in;         // [g]: other ranks' shards' parts of this rank's pieces
    std::vector<float> total;                   // the sum, where the model has no gradient buffer
    std::vector<float> defined;                 // per parameter: a gradient on some shard
    std::atomic<int> pending{0};                // (shard, parameter) pairs not final yet this step
    std::vector<std::unique_ptr<Collective::Request>> sends, recvs, bcasts;
    std::vector<Collective::Request*> sent0;  // per piece: the send of this rank's model's part
  };
  void build_buckets();
  void cut_pieces(Bucket& b);
  void loop();
  void run_step();
  bool wait_ready(size_t k);
  void post_receives(size_t k);
  void send_parts(size_t k);
  bool reduce_bucket(size_t k);
  void sum_piece(Bucket& b, const Piece& p, float* dest);
  float* dest_of(Bucket& b, const Piece& p);
  void progress();
  bool in_flight();

  Collective& c_;
  std::vector<std::vector<Tensor>> params_;
  bool overlap_;
  int rank_, ranks_, shards_;  // shards per rank
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<size_t> bucket_of_;         // parameter -> bucket
  std::vector<std::atomic<bool>> final_;  // [shard * P + param]
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<bool> bucket_ready_;
  bool step_open_ = false, step_done_ = true, quit_ = false;
  std::atomic<bool> cancelled_{false};
  std::thread thread_;
};

}  // namespace atto
