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
  // The best evaluation as a loss, lower is better: the validation loss, or minus BLEU when the
  // run keeps its best by BLEU (best_score turns it back); valid when best_step >= 0.
  double best_val_loss = 0.0;
  int64_t best_step = -1;
  int64_t evals_without_improvement = 0;
  int64_t skipped_steps = 0;  // non-finite steps skipped so far
  double elapsed_seconds = 0.0;
};

void save_train_state(const std::string& path, const nn::Module& model, const optim::Optimizer& opt,
                      const TrainState& st);
// The TrainState in a train_state file's metadata, read strictly (the one reader of it): exactly
// the keys atto writes; atto_format_version in [1, kRunFormatVersion]; every number parsed whole
// as atto writes it (decimal, no '+', no leading zeros, a sign only where negatives belong) and
// in range (step, skipped_steps >= 0; best_step in [-1, step]; evals_without_improvement in
// [0, step]; best_val_loss finite; elapsed_seconds finite and >= 0); each RNG state exactly 4
// unsigned words separated by single spaces, nothing after, not all zero. atto::Error names the
// file, the key and the value.
TrainState parse_train_state(const io::SafetensorsFile& f);
// Restores model weights, optimizer state and TrainState (parse_train_state), after checking that
// every tensor is finite (Adam's second moments also non-negative) and that the optimizer's step
// count is the state's step. Throws atto::Error, naming the file (and the tensor or key), when
// anything is missing or malformed; a missing file says that the run never saved a step.
TrainState load_train_state(const std::string& path, nn::Module& model, optim::Optimizer& opt);
// The best weights of the run in `dir` being resumed (model.safetensors; under LoRA
// adapter.safetensors, the frozen base being checked as it loads: run_dir.h load_lora_base):
// present when the state names a best step, holding exactly this model's tensors with its
// shapes, every value finite.
void check_best_weights(const std::string& dir, const TrainState& st, const nn::Module& model);
// The state belongs to the run config.json describes: its step is not beyond the planned steps.
void check_state_fits_run(const TrainState& st, const std::string& state_path, int64_t planned_steps,
                          const std::string& config_path);

}  // namespace atto
