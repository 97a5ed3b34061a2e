#include "run/config_fields.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <type_traits>

#include "base/duration.h"
#include "base/error.h"
#include "base/json.h"

namespace atto {

namespace {

using json = nlohmann::json;

// ==== Bindings: a field's member in a RunConfig, read and written as JSON ===================
struct Binding {
  ValueKind kind;
  std::function<json(const RunConfig&)> get;
  std::function<void(RunConfig&, const json&)> set;
};

// Where a member lives: `ref(cfg)` is a reference to it. `both` picks the model of the run's task.
template <typename T>
auto gpt(T GPTConfig::*m) {
  return [m](RunConfig& c) -> T& { return c.gpt.*m; };
}
template <typename T>
auto s2s(T Seq2SeqConfig::*m) {
  return [m](RunConfig& c) -> T& { return c.seq2seq.*m; };
}
template <typename T>
auto both(T GPTConfig::*g, T Seq2SeqConfig::*s) {
  return [g, s](RunConfig& c) -> T& { return c.task == Task::Seq2Seq ? c.seq2seq.*s : c.gpt.*g; };
}
template <typename T>
auto data(T DataConfig::*m) {
  return [m](RunConfig& c) -> T& { return c.data.*m; };
}
template <typename T>
auto train(T TrainConfig::*m) {
  return [m](RunConfig& c) -> T& { return c.train.*m; };
}

template <typename Ref>
using MemberOf = std::remove_reference_t<decltype(std::declval<Ref>()(std::declval<RunConfig&>()))>;

// A number, a switch or a string, checked against the member's type.
template <typename Ref>
Binding value(Ref ref) {
  using T = MemberOf<Ref>;
  constexpr ValueKind kind = std::is_same_v<T, bool>       ? ValueKind::Bool
                             : std::is_integral_v<T>       ? ValueKind::Int
                             : std::is_floating_point_v<T> ? ValueKind::Float
                                                           : ValueKind::Text;
  auto get = [ref](const RunConfig& c) { return json(ref(const_cast<RunConfig&>(c))); };
  auto set = [ref](RunConfig& c, const json& v) {
    if constexpr (std::is_same_v<T, bool>) {
      ATTO_CHECK(v.is_boolean(), "expected true or false");
    } else if constexpr (std::is_integral_v<T>) {
      ATTO_CHECK(v.is_number_integer(), "expected an integer");
      if constexpr (std::is_unsigned_v<T>) {
        ATTO_CHECK(v.is_number_unsigned() || v.get<int64_t>() >= 0, "expected a non-negative integer");
      } else {
        ATTO_CHECK(v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max())
                                          : v.get<int64_t>() >= std::numeric_limits<T>::min() &&
                                                v.get<int64_t>() <= std::numeric_limits<T>::max(),
                   "{} is out of range", json_util::excerpt(v));
      }
    } else if constexpr (std::is_floating_point_v<T>) {
      ATTO_CHECK(v.is_number(), "expected a number");
      // A JSON number is finite, but the member's type may not (nan, inf from a flag: validate()).
      const auto d = v.get<double>();
      ATTO_CHECK(!std::isfinite(d) || std::isfinite(static_cast<T>(d)), "out of the range of a {}-bit float",
                 8 * sizeof(T));
      ATTO_CHECK(d == 0.0 || static_cast<T>(d) != 0, "too small for a {}-bit float (it would be 0)", 8 * sizeof(T));
    } else {
      ATTO_CHECK(v.is_string(), "expected a string");
    }
    ref(c) = v.get<T>();
  };
  return {kind, get, set};
}

// One of a set of names: `parse` turns a name into the member's value (throwing atto::Error that
// lists the names), `name` the other way.
template <typename Ref, typename Parse, typename Name>
Binding choice(Ref ref, Parse parse, Name name) {
  auto get = [ref, name](const RunConfig& c) { return json(name(ref(const_cast<RunConfig&>(c)))); };
  auto set = [ref, parse](RunConfig& c, const json& v) {
    ATTO_CHECK(v.is_string(), "expected a string");
    ref(c) = parse(v.get<std::string>());
  };
  return {ValueKind::Choice, get, set};
}

bool parse_placement(const std::string& s) {
  if (s == "pre" || s == "post") return s == "pre";
  fail("unknown norm placement '{}': use pre or post", s);
}
const char* placement_name(bool pre_norm) { return pre_norm ? "pre" : "post"; }

// ==== The table =============================================================================
class Row {
 public:
  Row(const char* key, Section section, std::optional<Task> task, Binding b) {
    f_.key = key;
    f_.section = section;
    f_.task = task;
    f_.kind = b.kind;
    f_.get = std::move(b.get);
    f_.set = std::move(b.set);
  }
  Row& flag(const char* flag, const char* help) {
    f_.flag = flag;
    f_.help = help;
    return *this;
  }
  Row& fallback(const char* flag) {
    f_.fallback_flag = flag;
    return *this;
  }
  Row& shows(const char* default_str) {
    f_.default_str = default_str;
    return *this;
  }
  Row& on_resume() {
    f_.on_resume = true;
    return *this;
  }
  Row& duration_flag(std::function<void(RunConfig&)> also) {
    f_.kind = ValueKind::Duration;
    f_.flag_also = std::move(also);
    return *this;
  }
  operator ConfigField() const { return f_; }

