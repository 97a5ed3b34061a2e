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
// gradients in shard order: ((g0 + g1) + g2) + ... Here the same sum runs as a chain along the
// ranks: rank 0 adds its shards 0..S-1, sends the partial sum to rank 1, which adds its shards
// S..2S-1 onto it one by one, and so on; the last rank holds the exact one-process sum and
// broadcasts it (the broadcast copies, so it cannot change a bit). The chain sends the gradient
// once along each link, as a ring allreduce does, but its latency grows with N; cut into
// buckets that are in flight at once, the ranks work on different buckets at the same time.
//
// Overlap: the parameters are cut into buckets of about kBucketFloats in backward order (the
// last layers first). A bucket goes as soon as every local shard has finished its parameters,
// while the backward pass goes on with the earlier layers. One thread per process runs the
// exchange and sleeps between polls, so it takes little of a core that the backward needs.
// With overlap off the same exchange starts after the backward (what `atto train
// --no-overlap` measures).
//
// An undefined gradient (a parameter no op of a shard used) adds nothing, as in one process:
// each bucket carries a defined flag per parameter.
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
  // After a failed shard: stops the exchange thread's wait for this step (the process then
  // exits with the error, and the other ranks with it).
  void cancel();

 private:
  struct Bucket {
    std::vector<size_t> params;    // parameter indices, backward order
    std::vector<int64_t> offsets;  // each one's first float in the buffers
    int64_t floats = 0;            // gradient floats; then one defined flag per parameter
    std::vector<float> partial, total;
    std::atomic<int> pending{0};  // (shard, parameter) pairs not final yet this step
    std::unique_ptr<Collective::Request> recv, send, bcast;
  };
  void build_buckets();
  void loop();
  void run_step();
  void wait_ready(size_t k);
  void add_local(Bucket& b, bool from_partial);
  void write_totals(Bucket& b);
  void progress();
  bool in_flight();

  Collective& c_;
  std::vector<std::vector<Tensor>> params_;
  bool overlap_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<size_t> bucket_of_;         // parameter -> bucket
  std::vector<std::atomic<bool>> final_;  // [shard * P + param]
  std::mutex mu_;
  std::condition_variable cv_;
  size_t ready_count_ = 0;  // buckets ready this step (under mu_)
  std::vector<bool> bucket_ready_;
  bool step_open_ = false, step_done_ = true, quit_ = false;
  std::atomic<bool> cancelled_{false};
  std::thread thread_;
};

}  // namespace atto
