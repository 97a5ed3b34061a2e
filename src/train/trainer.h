// atto/train/trainer.h: the training loop of a GPT on a text file.
//
//   RunConfig cfg;
//   cfg.data.path = "names.txt";
//   TrainResult r = train_run(cfg, {.out_dir = "runs/names"});
//   fmt::print("best {} {:.4f} at step {}\n", r.metric == Metric::Bleu ? "BLEU" : "val loss", r.best_score, r.best_step);
//
//   train_run(cfg_with_more_steps, {.out_dir = "runs/names", .resume = true});   // exact resume
//
// One step: grad_accum micro-batches (forward, cross-entropy, backward), then a finite check
// (a NaN or Inf loss or gradient skips the step: the weights never see it), gradient clipping,
// the scheduled learning rate, and one optimizer update (AdamW, Adam or SGD). Every eval_every
// steps and at the end the whole validation split is scored (dropout off, nothing recorded); a
// new best writes model.safetensors; the training state is written at the same time. Ctrl-C stops at the end of
// the current step and saves the training state, so `--resume` continues the run.
//
// Reproducibility: the initial weights, the batch sequence and the dropout masks come from three
// Rngs seeded from cfg.train.seed; their states are saved, so a resumed run matches an
// uninterrupted one bit for bit (same thread count; kernels are thread-count independent anyway).
#pragma once

#include <atomic>
#include <cstdio>
#include <functional>
#include <string>

#include "run/run_config.h"
#include "train/collective.h"

namespace atto {

struct TrainProgress {
  int64_t step = 0, total_steps = 0;
  double train_loss = 0.0;     // this step's loss
  double val_loss = 0.0;       // NaN when this step did not evaluate
  double best_score = 0.0;     // the best evaluation so far, in `metric`'s units
  Metric metric = Metric::ValLoss;
  double elapsed_s = 0.0;      // this invocation's wall time
  double tokens_per_s = 0.0;   // since the previous logged step
};

struct TrainerOptions {
  std::string out_dir;
  bool resume = false;
  bool force = false;            // allow writing into a directory that already holds a run
  std::FILE* progress = stderr;  // progress and status; nullptr = silent
  // When it becomes true (set from another thread, or from a signal handler: the CLI's Ctrl-C),
  // training stops at the end of the current step and saves its state; --resume continues.
  // train_run installs no signal handler and leaves the thread count as it finds it (the CLI
  // sets kernels::set_num_threads from the config's threads).
  const std::atomic<bool>* stop = nullptr;
  // Called after every logged step and every evaluation (the library API's progress callback;
  // it stops a run through `stop`).
  std::function<void(const TrainProgress&)> on_progress = nullptr;
  // Several processes (mpirun): every rank calls train_run with the same configuration; each
  // runs its shards of every batch, the gradients are summed across the ranks, and rank 0 alone
  // writes the run directory and reports progress (train/collective.h, docs/distributed.md).
  DistOptions dist{};
};

struct TrainResult {
  int64_t steps = 0;  // step count at the end
  double last_train_loss = 0.0;
  double last_val_loss = 0.0;
  double best_score = 0.0;  // the best checkpoint's evaluation, in `metric`'s units
  Metric metric = Metric::ValLoss;
  int64_t best_step = -1;
  int64_t skipped_steps = 0;
  bool early_stopped = false;
  bool interrupted = false;
  double seconds = 0.0;  // wall time of this invocation
  int64_t tokens = 0;    // tokens processed in this invocation
  int64_t num_parameters = 0;
  bool val_is_train = false;     // "validation" scored the training set: the corpus was too small to split
  double time_budget = 0.0;      // --time, when this invocation planned the run for it
  double planned_seconds = 0.0;  // the plan's end, from the start of train_run
  double total_seconds = 0.0;    // wall time of train_run, data reading and planning included
};

// Trains (or, with opts.resume, continues) the run cfg describes: a GPT or a seq2seq model
// (cfg.task).
TrainResult train_run(RunConfig cfg, const TrainerOptions& opts);

// Mean cross-entropy (nats per counted target) of a GPT over a split, as the trainer's
// evaluation computes it: every target once, batches of B x T, at most max_batches (0 = all).
class GPT;
class TextDataset;
enum class Split;
// With byte_lengths (data/dataset.h: token_byte_lengths), *bits_per_byte receives the loss in
// bits per byte of the scored text.
double evaluate_loss(GPT& model, const TextDataset& data, Split split, int64_t B, int64_t T, int64_t max_batches = 0,
                     const std::vector<int32_t>* byte_lengths = nullptr, double* bits_per_byte = nullptr);

}  // namespace atto
