// atto/run/run_config.h: everything that defines a training run, and its config.json form.
//
//   RunConfig cfg;                         // defaults: a small GPT for names/words
//   cfg.data.path = "names.txt";
//   cfg.train.steps = 2000;
//   nlohmann::json j = to_json(cfg);       // config.json of the run directory
//   RunConfig back = run_config_from_json(j, "runs/names/config.json");
//
// config.json holds three sections, each a typed struct here: "model" (GPTConfig or
// Seq2SeqConfig), "data" (where the text came from and how it is cut) and "train" (optimisation).
// Each key is declared once, in the field table of run/config_fields.cpp, with its flag, help
// and resume rule. "format_version" guards against files of a newer atto.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "data/text_file.h"
#include "kernels/kernels.h"
#include "models/gpt.h"
#include "models/seq2seq.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "tokenize/tokenizer.h"

namespace atto {

inline constexpr int kRunFormatVersion = 1;

// "Auto" values: a field holding one is chosen from the data when the run starts
// (train/auto_config.h), and config.json records the choice. default_run_config() sets them;
// a plain RunConfig{} holds concrete values.
inline constexpr int64_t kAutoInt = 0;  // d_model, n_heads, n_layers, block_size, batch_size, steps
inline constexpr float kAutoLr = 0.0f;
// The cosine schedule's floor unless given. An lr below it (--lr 1e-5, usual when fine-tuning)
// lowers the floor to lr / 10 (TrainConfig::cosine_floor) instead of being refused.
inline constexpr float kDefaultMinLr = 1e-4f;
inline constexpr float kAutoDropout = -1.0f;
inline constexpr int64_t kAutoWarmup = -1;
inline constexpr float kAutoWeightDecay = -1.0f;  // GPT
inline constexpr int64_t kAutoBatchTokens = -1;   // seq2seq (0 = batches of batch_size sentences)

// What a run trains: a GPT language model on one text, or an encoder-decoder Transformer on
// sentence pairs. Named "gpt" and "seq2seq" in config.json and --task.
enum class Task { Gpt, Seq2Seq };
const char* to_string(Task t);
Task parse_task(const std::string& s);  // atto::Error listing the names

// What makes an evaluation the best one (its weights are model.safetensors): the validation loss,
// or (seq2seq) the validation BLEU. Named "loss" and "bleu" in config.json and --best-by.
enum class BestBy { Loss, Bleu };
const char* to_string(BestBy b);
// What a run's best checkpoint is chosen by: the validation loss (lower is better) or BLEU
// (higher is better; seq2seq with best_by bleu and eval_bleu on).
enum class Metric { ValLoss, Bleu };
kernels::Precision parse_precision(const std::string& s);  // atto::Error naming --precision
BestBy parse_best_by(const std::string& s);                // atto::Error listing the names

struct DataConfig {
  std::string path;  // gpt: the training text file
  DataMode mode = DataMode::Auto;
  uint64_t split_seed = 1337;  // lines mode / seq2seq: the train/val shuffle
  std::string fingerprint;     // FNV-1a 64 of the training bytes (resume checks it is unchanged)
  // seq2seq: aligned source/target files (or one tab-separated file in `path`), optional
  // explicit validation files, and the subword model.
  std::string src, tgt, valid_src, valid_tgt;
  TokenizerKind tokenizer = TokenizerKind::Char;
  // The tokenizer to learn: bpe tokens, spm pieces, word cap (0 = the default; word: all). The
  // model's own vocab_size (GPTConfig) follows from the tokenizer it gets.
  int64_t tokenizer_vocab_size = 0;
  bool shared_vocab = false;  // one tokenizer (and embedding) for both languages
};

struct TrainConfig {
  std::string size = "auto";  // model size preset (auto_config.h): auto, or tiny/small/medium/large (gpt),
                              // small/base (seq2seq); explicit dimension flags override it
  double time_budget = 0.0;   // seconds of wall time to plan the run for (--time); 0 = none
  int64_t steps = 14000;      // total optimizer steps of the run
  int64_t decay_steps = 0;    // schedule length; 0 = steps
  int64_t batch_size = 64;
  int64_t grad_accum = 1;  // micro-batches per step
  float lr = 2e-3f;
  float min_lr = kDefaultMinLr;
  int64_t warmup = 100;
  optim::ScheduleKind schedule = optim::ScheduleKind::WarmupCosine;
  float weight_decay = 0.1f;
  float beta1 = 0.9f, beta2 = 0.99f, eps = 1e-8f;
  float grad_clip = 1.0f;  // 0 = off
  uint64_t seed = 1337;
  int threads = 0;  // 0 = all cores
  int shards = 0;   // data-parallel shards of a batch's rows (train/data_parallel.h); 0 = auto
  // bf16: the GEMMs take bf16 inputs (kernels.h); weights, gradients and AdamW stay fp32.
  kernels::Precision precision = kernels::Precision::F32;
  // Each block's activations recomputed in the backward (nn::Block::recompute): less memory.
  bool recompute = false;
  int64_t eval_every = 250;
  int64_t eval_batches = 0;  // 0 = the whole validation split
  int64_t early_stop = 0;    // stop after N evaluations without improvement; 0 = off
  int64_t log_every = 10;
  int64_t max_bad_steps = 5;  // consecutive non-finite steps before giving up
  optim::OptimizerKind optimizer = optim::OptimizerKind::AdamW;
  float momentum = 0.0f;  // sgd: heavy-ball momentum in [0, 1)
  bool nesterov = false;  // sgd: Nesterov momentum (needs momentum > 0)
  float label_smoothing = 0.0f;
  int64_t batch_tokens = 0;       // seq2seq: padded tokens per batch (0: use batch_size sentences)
  int64_t eval_bleu = 0;          // seq2seq: validation sentences decoded for BLEU (0 = none, -1 = all)
  BestBy best_by = BestBy::Loss;  // which evaluation keeps the best checkpoint
  // A new GPT run's starting model (fine-tuning, docs/finetune.md): an atto run directory, a Hugging
  // Face GPT-2 directory or a GGUF file. Its architecture, tokenizer and weights are the run's.
  std::string init_from;

