// atto/train/task.h: what the training loop needs from a model family.
//
// The loop (trainer.cpp) is one for all models: it asks the task for micro-batch losses, steps
// the optimizer, asks for evaluations and saves checkpoints. A task owns the model and its data
// and knows how to turn a batch into a loss: GptTask (language modelling on a text file) and,
// with the encoder-decoder, Seq2SeqTask (translation on a parallel corpus).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"
#include "run/run_config.h"
#include "tensor/rng.h"
#include "train/collective.h"

namespace atto {

struct Evaluation {
  double loss = 0.0;    // mean cross-entropy per target token over the validation split
  double metric = 0.0;  // e.g. BLEU; valid when has_metric
  bool has_metric = false;
  std::string metric_name;     // "bleu"
  bool on_train_set = false;   // the corpus was too small to hold anything out (data/dataset.h)
  double bits_per_byte = 0.0;  // GPT: the loss in bits per byte of text (0: not computed)
};

class TrainTask {
 public:
  virtual ~TrainTask() = default;
  virtual nn::Module& model() = 0;
  // Samples one training micro-batch with data_rng, runs forward and backward (accumulating the
  // gradients of loss_scale * loss into the model's parameters) and returns the loss.
  virtual double forward_backward(Rng& data_rng, float loss_scale) = 0;
  // Tokens (inputs) in the last micro-batch, for throughput.
  virtual int64_t last_batch_tokens() const = 0;
  // The validation loss (and metric), dropout off, nothing recorded.
  virtual Evaluation evaluate() = 0;
  // One line describing the model and data.
  virtual std::string summary() const = 0;
  // What the data decided of the settings the user left out, and why (train/auto_config.h).
  virtual const std::vector<std::string>& auto_notes() const = 0;
  // Writes the tokenizer(s) into a new run directory.
  virtual void write_files(const std::string& dir) const = 0;
};

// A model built for training: `m` with --recompute set as cfg says (the model and its replicas).
template <class Model>
std::unique_ptr<Model> with_recompute(std::unique_ptr<Model> m, const TrainConfig& t) {
  m->set_recompute(t.recompute);
  return m;
}

// Builds the task of cfg.task. Resolves what the data decides (data mode, block size,
// vocabulary) into cfg. A new run builds its tokenizer(s) from the data; a resumed one loads
// them from `dir`.
// With dist.collective (several ranks), the task's DataParallel runs this rank's shards of every
// batch and sums the gradients across the ranks (train/data_parallel.h).
std::unique_ptr<TrainTask> make_task(RunConfig& cfg, const std::string& dir, bool resume, Rng& init_rng,
                                     const DistOptions& dist = {});

std::unique_ptr<TrainTask> make_gpt_task(RunConfig& cfg, const std::string& dir, bool resume, Rng& init_rng,
                                         const DistOptions& dist);
std::unique_ptr<TrainTask> make_seq2seq_task(RunConfig& cfg, const std::string& dir, bool resume, Rng& init_rng,
                                             const DistOptions& dist);

}  // namespace atto