 private:
  ConfigField f_;
};

constexpr std::optional<Task> kBoth = std::nullopt;
constexpr Task kGpt = Task::Gpt;
constexpr Task kS2S = Task::Seq2Seq;

std::vector<ConfigField> model_rows() {
  using S = Section;
  return {
      Row("d_model", S::Model, kBoth, value(both(&GPTConfig::d_model, &Seq2SeqConfig::d_model)))
          .flag("--d-model", "Model width; 0 = auto")
          .shows("auto"),
      Row("n_heads", S::Model, kBoth, value(both(&GPTConfig::n_heads, &Seq2SeqConfig::n_heads)))
          .flag("--n-heads", "Attention heads (must divide --d-model); 0 = auto")
          .shows("auto"),
      Row("n_layers", S::Model, kGpt, value(gpt(&GPTConfig::n_layers)))
          .flag("--n-layers", "Transformer blocks (seq2seq: encoder and decoder); 0 = auto")
          .shows("auto"),
      Row("block_size", S::Model, kGpt, value(gpt(&GPTConfig::block_size)))
          .flag("--block-size", "Context length; 0 = auto (lines: longest line + 1; stream: by model size)")
          .shows("auto"),
      Row("n_kv_heads", S::Model, kGpt, value(gpt(&GPTConfig::n_kv_heads)))
          .flag("--n-kv-heads", "Key/value heads: grouped-query attention (must divide --n-heads); 0 = --n-heads"),
      Row("vocab_size", S::Model, kGpt, value(gpt(&GPTConfig::vocab_size))),
      Row("d_ff", S::Model, kBoth, value(both(&GPTConfig::d_ff, &Seq2SeqConfig::d_ff)))
          .flag("--d-ff", "Feed-forward width; 0 = 4 * d-model"),
      Row("ffn", S::Model, kBoth,
          choice(both(&GPTConfig::activation, &Seq2SeqConfig::activation), parse_activation,
                 [](nn::Activation a) { return to_string(a); }))
          .flag("--ffn", "Feed-forward activation: relu, gelu, gelu_tanh, swiglu"),
      Row("norm", S::Model, kBoth,
          choice(both(&GPTConfig::norm, &Seq2SeqConfig::norm), parse_norm, [](nn::NormKind n) { return to_string(n); }))
          .flag("--norm", "layernorm or rmsnorm"),
      Row("norm_placement", S::Model, kBoth,
          choice(both(&GPTConfig::pre_norm, &Seq2SeqConfig::pre_norm), parse_placement, placement_name))
          .flag("--norm-placement", "pre (GPT-2) or post (2017 paper; seq2seq default)"),
      Row("pos", S::Model, kBoth,
          choice(both(&GPTConfig::pos, &Seq2SeqConfig::pos), parse_pos, [](PosKind p) { return to_string(p); }))
          .flag("--pos", "Positional encoding: learned, sinusoidal (seq2seq default) or rope (rotary, GPT)"),
      Row("rope_base", S::Model, kGpt, value(gpt(&GPTConfig::rope_base)))
          .flag("--rope-base", "Rotary positions: the base of their frequencies (Llama 2: 10000, Llama 3: 500000)"),
      Row("tie_weights", S::Model, kBoth, value(both(&GPTConfig::tie_weights, &Seq2SeqConfig::tie_weights)))
          .flag("--tie-weights,!--no-tie-weights", "Tie the output projection to the token embedding"),
      Row("bias", S::Model, kBoth, value(both(&GPTConfig::bias, &Seq2SeqConfig::bias)))
          .flag("--bias,!--no-bias", "Biases in Linear layers and LayerNorm"),
      Row("dropout", S::Model, kBoth, value(both(&GPTConfig::dropout, &Seq2SeqConfig::dropout)))
          .flag("--dropout", "Dropout probability; -1 = auto")
          .shows("auto"),
      // Encoder-decoder only.
      Row("src_vocab_size", S::Model, kS2S, value(s2s(&Seq2SeqConfig::src_vocab))),
      Row("tgt_vocab_size", S::Model, kS2S, value(s2s(&Seq2SeqConfig::tgt_vocab))),
      Row("max_len", S::Model, kS2S, value(s2s(&Seq2SeqConfig::max_len)))
          .flag("--max-len", "seq2seq: longest sentence in tokens (longer training pairs are skipped); 0 = auto")
          .shows("auto"),
      Row("n_enc_layers", S::Model, kS2S, value(s2s(&Seq2SeqConfig::n_enc_layers)))
          .flag("--n-enc-layers", "seq2seq: encoder layers (default --n-layers)")
          .fallback("--n-layers")
          .shows("auto"),
      Row("n_dec_layers", S::Model, kS2S, value(s2s(&Seq2SeqConfig::n_dec_layers)))
          .flag("--n-dec-layers", "seq2seq: decoder layers (default --n-layers)")
          .fallback("--n-layers")
          .shows("auto"),
      Row("share_embeddings", S::Model, kS2S, value(s2s(&Seq2SeqConfig::share_embeddings))).fallback("--shared-vocab"),
  };
}

// LoRA fine-tuning (GPTConfig::lora_rank): model keys, since the adapters are part of the model.
std::vector<ConfigField> lora_rows() {
  return {Row("lora_rank", Section::Model, kGpt, value(gpt(&GPTConfig::lora_rank)))
              .flag("--lora-rank", "LoRA: rank-R adapters over --init-from's frozen weights; 0 = full fine-tuning"),
          Row("lora_alpha", Section::Model, kGpt, value(gpt(&GPTConfig::lora_alpha)))
              .flag("--lora-alpha", "LoRA: the adapters' scale is alpha / rank; 0 = the rank (scale 1)"),
          Row("lora_targets", Section::Model, kGpt, value(gpt(&GPTConfig::lora_targets)))
              .flag("--lora-targets", "LoRA: layers to adapt, any of qkv, proj (attention), fc, fc2 (feed-forward)")};
}

std::vector<ConfigField> data_rows() {
  using S = Section;
  return {
      Row("data", S::Data, kBoth, value(data(&DataConfig::path)))
          .flag("--data", "Training text file (UTF-8); for seq2seq, one tab-separated file"),
      Row("mode", S::Data, kGpt,
          choice(data(&DataConfig::mode), parse_data_mode, [](DataMode m) { return to_string(m); }))
          .flag("--mode",
                "lines: one sample per line (names, words); stream: one token stream cut into blocks "
                "(prose); auto: lines when the median line is at most 32 characters"),
      Row("split_seed", S::Data, kBoth, value(data(&DataConfig::split_seed)))
          .flag("--split-seed", "Seed of the train/validation split (lines mode, seq2seq)"),
      Row("fingerprint", S::Data, kBoth, value(data(&DataConfig::fingerprint))),
      Row("src", S::Data, kS2S, value(data(&DataConfig::src)))
          .flag("--src", "seq2seq: source-language file, one sentence per line"),
      Row("tgt", S::Data, kS2S, value(data(&DataConfig::tgt)))
          .flag("--tgt", "seq2seq: target-language file, aligned with --src"),
      Row("valid_src", S::Data, kS2S, value(data(&DataConfig::valid_src)))
          .flag("--valid-src", "seq2seq: validation sources (default: a seeded split)"),
      Row("valid_tgt", S::Data, kS2S, value(data(&DataConfig::valid_tgt)))
          .flag("--valid-tgt", "seq2seq: validation targets"),
      Row("tokenizer", S::Data, kBoth,
          choice(data(&DataConfig::tokenizer), parse_tokenizer_kind, [](TokenizerKind k) { return to_string(k); }))
          .flag("--tokenizer",
                "GPT: char, bpe (byte-level BPE) or spm, learned on the data; seq2seq: char, word or spm"),
      Row("tokenizer_vocab_size", S::Data, kBoth, value(data(&DataConfig::tokenizer_vocab_size)))
          .flag("--tokenizer-vocab-size,--vocab-size",
                "The tokenizer's size: bpe tokens (0 = 2000); spm pieces (0 = 8000); word: cap (0 = all)"),
      Row("shared_vocab", S::Data, kS2S, value(data(&DataConfig::shared_vocab)))
          .flag("--shared-vocab", "seq2seq: one vocabulary and embedding for both sides"),
  };
}

// The optimisation: size, length, batch, optimiser and schedule.
std::vector<ConfigField> optimisation_rows() {
  using S = Section;
  auto plan_steps = [](RunConfig& c) { c.train.steps = kAutoInt; };  // --time sizes the run
  return {
      Row("size", S::Train, kBoth, value(train(&TrainConfig::size)))
          .flag("--size",
                "Model size preset: auto (from the data), gpt: tiny, small, medium, large; seq2seq: "
                "small, base. --d-model, --n-layers, --n-heads override it"),
      Row("time_budget_s", S::Train, kBoth, value(train(&TrainConfig::time_budget)))
          .flag("--time",
                "Wall-clock budget, e.g. 90s, 5m, 1h30m: measures its step time, then sizes the model "
                "(with --size auto) and the steps so the run ends on time with the LR decayed")
          .shows("none")
          .duration_flag(plan_steps),
      Row("steps", S::Train, kBoth, value(train(&TrainConfig::steps)))
          .flag("--steps", "Optimizer steps (with --resume: the new total); 0 = auto")
          .shows("auto")
          .on_resume(),
      Row("decay_steps", S::Train, kBoth, value(train(&TrainConfig::decay_steps)))
          .flag("--decay-steps", "Length of the LR schedule; 0 = --steps"),
      Row("batch_size", S::Train, kBoth, value(train(&TrainConfig::batch_size)))
          .flag("--batch-size", "Sequences per micro-batch; 0 = auto")
          .shows("auto"),
      Row("grad_accum", S::Train, kBoth, value(train(&TrainConfig::grad_accum)))
          .flag("--grad-accum", "Micro-batches per optimizer step"),
      Row("optimizer", S::Train, kBoth,
          choice(train(&TrainConfig::optimizer), optim::optimizer_kind_from_string,
                 [](optim::OptimizerKind k) { return optim::to_string(k); }))
          .flag("--optimizer",
                "adamw, adam or sgd (plain SGD with L2 --weight-decay; seq2seq default adam, as "
                "the paper)"),
      Row("lr", S::Train, kBoth, value(train(&TrainConfig::lr)))
          .flag("--lr", "Peak learning rate; 0 = auto (from --d-model)")
          .shows("auto"),
      Row("min_lr", S::Train, kBoth, value(train(&TrainConfig::min_lr)))
          .flag("--min-lr", "Floor of the cosine schedule"),
      Row("warmup", S::Train, kBoth, value(train(&TrainConfig::warmup)))
          .flag("--warmup", "Linear warmup steps; -1 = auto")
          .shows("auto"),
      Row("schedule", S::Train, kBoth,
          choice(train(&TrainConfig::schedule), optim::schedule_kind_from_string,
                 [](optim::ScheduleKind k) { return optim::to_string(k); }))
          .flag("--schedule", "constant, cosine (warmup + cosine decay), or invsqrt (Noam; seq2seq default)"),
      Row("weight_decay", S::Train, kBoth, value(train(&TrainConfig::weight_decay)))
          .flag("--weight-decay", "Weight decay (not on biases, norms, embeddings); -1 = auto (GPT), 0 for seq2seq")
          .shows("auto"),
      Row("beta1", S::Train, kBoth, value(train(&TrainConfig::beta1))).flag("--beta1", "Adam(W) beta1"),
      Row("beta2", S::Train, kBoth, value(train(&TrainConfig::beta2)))
          .flag("--beta2", "Adam(W) beta2 (seq2seq default 0.98)"),
      Row("eps", S::Train, kBoth, value(train(&TrainConfig::eps))).flag("--eps", "Adam(W) epsilon (seq2seq 1e-9)"),
      Row("momentum", S::Train, kBoth, value(train(&TrainConfig::momentum)))
          .flag("--momentum", "sgd: momentum in [0, 1)"),
      Row("nesterov", S::Train, kBoth, value(train(&TrainConfig::nesterov)))
          .flag("--nesterov", "sgd: Nesterov momentum (needs --momentum > 0)"),
      Row("grad_clip", S::Train, kBoth, value(train(&TrainConfig::grad_clip)))
          .flag("--grad-clip", "Clip the global gradient norm; 0 = off"),
      Row("label_smoothing", S::Train, kBoth, value(train(&TrainConfig::label_smoothing)))
          .flag("--label-smoothing", "Label smoothing (seq2seq default 0.1)"),
  };
}

// How the run goes: seeds, threads, evaluation, logging, the checkpoint kept.
std::vector<ConfigField> run_control_rows() {
  using S = Section;
  return {
      Row("init_from", S::Train, kGpt, value(train(&TrainConfig::init_from)))
          .flag("--init-from",
                "Fine-tune: start from this model (an atto run directory, a Hugging Face GPT-2 directory or a GGUF "
                "file): its architecture, tokenizer and weights; the optimizer starts fresh")
          .shows("none"),
      Row("seed", S::Train, kBoth, value(train(&TrainConfig::seed)))
          .flag("--seed", "Seed of the initial weights, batches and dropout"),
      Row("threads", S::Train, kBoth, value(train(&TrainConfig::threads)))
          .flag("--threads", "Threads; 0 = all cores")
          .on_resume(),
      Row("shards", S::Train, kBoth, value(train(&TrainConfig::shards)))
          .flag("--shards",
                "Split each batch into N data-parallel shards of its rows, run side by side (one "
                "thread each); the result does not depend on --threads. Under mpirun: shards per "
                "rank, and N ranks x S shards give the bits of one process with N*S. 0 = auto (2; "
                "1 per rank under mpirun). May change on --resume (only the summation order changes)")
          .on_resume(),
      Row("precision", S::Train, kBoth,
          choice(train(&TrainConfig::precision), parse_precision,
                 [](kernels::Precision x) { return kernels::precision_name(x); }))
          .flag("--precision",
                "fp32, or bf16: matrix products with bf16 inputs and fp32 sums on AMX or AVX512_BF16 "
                "(weights, gradients and AdamW stay fp32)")
          .on_resume(),
      Row("recompute", S::Train, kBoth, value(train(&TrainConfig::recompute)))
          .flag("--recompute",
                "Keep only each block's input for the backward and compute the block again there (activation "
                "checkpointing): the same bits, much less memory, about a third more time. May change on --resume")
          .on_resume(),
      Row("eval_every", S::Train, kBoth, value(train(&TrainConfig::eval_every)))
          .flag("--eval-every", "Evaluate the validation split every N steps")
          .on_resume(),
      Row("eval_batches", S::Train, kBoth, value(train(&TrainConfig::eval_batches)))
          .flag("--eval-batches", "Batches per evaluation; 0 = the whole split")
          .on_resume(),
      Row("early_stop", S::Train, kBoth, value(train(&TrainConfig::early_stop)))
          .flag("--early-stop", "Stop after N evaluations without improvement; 0 = off")
          .on_resume(),
      Row("best_by", S::Train, kBoth,
          choice(train(&TrainConfig::best_by), parse_best_by, [](BestBy b) { return to_string(b); }))
          .flag("--best-by", "Keep the checkpoint with the best loss or bleu (seq2seq default bleu)"),
      Row("log_every", S::Train, kBoth, value(train(&TrainConfig::log_every)))
          .flag("--log-every", "Log every N steps")
          .on_resume(),
      Row("max_bad_steps", S::Train, kBoth, value(train(&TrainConfig::max_bad_steps)))
          .flag("--max-bad-steps", "Consecutive non-finite steps (skipped) before the run gives up"),
      Row("batch_tokens", S::Train, kS2S, value(train(&TrainConfig::batch_tokens)))
          .flag("--batch-tokens", "seq2seq: padded tokens per batch; 0 = --batch-size sentences; -1 = auto")
          .shows("auto"),
      Row("eval_bleu", S::Train, kS2S, value(train(&TrainConfig::eval_bleu)))
          .flag("--eval-bleu", "seq2seq: validation sentences decoded for BLEU (-1 all, 0 none)")
          .on_resume(),
  };
}

bool uses(const ConfigField& f, Task task) { return !f.task || *f.task == task; }

// The field `key` of a section, for the run's task (model keys differ between the tasks; data
// and train keys are read and written for both, so every config.json has the same sections).
const ConfigField* find_field(Section s, const std::string& key, Task task) {
  for (const ConfigField& f : config_fields())
    if (f.section == s && key == f.key && (s != Section::Model || uses(f, task))) return &f;
  return nullptr;
}

// Sets the field from a config file's value; a train key remembers the file, so that validation
// names the file and the key, not a flag that was never given.
void set_from_json(const ConfigField& f, RunConfig& cfg, const json& v, const std::string& source) {
  try {
    f.set(cfg, v);
  } catch (const json::exception& e) {
    fail("{}: key '{}' = {}: {}", source, f.key, json_util::excerpt(v), e.what());
  } catch (const Error& e) {
    fail("{}: key '{}' = {}: {}", source, f.key, json_util::excerpt(v), e.what());
  }
  if (f.section == Section::Train) cfg.train.origin[f.key] = fmt::format("{}: key '{}'", source, f.key);
}

// A flag's text as the JSON value the field's `set` takes.
json flag_value(const ConfigField& f, const std::string& flag, const std::string& text) {
  switch (f.kind) {
    case ValueKind::Int: {
      int64_t i = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), i);
      if (ec == std::errc() && end == text.data() + text.size()) return json(i);
      uint64_t u = 0;
      const auto [uend, uec] = std::from_chars(text.data(), text.data() + text.size(), u);
      if (uec == std::errc() && uend == text.data() + text.size()) return json(u);
      throw UsageError(fmt::format("{} expects an integer, got '{}'", flag, text));
    }
    case ValueKind::Float: {
      char* end = nullptr;
      const double d = std::strtod(text.c_str(), &end);  // nan and inf parse: validate() names the range
      if (text.empty() || end != text.c_str() + text.size())
        throw UsageError(fmt::format("{} expects a number, got '{}'", flag, text));
      return json(d);
    }
    case ValueKind::Bool: return json(text == "true");
    case ValueKind::Duration: return json(parse_duration(text, flag));
    case ValueKind::Text:
    case ValueKind::Choice: return json(text);
  }
  return json(text);
}

