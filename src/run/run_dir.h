// atto/run/run_dir.h: the run directory, and loading a trained model from it (for inference:
// nothing here needs the trainer; train/checkpoint.h adds the training state).
//
//   runs/names/
//     config.json               model + data + train configuration (run/run_config.h)
//     tokenizer.json            the character vocabulary
//     model.safetensors         the best weights so far (lowest validation loss); of a LoRA
//                               run: the frozen base weights, written when the run starts
//     adapter.safetensors       LoRA runs: the best adapters (lora_A, lora_B of each layer)
//     train_state.safetensors   the latest weights, optimizer moments, step, RNG states: exact resume
//     metrics.jsonl             one JSON object per logged step and per evaluation
//
// Every file is written atomically (temporary file, fsync, rename): an interrupted write never
// leaves a half-written file under the real name. model.safetensors uses the nanoGPT names of
// GPT::state_dict() (docs/checkpoint-format.md), so a PyTorch GPT loads it without renaming.
#pragma once

#include <memory>
#include <string>

#include "io/safetensors.h"
#include "models/gpt.h"
#include "models/seq2seq.h"
#include "run/run_config.h"
#include "tokenize/char_tokenizer.h"
#include "tokenize/tokenizer.h"

namespace atto {

std::string run_path(const std::string& dir, const char* file);  // dir + "/" + file
inline constexpr const char* kAdapterFile = "adapter.safetensors";
// The file that holds a model's best weights: adapter.safetensors when some of its parameters
// are frozen (LoRA), else model.safetensors.
const char* best_weights_file(const nn::Module& model);
// The model's best weights into dir/best_weights_file(model): all of them, or the adapters.
void save_best_weights(const std::string& dir, const nn::Module& model);

// The model's parameters of `which` (all; or, under LoRA, the frozen base or the adapters).
void save_model_weights(const std::string& path, const nn::Module& model,
                        nn::Module::Which which = nn::Module::Which::All);
void load_model_weights(const std::string& path, nn::Module& model, nn::Module::Which which = nn::Module::Which::All);
// A LoRA run's frozen base (dir/model.safetensors, written when the run started) into the
// model's frozen parameters: exactly those tensors, with their shapes, every value finite;
// atto::Error naming the file otherwise.
void load_lora_base(const std::string& dir, nn::Module& model);
// Throws atto::Error naming the file, the tensor and the first NaN or infinite value in it (and,
// for one tensor, what to do). load_run refuses such weights: a NaN can vanish inside a forward
// pass (attention treats a row of NaN scores as fully masked), so checking the logits alone
// would let `atto sample` print text from a damaged checkpoint.
void check_finite_tensor(const Tensor& t, const std::string& path, const std::string& name, const char* what_to_do);
void check_finite_weights(const io::SafetensorsFile& f);

// A trained GPT ready for sampling, scoring and evaluation.
struct LoadedModel {
  RunConfig config;
  std::shared_ptr<const GptTokenizer> tokenizer;  // characters or byte-level BPE
  std::unique_ptr<GPT> model;
  // A LoRA run (GPTConfig::lora_rank > 0): the adapter file merged into `model`, whose config
  // (and config.gpt) has no adapters; empty otherwise.
  std::string lora_adapter;
};
// Reads config.json, tokenizer.json and model.safetensors of a run directory, validating that
// they agree (vocabulary size, tensor names and shapes). Before any model is built, config.json's
// dimensions (vocab_size, d_model, block_size of learned positions, d_ff, n_layers) are checked
// against the tensor shapes in model.safetensors's header, and block_size against kMaxPositions;
// the weights must be finite (check_finite_weights). Stale temporary files of killed saves in
// the directory are removed first (io::remove_stale_temp_files; best effort).
//
// A GGUF file loads too (load_gguf). Its q8_0, q4_0, Q4_K and Q6_K matrices are converted to floats unless
// `weights` is Quantized: then the linear layers and the token embedding keep their quantized
// rows and compute on them (integer kernels, a quarter to an eighth of the memory), for the
// commands that only run the model (sample, score, eval, serve, the C API's generation); the
// model then cannot train, export or be inspected (an atto::Error says so).
enum class WeightStorage { Floats, Quantized };
LoadedModel load_run(const std::string& dir, WeightStorage weights = WeightStorage::Floats);
RunConfig load_run_config(const std::string& dir);

// A trained encoder-decoder: config, source and target tokenizers (DIR/src, DIR/tgt), weights.
struct LoadedSeq2Seq {
  RunConfig config;
  std::unique_ptr<Tokenizer> src_tok, tgt_tok;
  std::unique_ptr<Seq2Seq> model;
};
// The same checks as load_run (src/tgt vocabulary sizes, d_model, max_len of learned positions,
// d_ff, n_enc_layers, n_dec_layers), except the finite-weights check: non-finite weights show as
// non-finite logits when decoding (generate/seq2seq_decode.h).
LoadedSeq2Seq load_seq2seq_run(const std::string& dir);
// DIR/tokenizer.json of a GPT run: characters or byte-level BPE.
std::unique_ptr<GptTokenizer> load_tokenizer(const std::string& dir);

// True if `dir` holds any of the run files (so a new run must not write there).
bool looks_like_run(const std::string& dir);

}  // namespace atto