  // Where a value came from, for messages: key -> "FILE: key 'eps'" for a value read from a config
  // file (or the C API's config_json). A key not listed was set by its flag or is the default:
  // messages name the flag. Not part of config.json.
  std::map<std::string, std::string> origin;

  void validate() const;  // atto::Error naming the value's origin (the flag, or the file and key) and the value
  optim::LrSchedule lr_schedule() const;  // needs steps, lr and warmup resolved
  // min_lr, or lr / 10 when min_lr is the default and lr is below it (kDefaultMinLr).
  float cosine_floor() const { return min_lr == kDefaultMinLr && lr != kAutoLr && lr < min_lr ? lr / 10.0f : min_lr; }
  std::string name_of(const char* key, const char* flag) const;  // origin[key], else the flag

 private:
  void validate_schedule() const;
  void validate_optimizer() const;
};

struct RunConfig {
  Task task = Task::Gpt;
  GPTConfig gpt;          // task gpt: the GPT's configuration (config.json's "model" section)
  Seq2SeqConfig seq2seq;  // task seq2seq
  DataConfig data;
  TrainConfig train;
};

// What the run's best checkpoint is chosen by (best_by, for a seq2seq run with eval_bleu on).
Metric best_metric(const RunConfig& cfg);

// The defaults of a task: seq2seq follows the paper (Adam 0.9/0.98/1e-9 with inverse-square-root
// warmup, label smoothing 0.1, dropout 0.1, post-norm, sinusoidal positions).
RunConfig default_run_config(Task task);

// config.json reading and writing, driven by the field table of run/config_fields.h (which
// also drives the command-line flags).
nlohmann::json to_json(const RunConfig& cfg);
// `source` names the file in error messages.
RunConfig run_config_from_json(const nlohmann::json& j, const std::string& source);
// Applies the keys present in j (flat, or in "model"/"data"/"train" sections) on top of cfg.
// Unknown keys are an error naming the key and the file.
void apply_config_json(RunConfig& cfg, const nlohmann::json& j, const std::string& source);

std::string fingerprint_bytes(std::string_view bytes);

// Names used in config.json and on the command line.
nn::Activation parse_activation(const std::string& s);
const char* to_string(nn::Activation a);
nn::NormKind parse_norm(const std::string& s);
const char* to_string(nn::NormKind n);
PosKind parse_pos(const std::string& s);
const char* to_string(PosKind p);

}  // namespace atto