// What a resumed run may change, as flags ("--steps, --threads, ...") or as config keys.
std::string resume_allowed(bool flags) {
  std::string names;
  for (const ConfigField& f : config_fields())
    if (f.on_resume && (!flags || f.flag)) names += (names.empty() ? "" : ", ") + (flags ? flag_name(f.flag) : f.key);
  return names;
}

}  // namespace

// ==== Public ================================================================================
const char* to_string(Section s) {
  switch (s) {
    case Section::Model: return "model";
    case Section::Data: return "data";
    case Section::Train: return "train";
  }
  return "?";
}

const std::vector<ConfigField>& config_fields() {
  static const std::vector<ConfigField> table = [] {
    std::vector<ConfigField> all = model_rows();
    for (auto& f : lora_rows()) all.push_back(std::move(f));
    for (auto rows : {data_rows(), optimisation_rows(), run_control_rows()})
      all.insert(all.end(), rows.begin(), rows.end());
    return all;
  }();
  return table;
}

std::string flag_name(const char* flag) {
  const std::string s = flag ? flag : "";
  return s.substr(0, s.find(','));
}

std::string default_text(const ConfigField& f) {
  if (f.default_str) return f.default_str;
  const json v = f.get(default_run_config(f.task.value_or(Task::Gpt)));
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return fmt::format("{}", static_cast<float>(v.get<double>()));
  return v.dump();
}

