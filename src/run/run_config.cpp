#include "run/run_config.h"

#include <cmath>
#include <functional>
#include <vector>

#include "base/error.h"

namespace atto {

// ============================================================================================
// Enum names
// ============================================================================================
nn::Activation parse_activation(const std::string& s) {
  if (s == "relu") return nn::Activation::ReLU;
  if (s == "gelu") return nn::Activation::GELU;
  if (s == "gelu_tanh" || s == "gelu-tanh") return nn::Activation::GELUTanh;
  if (s == "swiglu") return nn::Activation::SwiGLU;
  fail("unknown feed-forward activation '{}': use relu, gelu, gelu_tanh or swiglu", s);
}
const char* to_string(nn::Activation a) {
  switch (a) {
    case nn::Activation::ReLU: return "relu";
    case nn::Activation::GELU: return "gelu";
    case nn::Activation::GELUTanh: return "gelu_tanh";
    case nn::Activation::SwiGLU: return "swiglu";
  }
  return "?";
}
nn::NormKind parse_norm(const std::string& s) {
  if (s == "layernorm") return nn::NormKind::LayerNorm;
  if (s == "rmsnorm") return nn::NormKind::RMSNorm;
  fail("unknown norm '{}': use layernorm or rmsnorm", s);
}
const char* to_string(nn::NormKind n) { return n == nn::NormKind::LayerNorm ? "layernorm" : "rmsnorm"; }
PosKind parse_pos(const std::string& s) {
  if (s == "learned") return PosKind::Learned;
  if (s == "sinusoidal") return PosKind::Sinusoidal;
  fail("unknown positional encoding '{}': use learned or sinusoidal", s);
}
const char* to_string(PosKind p) { return p == PosKind::Learned ? "learned" : "sinusoidal"; }

std::string fingerprint_bytes(std::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("fnv1a64:{:016x}", h);
}

// ============================================================================================
// Validation
// ============================================================================================
void TrainConfig::validate() const {
  ATTO_CHECK(steps >= 1 || steps == kAutoInt, "--steps must be at least 1 (0 = auto), got {}", steps);
  ATTO_CHECK(std::isfinite(time_budget) && time_budget >= 0.0, "--time must be a positive duration, got {} s",
             time_budget);
  ATTO_CHECK(decay_steps >= 0, "--decay-steps must be >= 0 (0 = --steps), got {}", decay_steps);
  ATTO_CHECK(batch_size >= 1 || batch_size == kAutoInt, "--batch-size must be at least 1 (0 = auto), got {}",
             batch_size);
  ATTO_CHECK(grad_accum >= 1, "--grad-accum must be at least 1, got {}", grad_accum);
  ATTO_CHECK(std::isfinite(lr) && lr >= 0.0f, "--lr must be a positive finite number (0 = auto), got {}", lr);
  ATTO_CHECK(std::isfinite(min_lr) && min_lr >= 0.0f && (lr == kAutoLr || min_lr <= lr),
             "--min-lr must be finite and in [0, --lr = {}], got {}", lr, min_lr);
  ATTO_CHECK(warmup >= 0 || warmup == kAutoWarmup, "--warmup must be >= 0 (-1 = auto), got {}", warmup);
  ATTO_CHECK(std::isfinite(weight_decay) && (weight_decay >= 0.0f || weight_decay == kAutoWeightDecay),
             "--weight-decay must be >= 0 (-1 = auto), got {}", weight_decay);
  ATTO_CHECK(beta1 >= 0.0f && beta1 < 1.0f && beta2 >= 0.0f && beta2 < 1.0f,
             "--beta1 and --beta2 must be in [0, 1), got {} and {}", beta1, beta2);
  ATTO_CHECK(eps > 0.0f, "--eps must be positive, got {}", eps);
  ATTO_CHECK(std::isfinite(grad_clip) && grad_clip >= 0.0f, "--grad-clip must be >= 0 (0 = off), got {}",
             grad_clip);
  ATTO_CHECK(threads >= 0, "--threads must be >= 0 (0 = all cores), got {}", threads);
  ATTO_CHECK(shards >= 0, "--shards must be >= 0 (0 = auto), got {}", shards);
  ATTO_CHECK(eval_every >= 1, "--eval-every must be at least 1, got {}", eval_every);
  ATTO_CHECK(eval_batches >= 0, "--eval-batches must be >= 0 (0 = whole split), got {}", eval_batches);
  ATTO_CHECK(early_stop >= 0, "--early-stop must be >= 0 (0 = off), got {}", early_stop);
  ATTO_CHECK(log_every >= 1, "--log-every must be at least 1, got {}", log_every);
  ATTO_CHECK(max_bad_steps >= 1, "--max-bad-steps must be at least 1, got {}", max_bad_steps);
  ATTO_CHECK(std::isfinite(momentum) && momentum >= 0.0f && momentum < 1.0f, "--momentum must be in [0, 1), got {}",
             momentum);
  ATTO_CHECK(!nesterov || momentum > 0.0f, "--nesterov needs --momentum > 0");
  ATTO_CHECK(optimizer == optim::OptimizerKind::SGD || (momentum == 0.0f && !nesterov),
             "--momentum and --nesterov are SGD's: pass --optimizer sgd (got --optimizer {})", optim::to_string(optimizer));
  ATTO_CHECK(label_smoothing >= 0.0f && label_smoothing < 1.0f, "--label-smoothing must be in [0, 1), got {}",
             label_smoothing);
  ATTO_CHECK(batch_tokens >= 0 || batch_tokens == kAutoBatchTokens,
             "--batch-tokens must be >= 0 (0 = --batch-size sentences, -1 = auto), got {}", batch_tokens);
  ATTO_CHECK(eval_bleu >= -1, "--eval-bleu must be >= -1 (-1 = all, 0 = none), got {}", eval_bleu);
  if (steps != kAutoInt && lr != kAutoLr && warmup != kAutoWarmup) lr_schedule().validate();
}

optim::LrSchedule TrainConfig::lr_schedule() const {
  optim::LrSchedule s;
  s.kind = schedule;
  s.base_lr = lr;
  s.min_lr = schedule == optim::ScheduleKind::WarmupCosine ? min_lr : 0.0f;
  s.total_steps = decay_steps > 0 ? decay_steps : steps;
  s.warmup_steps = schedule == optim::ScheduleKind::InverseSqrt ? std::max<int64_t>(1, warmup)
                                                                 : std::min(warmup, s.total_steps);
  return s;
}

// ============================================================================================
// JSON: one table of fields per section
// ============================================================================================
namespace {

using json = nlohmann::json;

struct Field {
  const char* key;
  std::function<json()> get;
  std::function<void(const json&)> set;
};

template <typename T>
Field num(const char* key, T& ref) {
  return {key, [&ref] { return json(ref); }, [&ref](const json& v) {
            ATTO_CHECK(v.is_number(), "expected a number");
            if constexpr (std::is_integral_v<T>) {
              ATTO_CHECK(v.is_number_integer(), "expected an integer");
              ref = v.get<T>();
            } else {
              ref = v.get<T>();
            }
          }};
}
Field boolean(const char* key, bool& ref) {
  return {key, [&ref] { return json(ref); }, [&ref](const json& v) {
            ATTO_CHECK(v.is_boolean(), "expected true or false");
            ref = v.get<bool>();
          }};
}
template <typename E>
Field named(const char* key, E& ref, E (*parse)(const std::string&), const char* (*name)(E)) {
  return {key, [&ref, name] { return json(name(ref)); }, [&ref, parse](const json& v) {
            ATTO_CHECK(v.is_string(), "expected a string");
            ref = parse(v.get<std::string>());
          }};
}
Field text(const char* key, std::string& ref) {
  return {key, [&ref] { return json(ref); }, [&ref](const json& v) {
            ATTO_CHECK(v.is_string(), "expected a string");
            ref = v.get<std::string>();
          }};
}

DataMode parse_mode_str(const std::string& s) { return parse_data_mode(s); }
optim::ScheduleKind parse_schedule_str(const std::string& s) { return optim::schedule_kind_from_string(s); }
optim::OptimizerKind parse_optimizer_str(const std::string& s) { return optim::optimizer_kind_from_string(s); }
bool parse_placement(const std::string& s) {
  if (s == "pre") return true;
  if (s == "post") return false;
  fail("unknown norm placement '{}': use pre or post", s);
}

std::vector<Field> model_fields(GPTConfig& m) {
  return {num("vocab_size", m.vocab_size), num("block_size", m.block_size), num("n_layers", m.n_layers),
          num("n_heads", m.n_heads), num("d_model", m.d_model), num("d_ff", m.d_ff),
          named("ffn", m.activation, parse_activation, to_string), named("norm", m.norm, parse_norm, to_string),
          Field{"norm_placement", [&m] { return json(m.pre_norm ? "pre" : "post"); },
                [&m](const json& v) {
                  ATTO_CHECK(v.is_string(), "expected a string");
                  m.pre_norm = parse_placement(v.get<std::string>());
                }},
          boolean("bias", m.bias), num("dropout", m.dropout), boolean("tie_weights", m.tie_weights),
          named("pos", m.pos, parse_pos, to_string)};
}
std::vector<Field> seq2seq_fields(Seq2SeqConfig& m) {
  return {num("src_vocab_size", m.src_vocab), num("tgt_vocab_size", m.tgt_vocab), num("max_len", m.max_len),
          num("n_enc_layers", m.n_enc_layers), num("n_dec_layers", m.n_dec_layers), num("n_heads", m.n_heads),
          num("d_model", m.d_model), num("d_ff", m.d_ff), named("ffn", m.activation, parse_activation, to_string),
          named("norm", m.norm, parse_norm, to_string),
          Field{"norm_placement", [&m] { return json(m.pre_norm ? "pre" : "post"); },
                [&m](const json& v) {
                  ATTO_CHECK(v.is_string(), "expected a string");
                  m.pre_norm = parse_placement(v.get<std::string>());
                }},
          boolean("bias", m.bias), num("dropout", m.dropout), named("pos", m.pos, parse_pos, to_string),
          boolean("share_embeddings", m.share_embeddings), boolean("tie_weights", m.tie_weights)};
}
std::vector<Field> data_fields(DataConfig& d) {
  return {text("data", d.path), named("mode", d.mode, parse_mode_str, to_string), num("split_seed", d.split_seed),
          text("fingerprint", d.fingerprint), text("src", d.src), text("tgt", d.tgt), text("valid_src", d.valid_src),
          text("valid_tgt", d.valid_tgt), text("tokenizer", d.tokenizer), num("vocab_size", d.vocab_size),
          boolean("shared_vocab", d.shared_vocab)};
}
std::vector<Field> train_fields(TrainConfig& t) {
  return {text("size", t.size), num("time_budget_s", t.time_budget), num("steps", t.steps),
          num("decay_steps", t.decay_steps), num("batch_size", t.batch_size),
          num("grad_accum", t.grad_accum), num("lr", t.lr), num("min_lr", t.min_lr), num("warmup", t.warmup),
          named("schedule", t.schedule, parse_schedule_str, optim::to_string), num("weight_decay", t.weight_decay),
          num("beta1", t.beta1), num("beta2", t.beta2), num("eps", t.eps), num("grad_clip", t.grad_clip),
          num("seed", t.seed), num("threads", t.threads), num("shards", t.shards),
          num("eval_every", t.eval_every),
          num("eval_batches", t.eval_batches), num("early_stop", t.early_stop), num("log_every", t.log_every),
          num("max_bad_steps", t.max_bad_steps), named("optimizer", t.optimizer, parse_optimizer_str, optim::to_string), num("momentum", t.momentum),
          boolean("nesterov", t.nesterov), named("best_by", t.best_by, parse_best_by, to_string),
          num("label_smoothing", t.label_smoothing), num("batch_tokens", t.batch_tokens),
          num("eval_bleu", t.eval_bleu)};
}

json section_to_json(const std::vector<Field>& fields) {
  json j = json::object();
  for (const Field& f : fields) j[f.key] = f.get();
  return j;
}

// Sets the field `key` if it belongs to `fields`; returns false if it does not.
bool set_field(std::vector<Field>& fields, const std::string& key, const json& v, const std::string& source) {
  for (Field& f : fields) {
    if (key != f.key) continue;
    try {
      f.set(v);
    } catch (const Error& e) {
      fail("{}: key '{}' = {}: {}", source, key, v.dump(), e.what());
    } catch (const json::exception& e) {
      fail("{}: key '{}' = {}: {}", source, key, v.dump(), e.what());
    }
    return true;
  }
  return false;
}

}  // namespace

json to_json(const RunConfig& cfg_in) {
  RunConfig cfg = cfg_in;  // the field tables bind to mutable references
  json j;
  j["format_version"] = kRunFormatVersion;
  j["task"] = cfg.task;
  if (cfg.task == "seq2seq") {
    j["model"] = section_to_json(seq2seq_fields(cfg.seq2seq));
    j["model"]["type"] = "seq2seq";
  } else {
    j["model"] = section_to_json(model_fields(cfg.model));
    j["model"]["type"] = "gpt";
  }
  j["data"] = section_to_json(data_fields(cfg.data));
  j["train"] = section_to_json(train_fields(cfg.train));
  return j;
}

void apply_config_json(RunConfig& cfg, const json& j, const std::string& source) {
  ATTO_CHECK(j.is_object(), "{}: expected a JSON object at the top level", source);
  if (j.contains("task")) {
    ATTO_CHECK(j["task"] == "gpt" || j["task"] == "seq2seq", "{}: task {} is not gpt or seq2seq", source,
               j["task"].dump());
    const std::string task = j["task"].get<std::string>();
    if (task != cfg.task) {  // switch to that task's defaults before applying the keys
      const RunConfig d = default_run_config(task);
      cfg.task = task;
      cfg.train = d.train;
    }
  }
  auto model = cfg.task == "seq2seq" ? seq2seq_fields(cfg.seq2seq) : model_fields(cfg.model);
  auto data = data_fields(cfg.data);
  auto train = train_fields(cfg.train);
  auto apply_flat = [&](const json& obj, const std::string& where) {
    for (const auto& [key, v] : obj.items()) {
      if (key == "type" && where == "model") {
        ATTO_CHECK(v == cfg.task, "{}: model type {} does not match the task '{}'", source, v.dump(), cfg.task);
        continue;
      }
      if (set_field(model, key, v, source) || set_field(data, key, v, source) || set_field(train, key, v, source))
        continue;
      fail("{}: unknown key '{}'{}", source, key, where.empty() ? "" : " in section '" + where + "'");
    }
  };
  for (const auto& [key, v] : j.items()) {
    if (key == "task") continue;  // handled above
    if (key == "format_version") {
      ATTO_CHECK(v.is_number_integer() && v.get<int>() >= 1 && v.get<int>() <= kRunFormatVersion,
                 "{}: format_version {} is not supported by this atto (it reads up to {})", source, v.dump(),
                 kRunFormatVersion);
    } else if (key == "model" || key == "train" || (key == "data" && v.is_object())) {
      ATTO_CHECK(v.is_object(), "{}: section '{}' must be an object", source, key);
      apply_flat(v, key);
    } else {
      apply_flat(json{{key, v}}, "");
    }
  }
}

const char* to_string(BestBy b) { return b == BestBy::Bleu ? "bleu" : "loss"; }

BestBy parse_best_by(const std::string& s) {
  if (s == "loss") return BestBy::Loss;
  if (s == "bleu") return BestBy::Bleu;
  fail("--best-by must be loss or bleu, got '{}'", s);
}

RunConfig default_run_config(const std::string& task) {
  RunConfig c;
  ATTO_CHECK(task == "gpt" || task == "seq2seq", "--task must be gpt or seq2seq, got '{}'", task);
  c.task = task;
  // What the data decides (train/auto_config.h): model size, context, batch, steps, lr, warmup,
  // dropout and (GPT) weight decay.
  GPTConfig& m = c.model;
  m.d_model = m.n_heads = m.n_layers = m.block_size = kAutoInt;
  m.dropout = kAutoDropout;
  Seq2SeqConfig& s = c.seq2seq;
  s.d_model = s.n_heads = s.n_enc_layers = s.n_dec_layers = kAutoInt;
  s.dropout = kAutoDropout;
  TrainConfig& t = c.train;
  t.steps = t.batch_size = kAutoInt;
  t.lr = kAutoLr;
  t.warmup = kAutoWarmup;
  t.weight_decay = kAutoWeightDecay;
  if (task == "seq2seq") {  // the paper's optimisation: Adam (0.9, 0.98, 1e-9), the Noam schedule
    t.optimizer = optim::OptimizerKind::Adam;
    t.beta1 = 0.9f;
    t.beta2 = 0.98f;
    t.eps = 1e-9f;
    t.weight_decay = 0.0f;
    t.schedule = optim::ScheduleKind::InverseSqrt;
    t.label_smoothing = 0.1f;
    t.batch_tokens = kAutoBatchTokens;
    t.batch_size = 32;
    t.eval_every = 500;
    t.eval_bleu = 500;
    t.best_by = BestBy::Bleu;
  }
  return c;
}

RunConfig run_config_from_json(const json& j, const std::string& source) {
  ATTO_CHECK(j.is_object() && j.contains("format_version") && j.contains("model"),
             "{}: not an atto run config (no format_version/model)", source);
  RunConfig cfg = default_run_config(j.value("task", std::string("gpt")));
  apply_config_json(cfg, j, source);
  return cfg;
}

}  // namespace atto
