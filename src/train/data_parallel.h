// atto/train/data_parallel.h: one training batch split into shards that run side by side, each
// on a replica of the model, one thread each.
//
//   DataParallel dp(model, /*shards=*/2, [&] { return std::make_unique<GPT>(cfg, scratch_rng); });
//   const double loss = gpt_forward_backward(dp, batch.x, batch.y, B, T);   // grads in model
//   (seq2seq_forward_backward(dp, batch) for an encoder-decoder)
//   optimizer.step(lr);                                                    // as without shards
//
// Why: for small models every op of a step is too small to split well over threads (a fork
// and join of an OpenMP region, imbalance and the serial stretches between ops cost more than
// the op itself). Giving each thread half of the batch, forward and backward with no
// synchronisation until the gradients are summed, keeps both cores busy all step.
//
// How
// - Replica s (s >= 1) is built like the model and given alias_parameters(model): it reads the
//   model's parameter values (no copy; optimizer steps reach it) and keeps gradients of its own.
//   Shard 0 runs on the model itself.
// - Shard s takes rows [rows(s).first, rows(s).second) of the batch; sizes differ by at most 1.
// - The loss is the mean over the whole batch's counted targets: shard s seeds its backward
//   with n_s / n (its share of the targets), so the summed gradient is that of the mean.
// - Each replica's gradients are added into the model's, in shard order, and dropped. Without
//   ranks this happens per parameter as soon as every shard's gradient of it is final (Tape::
//   watch), so a replica holds the gradients of a few layers at a time, not of the whole model;
//   with ranks, GradExchange sums them. The shards and this order do not depend on the thread
//   count, so neither does any bit of the result: with 1 thread the shards run one after the other.
// - Dropout: every replica starts from a copy of the model's Rng state and is told its first
//   row (Module::set_rng), so each shard's masks are its rows of the masks the whole batch would
//   get; the model's own Rng advances as it would without shards.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "data/seq2seq_batches.h"
#include "nn/module.h"
#include "tensor/rng.h"
#include "train/collective.h"
#include "train/grad_exchange.h"

namespace atto {

class DataParallel {
 public:
  using MakeReplica = std::function<std::unique_ptr<nn::Module>()>;
  // shards >= 1; make_replica is called shards - 1 times. With a collective of N ranks this
  // process runs `shards` of the N * shards shards of every batch (rank r: shards r * shards
  // onwards) and the gradients are summed across the ranks in shard order (GradExchange,
  // overlapped with the backward when `overlap`): the same bits as one process with N * shards.
  DataParallel(nn::Module& model, int shards, const MakeReplica& make_replica, Collective* collective = nullptr,
               bool overlap = true);
  ~DataParallel();

  int shards() const { return static_cast<int>(models_.size()); }  // this process's
  int global_shards() const { return shards() * ranks_; }
  Collective* collective() const { return collective_; }
  nn::Module& model(int shard) { return *models_.at(static_cast<size_t>(shard)); }
  // Rows [first, second) of a B-row batch that this process's shard s takes.
  std::pair<int64_t, int64_t> rows(int shard, int64_t B) const;

  // Runs fn(s, model(s), first_row, end_row) for every shard with rows (a shard of an empty
  // range is skipped), spread over the threads (kernels::run_shards); fn runs forward and
  // backward. Then adds the replicas' gradients into the model's, in shard order.
  void run(int64_t B, const std::function<void(int, nn::Module&, int64_t, int64_t)>& fn);

 private:
  std::vector<nn::Module*> models_;  // [0] = the model
  std::vector<std::unique_ptr<nn::Module>> replicas_;
  // Trainable parameters of every shard's model, in trainable_parameters() order, listed once: the
  // gradient sum runs every step and need not rebuild the names.
  std::vector<std::vector<Tensor>> params_;
  std::vector<size_t> sum_index_;           // run()'s gradient sum: parameters with shards to add
  std::vector<int64_t> sum_n_;              // and their sizes (kept to reuse the storage)
  std::vector<std::unique_ptr<Rng>> rngs_;  // replica s's dropout Rng (a copy of the model's)
  Collective* collective_ = nullptr;
  int ranks_ = 1, first_shard_ = 0;  // the ranks, and this rank's first global shard
  std::unique_ptr<GradExchange> exchange_;
  // The early sum (run() without ranks): per parameter, how many shards' gradients are final
  // (-1: summed, or no early sum this step).
  std::unique_ptr<std::atomic<int>[]> ready_;
  size_t ready_n_ = 0;
  int shards_with_rows_ = 0;
  void begin_early_sum(int64_t B);
  void early_ready(size_t i);
  void sum_parameter(size_t i);
  void sum_local_gradients();
};

// The number of shards `shards` asks for (0 = auto) for batches of B rows: auto is 2 when the
// batch has 2 rows or more, else 1; never more shards than rows. Across `ranks` processes the
// count is per process, auto is 1 (the ranks are the data parallelism: 2 ranks x 1 shard give
// the bits of one process's auto 2 shards), and the ranks' shards together must not outnumber
// the rows.
int resolve_shards(int shards, int64_t B, int ranks = 1);

// Forward, cross-entropy and backward of a [B, T] batch of token ids for a GPT split over dp's
// shards (every dp.model(s) must be a GPT). x and y are row-major [B, T]; targets equal to
// ce.ignore_index do not count. The gradients of loss_scale * (mean loss over the counted
// targets) are accumulated into the model's parameters. Returns that mean loss (0 when no
// target counts, as cross_entropy).
double gpt_forward_backward(DataParallel& dp, const std::vector<int32_t>& x, const std::vector<int32_t>& y, int64_t B,
                            int64_t T, float loss_scale = 1.0f, const CrossEntropyOptions& ce = {});

// The same for an encoder-decoder (every dp.model(s) a Seq2Seq) on a padded batch: shard s
// takes rows of it with the batch's own S and T (slice_rows), so its dropout masks are those
// rows of the whole batch's.
double seq2seq_forward_backward(DataParallel& dp, const Seq2SeqBatch& b, float loss_scale = 1.0f,
                                const CrossEntropyOptions& ce = {});

}  // namespace atto