void apply_flags(RunConfig& cfg, bool resume,
                 const std::function<std::optional<std::string>(const std::string& name)>& value_of) {
  // Every flag the table knows, checked once: does the run's task use it, may --resume change it?
  std::set<std::string> checked;
  for (const ConfigField& f : config_fields()) {
    for (const char* spec : {f.flag, f.fallback_flag}) {
      if (!spec) continue;
      const std::string name = flag_name(spec);
      if (!checked.insert(name).second || !value_of(name)) continue;
      bool used = false, resumable = false;
      for (const ConfigField& g : config_fields()) {
        if (!uses(g, cfg.task) || (flag_name(g.flag) != name && flag_name(g.fallback_flag) != name)) continue;
        used = true;
        resumable = resumable || g.on_resume;
      }
      if (!used)
        throw UsageError(fmt::format("{} is for --task {}; this run's task is {}", name,
                                     to_string(cfg.task == Task::Gpt ? Task::Seq2Seq : Task::Gpt),
                                     to_string(cfg.task)));
      if (resume && !resumable) refuse_on_resume(name, true);
    }
  }
  for (const ConfigField& f : config_fields()) {
    if (!uses(f, cfg.task)) continue;
    std::string name = flag_name(f.flag);
    std::optional<std::string> text = f.flag ? value_of(name) : std::nullopt;
    const bool own = text.has_value();
    if (!own && f.fallback_flag) text = value_of(name = flag_name(f.fallback_flag));
    if (!text) continue;
    const json v = flag_value(f, name, *text);
    try {
      f.set(cfg, v);
    } catch (const json::exception& e) {
      throw UsageError(fmt::format("{} {}: {}", name, *text, e.what()));
    } catch (const Error& e) {
      throw UsageError(fmt::format("{} {}: {}", name, *text, e.what()));
    }
    if (f.section == Section::Train) cfg.train.origin.erase(f.key);  // validation names the flag
    if (own && f.flag_also) f.flag_also(cfg);
  }
}

