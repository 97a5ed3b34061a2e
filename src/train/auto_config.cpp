#include "train/auto_config.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "base/error.h"

namespace atto {

namespace {

// ---- the tables (docs/defaults.md explains each number) ---------------------------------------
struct GptRung {
  const char* name;
  int64_t max_tokens;  // corpora below this many training tokens get this rung
  int64_t d_model, n_layers, n_heads;
  int64_t stream_block;  // stream mode's context
  // Training tokens (batch x block x steps) of a default run, lines and stream mode: a stream's
  // longer context costs more per token.
  int64_t lines_budget, stream_budget;
};
constexpr GptRung kGptRungs[] = {
    {"tiny", 20'000, 32, 2, 4, 32, 2'000'000, 2'000'000},
    {"small", 3'000'000, 128, 6, 4, 64, 12'000'000, 8'000'000},
    {"medium", 30'000'000, 256, 6, 8, 128, 4'000'000, 4'000'000},
    {"large", INT64_MAX, 384, 6, 6, 256, 2'000'000, 2'000'000},
};
constexpr int64_t kStreamBatchTokens = 2048;  // stream: batch = this / block
constexpr int64_t kLinesBatch = 64, kTinyLinesBatch = 32;
constexpr int64_t kMinSteps = 500;

struct Seq2SeqRung {
  const char* name;
  int64_t max_tokens;
  int64_t d_model, n_layers, n_heads, batch_tokens;
  float lr;
  int64_t warmup, steps;
};
constexpr Seq2SeqRung kSeq2SeqRungs[] = {
    {"small", 500'000, 64, 2, 4, 2048, 2e-3f, 100, 1500},
    {"base", INT64_MAX, 256, 3, 4, 4096, 1e-3f, 800, 2500},
};
constexpr int64_t kSymbolicVocab = 64;  // seq2seq: no dropout at or below this target vocabulary

template <typename Rung, size_t N>
const Rung& rung_named(const Rung (&rungs)[N], const std::string& name, const char* task) {
  for (const Rung& r : rungs)
    if (name == r.name) return r;
  std::string names;
  for (const Rung& r : rungs) names += std::string(names.empty() ? "" : ", ") + r.name;
  fail("--size '{}' is not a {} size: use auto or one of {}", name, task, names);
}
template <typename Rung, size_t N>
const Rung& rung_for(const Rung (&rungs)[N], int64_t tokens) {
  for (const Rung& r : rungs)
    if (tokens < r.max_tokens) return r;
  return rungs[N - 1];
}
template <typename Rung, size_t N>
std::vector<std::string> names_of(const Rung (&rungs)[N]) {
  std::vector<std::string> v;
  for (const Rung& r : rungs) v.emplace_back(r.name);
  return v;
}

std::string count(int64_t n) {  // 12000000 -> "12M", 228145 -> "228k"
  if (n >= 1'000'000) return fmt::format("{:.3g}M", static_cast<double>(n) / 1e6);
  if (n >= 1'000) return fmt::format("{:.3g}k", static_cast<double>(n) / 1e3);
  return fmt::format("{}", n);
}

int64_t round_steps(double steps) {
  return std::max<int64_t>(kMinSteps, static_cast<int64_t>(std::llround(steps / 100.0)) * 100);
}

// The chosen rung: --size, or the data's.
template <typename Rung, size_t N>
const Rung& choose_rung(const Rung (&rungs)[N], TrainConfig& t, int64_t tokens, const char* task,
                        std::vector<std::string>& why, const char* reason = nullptr) {
  if (t.size != "auto") return rung_named(rungs, t.size, task);
  const Rung& r = rung_for(rungs, tokens);
  why.push_back(reason ? fmt::format("size {}: {}", r.name, reason)
                       : fmt::format("size {}: {} training tokens", r.name, count(tokens)));
  t.size = r.name;
  return r;
}

void set_warmup(TrainConfig& t, std::vector<std::string>& why) {
  if (t.warmup != kAutoWarmup) return;
  t.warmup = std::min<int64_t>(100, t.steps / 10);
  why.push_back(fmt::format("warmup {} steps: min(100, steps / 10)", t.warmup));
}

// AdamW's decoupled decay: lines mode's many passes over short samples take more (names.txt:
// 1.9150 and 1.9140 at 0.3 against 1.9230 and 1.9188 at 0.1, seeds 1337 and 2). SGD and Adam
// add the decay to the gradient (L2), where PyTorch's default is none.
void set_gpt_weight_decay(TrainConfig& t, bool tiny, bool lines, std::vector<std::string>& why) {
  if (t.weight_decay != kAutoWeightDecay) return;
  const bool adamw = t.optimizer == optim::OptimizerKind::AdamW;
  t.weight_decay = !adamw ? 0.0f : lines && !tiny ? 0.3f : 0.1f;
  why.push_back(fmt::format(
      "weight decay {:g}: {}", t.weight_decay,
      !adamw           ? "L2 through the gradient is off by default for " + std::string(optim::to_string(t.optimizer))
      : lines && !tiny ? std::string("lines mode goes over short samples many times")
                       : std::string("AdamW's usual decay")));
}

// The GPT's lr by width. Lines mode's short samples take a larger step at d_model 128 (names.txt:
// 2e-3 reached 1.921 where 1e-3 reached 1.930, docs/defaults.md). Fine-tuning starts from trained
// weights: a tenth of the from-scratch step keeps what they know (docs/finetune.md). LoRA's
// adapters start at zero and leave the weights frozen: they take the from-scratch step.
void set_gpt_lr(TrainConfig& t, int64_t d_model, bool lines, bool fine_tune, bool lora, std::vector<std::string>& why) {
  const float scratch = d_model <= 64 || (lines && d_model <= 128) ? 2e-3f : d_model <= 128 ? 1e-3f : 6e-4f;
  t.lr = fine_tune && !lora ? scratch / 10.0f : scratch;
  t.min_lr = std::min(t.min_lr, t.lr / 10.0f);
  const char* mode = lines ? " in lines mode" : "";
  why.push_back(lora        ? fmt::format("lr {:g}: LoRA adapters, d_model {}'s from-scratch step{}", t.lr, d_model, mode)
                : fine_tune ? fmt::format("lr {:g}: fine-tuning, a tenth of d_model {}'s from-scratch {:g}{}", t.lr,
                                          d_model, scratch, mode)
                            : fmt::format("lr {:g}: d_model {}{}", t.lr, d_model, mode));
}

}  // namespace

const std::vector<std::string>& gpt_sizes() {
  static const std::vector<std::string> v = names_of(kGptRungs);
  return v;
}
const std::vector<std::string>& seq2seq_sizes() {
  static const std::vector<std::string> v = names_of(kSeq2SeqRungs);
  return v;
}
std::string gpt_size_for(int64_t train_tokens) { return rung_for(kGptRungs, train_tokens).name; }
std::string gpt_size_of(const GPTConfig& m) {
  for (const GptRung& r : kGptRungs)
    if (r.d_model == m.d_model && r.n_layers == m.n_layers && r.n_heads == m.n_heads) return r.name;
  return "";
}
std::string seq2seq_size_for(int64_t train_tokens) { return rung_for(kSeq2SeqRungs, train_tokens).name; }

std::vector<std::string> resolve_gpt_auto(RunConfig& cfg, const GptDataFacts& f) {
  std::vector<std::string> why;
  GPTConfig& m = cfg.gpt;
  TrainConfig& t = cfg.train;
  const GptRung& r = choose_rung(kGptRungs, t, f.train_tokens, "GPT", why);
  const bool tiny = std::string(r.name) == "tiny", lines = f.mode == DataMode::Lines;
  if (m.d_model == kAutoInt || m.n_layers == kAutoInt || m.n_heads == kAutoInt) {
    if (m.d_model == kAutoInt) m.d_model = r.d_model;
    if (m.n_layers == kAutoInt) m.n_layers = r.n_layers;
    if (m.n_heads == kAutoInt) m.n_heads = m.d_model % r.n_heads == 0 ? r.n_heads : 1;
    why.push_back(fmt::format("d_model {}, {} layers, {} heads", m.d_model, m.n_layers, m.n_heads));
  }
  if (m.block_size == kAutoInt) {
    // At least 1: a stream too short for any block (max_block <= 0) is then refused by the
    // dataset's check_block_size, which names the file.
    m.block_size = std::max<int64_t>(1, lines ? f.min_block : std::min(r.stream_block, f.max_block));
    why.push_back(lines ? fmt::format("block {}: the longest line + 1", m.block_size)
                        : fmt::format("block {}: size {}'s context{}", m.block_size, r.name,
                                      m.block_size < r.stream_block ? ", cut to what the data allows" : ""));
  }
  // The sizes below divide by the block: a given --block-size is validated only after this (it
  // may be 0 or negative here), so they use a block of at least 1.
  const int64_t block = std::max<int64_t>(1, m.block_size);
  if (t.batch_size == kAutoInt) {
    t.batch_size = lines ? (tiny ? kTinyLinesBatch : kLinesBatch) : std::max<int64_t>(1, kStreamBatchTokens / block);
    why.push_back(
        lines ? fmt::format("batch {} lines", t.batch_size)
              : fmt::format("batch {} sequences ({} tokens a step)", t.batch_size, t.batch_size * m.block_size));
  }
  if (t.steps == kAutoInt && t.time_budget == 0.0) {
    const int64_t budget = lines ? r.lines_budget : r.stream_budget;
    t.steps = round_steps(static_cast<double>(budget) / (static_cast<double>(std::max<int64_t>(1, t.batch_size)) *
                                                         static_cast<double>(block)));
    why.push_back(fmt::format("{} steps: size {}'s budget of {} tokens / {} tokens a step", t.steps, r.name,
                              count(budget), t.batch_size * m.block_size));
  }
  if (t.lr == kAutoLr) set_gpt_lr(t, m.d_model, lines, f.fine_tune, m.lora(), why);
  if (t.steps != kAutoInt) set_warmup(t, why);
  if (m.dropout == kAutoDropout && f.fine_tune) {
    m.dropout = 0.0f;
    why.push_back("dropout 0: fine-tuning (as nanoGPT's finetune recipe; give --dropout to regularise)");
  }
  if (m.dropout == kAutoDropout) {
    m.dropout = tiny ? 0.0f : lines ? 0.2f : 0.1f;
    why.push_back(fmt::format("dropout {:g}: {}", m.dropout,
                              tiny    ? "a tiny corpus is to be learned by heart"
                              : lines ? "lines mode goes over short samples many times"
                                      : "stream mode"));
  }
  set_gpt_weight_decay(t, tiny, lines, why);
  return why;
}

std::vector<std::string> resolve_seq2seq_auto(RunConfig& cfg, const Seq2SeqDataFacts& f) {
  std::vector<std::string> why;
  Seq2SeqConfig& m = cfg.seq2seq;
  TrainConfig& t = cfg.train;
  // A symbolic task stays small however long its sequences (a character tokenizer doubles them).
  const bool symbolic = f.tgt_vocab <= kSymbolicVocab;
  const std::string reason = fmt::format("a target vocabulary of {} types is a symbolic task", f.tgt_vocab);
  const Seq2SeqRung& r =
      choose_rung(kSeq2SeqRungs, t, symbolic ? 0 : f.train_tokens, "seq2seq", why, symbolic ? reason.c_str() : nullptr);
  if (m.d_model == kAutoInt || m.n_enc_layers == kAutoInt || m.n_dec_layers == kAutoInt || m.n_heads == kAutoInt) {
    if (m.d_model == kAutoInt) m.d_model = r.d_model;
    if (m.n_enc_layers == kAutoInt) m.n_enc_layers = r.n_layers;
    if (m.n_dec_layers == kAutoInt) m.n_dec_layers = r.n_layers;
    if (m.n_heads == kAutoInt) m.n_heads = m.d_model % r.n_heads == 0 ? r.n_heads : 1;
    why.push_back(fmt::format("d_model {}, {} + {} layers, {} heads, d_ff {}", m.d_model, m.n_enc_layers,
                              m.n_dec_layers, m.n_heads, m.d_ff == 0 ? 4 * m.d_model : m.d_ff));
  }
  if (t.batch_tokens == kAutoBatchTokens) {
    t.batch_tokens = r.batch_tokens;
    why.push_back(fmt::format("batches of <= {} tokens", t.batch_tokens));
  }
  if (t.steps == kAutoInt && t.time_budget == 0.0) {
    t.steps = r.steps;
    why.push_back(fmt::format("{} steps (size {})", t.steps, r.name));
  }
  if (t.lr == kAutoLr) {
    t.lr = r.lr;
    why.push_back(fmt::format("lr {:g} (size {})", t.lr, r.name));
  }
  if (t.warmup == kAutoWarmup) {
    t.warmup = r.warmup;
    if (t.steps != kAutoInt && t.schedule != optim::ScheduleKind::InverseSqrt)
      t.warmup = std::min(t.warmup, t.steps / 10);
    why.push_back(fmt::format("warmup {} steps", t.warmup));
  }
  if (m.dropout == kAutoDropout) {
    m.dropout = symbolic ? 0.0f : 0.1f;
    why.push_back(symbolic ? fmt::format("dropout 0: a target vocabulary of {} types is a symbolic task", f.tgt_vocab)
                           : std::string("dropout 0.1 (the paper)"));
  }
  if (t.weight_decay == kAutoWeightDecay) t.weight_decay = 0.0f;  // the paper's Adam has none
  return why;
}

}  // namespace atto
