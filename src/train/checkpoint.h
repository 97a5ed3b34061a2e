// atto/train/checkpoint.h: the training state of a run directory (train_state.safetensors): the
// latest weights, the optimizer's moments, the step and the RNG states, for exact resume. The
// rest of the run directory (config, tokenizer, best weights, loading) is run/run_dir.h.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "optim/optimizer.h"
#include "run/run_dir.h"

namespace atto {

// Where training stands; saved in train_state.safetensors' metadata.
struct TrainState {
  int64_t step = 0;                       // optimizer steps done
  std::array<uint64_t, 4> data_rng{};     // batch sampling
  std::array<uint64_t, 4> dropout_rng{};  // dropout masks
  double best_val_loss =
      0.0;  // the best validation loss (or minus the best metric with --best-by bleu); valid when best_step >= 0
  int64_t best_step = -1;
  int64_t evals_without_improvement = 0;
  int64_t skipped_steps = 0;  // non-finite steps skipped so far
  double elapsed_seconds = 0.0;
};

void save_train_state(const std::string& path, const nn::Module& model, const optim::Optimizer& opt,
                      const TrainState& st);
// Restores model weights, optimizer state and TrainState. Throws atto::Error, naming the file,
// when anything is missing or malformed.
TrainState load_train_state(const std::string& path, nn::Module& model, optim::Optimizer& opt);

}  // namespace atto