nlohmann::json to_json(const RunConfig& cfg) {
  json j;
  j["format_version"] = kRunFormatVersion;
  j["task"] = to_string(cfg.task);
  j["model"] = json::object();
  j["data"] = json::object();
  j["train"] = json::object();
  for (const ConfigField& f : config_fields())
    if (f.section != Section::Model || uses(f, cfg.task)) j[to_string(f.section)][f.key] = f.get(cfg);
  j["model"]["type"] = to_string(cfg.task);
  return j;
}

void apply_config_json(RunConfig& cfg, const nlohmann::json& j, const std::string& source) {
  ATTO_CHECK(j.is_object(), "{}: expected a JSON object at the top level", source);
  if (j.contains("task")) {
    ATTO_CHECK(j["task"].is_string(), "{}: task {} is not gpt or seq2seq", source, json_util::excerpt(j["task"]));
    Task task;
    try {
      task = parse_task(j["task"].get<std::string>());
    } catch (const Error& e) {
      fail("{}: task {}: {}", source, json_util::excerpt(j["task"]), e.what());
    }
    if (task != cfg.task) {  // switch to that task's defaults before applying the keys
      cfg.task = task;
      cfg.train = default_run_config(task).train;
    }
  }
  // One key: in its section, or (a flat key) the first section that has it.
  auto apply_key = [&](std::string key, const json& v, std::optional<Section> in) {
    // config.json of atto 0.9 and earlier: the data section's vocab_size was the tokenizer's.
    if (key == "vocab_size" && in == Section::Data) key = "tokenizer_vocab_size";
    if (key == "type" && in == Section::Model) {
      ATTO_CHECK(v == to_string(cfg.task), "{}: model type {} does not match the task '{}'", source,
                 json_util::excerpt(v), to_string(cfg.task));
      return;
    }
    for (Section s : {Section::Model, Section::Data, Section::Train}) {
      if (in && *in != s) continue;
      if (const ConfigField* f = find_field(s, key, cfg.task)) return set_from_json(*f, cfg, v, source);
    }
    fail("{}: unknown key {}{}", source, json_util::printable(key),
         in ? fmt::format(" in section '{}'", to_string(*in)) : "");
  };
  for (const auto& [key, v] : j.items()) {
    if (key == "task") continue;  // handled above
    if (key == "format_version") {
      ATTO_CHECK(v.is_number_integer() && v.get<int>() >= 1 && v.get<int>() <= kRunFormatVersion,
                 "{}: format_version {} is not supported by this atto (it reads up to {})", source,
                 json_util::excerpt(v), kRunFormatVersion);
    } else if (key == "model" || key == "train" || (key == "data" && v.is_object())) {
      ATTO_CHECK(v.is_object(), "{}: section '{}' must be an object", source, key);
      const Section s = key == "model" ? Section::Model : key == "data" ? Section::Data : Section::Train;
      for (const auto& [k, value] : v.items()) apply_key(k, value, s);
    } else {
      apply_key(key, v, std::nullopt);
    }
  }
}

RunConfig run_config_from_json(const nlohmann::json& j, const std::string& source) {
  ATTO_CHECK(j.is_object() && j.contains("format_version") && j.contains("model"),
             "{}: not an atto run config (no format_version/model)", source);
  Task task = Task::Gpt;
  if (j.contains("task") && j["task"].is_string() && j["task"] == "seq2seq") task = Task::Seq2Seq;
  RunConfig cfg = default_run_config(task);
  apply_config_json(cfg, j, source);
  return cfg;
}

bool changeable_on_resume(const std::string& key) {
  for (const ConfigField& f : config_fields())
    if (key == f.key && f.on_resume) return true;
  return false;
}

void refuse_on_resume(const std::string& what, bool list_flags) {
  throw UsageError(fmt::format("{} cannot be changed when resuming (the run's config.json fixes it); allowed {}: {}",
                               what, list_flags ? "with --resume" : "when resuming", resume_allowed(list_flags)));
}

void check_new_run_inputs(const RunConfig& cfg, const std::function<std::string(const std::string& key)>& name) {
  if (cfg.task == Task::Gpt && cfg.data.path.empty())
    throw UsageError(fmt::format("no training data: give {} (the training text file of a new run)", name("data")));
  if (cfg.task == Task::Seq2Seq && cfg.data.path.empty() && (cfg.data.src.empty() || cfg.data.tgt.empty()))
    throw UsageError(fmt::format("a seq2seq run needs {} and {} (or {}, a .tsv file of pairs)", name("src"),
                                 name("tgt"), name("data")));
}

}  // namespace atto
