#include "run/run_config.h"

#include <cmath>
#include <map>

#include "base/error.h"
#include "base/limits.h"
#include "base/hash.h"

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
  if (s == "rope") return PosKind::Rope;
  fail("unknown positional encoding '{}': use learned, sinusoidal or rope", s);
}
const char* to_string(PosKind p) {
  switch (p) {
    case PosKind::Learned: return "learned";
    case PosKind::Sinusoidal: return "sinusoidal";
    case PosKind::Rope: return "rope";
  }
  return "?";
}

std::string fingerprint_bytes(std::string_view bytes) {
  return fmt::format("fnv1a64:{:016x}", fnv1a64(bytes.data(), bytes.size()));
}

// ============================================================================================
// Validation
// ============================================================================================
std::string TrainConfig::name_of(const char* key, const char* flag) const {
  auto it = origin.find(key);
  return it == origin.end() ? std::string(flag) : it->second;
}

// The run's length, batch and schedule.
void TrainConfig::validate_schedule() const {
  auto n = [this](const char* key, const char* flag) { return name_of(key, flag); };
  ATTO_CHECK(steps >= 1 || steps == kAutoInt, "{} must be at least 1 (0 = auto), got {}", n("steps", "--steps"), steps);
  ATTO_CHECK(std::isfinite(time_budget) && time_budget >= 0.0, "{} must be a positive duration, got {} s",
             n("time_budget_s", "--time"), time_budget);
  ATTO_CHECK(decay_steps >= 0, "{} must be >= 0 (0 = --steps), got {}", n("decay_steps", "--decay-steps"), decay_steps);
  ATTO_CHECK(batch_size >= 1 || batch_size == kAutoInt, "{} must be at least 1 (0 = auto), got {}",
             n("batch_size", "--batch-size"), batch_size);
  ATTO_CHECK(grad_accum >= 1, "{} must be at least 1, got {}", n("grad_accum", "--grad-accum"), grad_accum);
  ATTO_CHECK(std::isfinite(lr) && lr >= 0.0f, "{} must be a positive finite number (0 = auto), got {}", n("lr", "--lr"),
             lr);
  ATTO_CHECK(std::isfinite(min_lr) && min_lr >= 0.0f && (lr == kAutoLr || cosine_floor() <= lr),
             "{} must be finite and in [0, lr = {}], got {}", n("min_lr", "--min-lr"), lr, min_lr);
  ATTO_CHECK(warmup >= 0 || warmup == kAutoWarmup, "{} must be >= 0 (-1 = auto), got {}", n("warmup", "--warmup"),
             warmup);
  ATTO_CHECK(eval_every >= 1, "{} must be at least 1, got {}", n("eval_every", "--eval-every"), eval_every);
  ATTO_CHECK(eval_batches >= 0, "{} must be >= 0 (0 = whole split), got {}", n("eval_batches", "--eval-batches"),
             eval_batches);
  ATTO_CHECK(early_stop >= 0, "{} must be >= 0 (0 = off), got {}", n("early_stop", "--early-stop"), early_stop);
  ATTO_CHECK(log_every >= 1, "{} must be at least 1, got {}", n("log_every", "--log-every"), log_every);
  ATTO_CHECK(max_bad_steps >= 1, "{} must be at least 1, got {}", n("max_bad_steps", "--max-bad-steps"), max_bad_steps);
  ATTO_CHECK(batch_tokens >= 0 || batch_tokens == kAutoBatchTokens,
             "{} must be >= 0 (0 = --batch-size sentences, -1 = auto), got {}", n("batch_tokens", "--batch-tokens"),
             batch_tokens);
  ATTO_CHECK(eval_bleu >= -1, "{} must be >= -1 (-1 = all, 0 = none), got {}", n("eval_bleu", "--eval-bleu"),
             eval_bleu);
}

// The optimizer and the machine.
void TrainConfig::validate_optimizer() const {
  auto n = [this](const char* key, const char* flag) { return name_of(key, flag); };
  ATTO_CHECK(std::isfinite(weight_decay) && (weight_decay >= 0.0f || weight_decay == kAutoWeightDecay),
             "{} must be >= 0 (-1 = auto), got {}", n("weight_decay", "--weight-decay"), weight_decay);
  ATTO_CHECK(beta1 >= 0.0f && beta1 < 1.0f, "{} must be in [0, 1), got {}", n("beta1", "--beta1"), beta1);
  ATTO_CHECK(beta2 >= 0.0f && beta2 < 1.0f, "{} must be in [0, 1), got {}", n("beta2", "--beta2"), beta2);
  ATTO_CHECK(std::isfinite(eps) && eps > 0.0f, "{} must be positive and finite, got {}", n("eps", "--eps"), eps);
  ATTO_CHECK(std::isfinite(grad_clip) && grad_clip >= 0.0f, "{} must be >= 0 (0 = off), got {}",
             n("grad_clip", "--grad-clip"), grad_clip);
  check_threads(threads, n("threads", "--threads"));
  ATTO_CHECK(shards >= 0, "{} must be >= 0 (0 = auto), got {}", n("shards", "--shards"), shards);
  ATTO_CHECK(std::isfinite(momentum) && momentum >= 0.0f && momentum < 1.0f, "{} must be in [0, 1), got {}",
             n("momentum", "--momentum"), momentum);
  ATTO_CHECK(!nesterov || momentum > 0.0f, "{} needs {} > 0", n("nesterov", "--nesterov"), n("momentum", "--momentum"));
  ATTO_CHECK(optimizer == optim::OptimizerKind::SGD || (momentum == 0.0f && !nesterov),
             "{} and {} are SGD's: pass {} sgd (got {})", n("momentum", "--momentum"), n("nesterov", "--nesterov"),
             n("optimizer", "--optimizer"), optim::to_string(optimizer));
  ATTO_CHECK(label_smoothing >= 0.0f && label_smoothing < 1.0f, "{} must be in [0, 1), got {}",
             n("label_smoothing", "--label-smoothing"), label_smoothing);
}

void TrainConfig::validate() const {
  validate_schedule();
  validate_optimizer();
  if (steps != kAutoInt && lr != kAutoLr && warmup != kAutoWarmup) lr_schedule().validate();
}

optim::LrSchedule TrainConfig::lr_schedule() const {
  optim::LrSchedule s;
  s.kind = schedule;
  s.base_lr = lr;
  s.min_lr = schedule == optim::ScheduleKind::WarmupCosine ? cosine_floor() : 0.0f;
  s.total_steps = decay_steps > 0 ? decay_steps : steps;
  s.warmup_steps =
      schedule == optim::ScheduleKind::InverseSqrt ? std::max<int64_t>(1, warmup) : std::min(warmup, s.total_steps);
  return s;
}

const char* to_string(BestBy b) { return b == BestBy::Bleu ? "bleu" : "loss"; }

Metric best_metric(const RunConfig& cfg) {
  const bool bleu = cfg.task == Task::Seq2Seq && cfg.train.best_by == BestBy::Bleu && cfg.train.eval_bleu != 0;
  return bleu ? Metric::Bleu : Metric::ValLoss;
}

BestBy parse_best_by(const std::string& s) {
  if (s == "loss") return BestBy::Loss;
  if (s == "bleu") return BestBy::Bleu;
  fail("--best-by must be loss or bleu, got '{}'", s);
}

kernels::Precision parse_precision(const std::string& s) {
  if (s == "fp32") return kernels::Precision::F32;
  if (s == "bf16") return kernels::Precision::BF16;
  fail("--precision must be fp32 or bf16, got '{}'", s);
}

const char* to_string(Task t) { return t == Task::Seq2Seq ? "seq2seq" : "gpt"; }

Task parse_task(const std::string& s) {
  if (s == "gpt") return Task::Gpt;
  if (s == "seq2seq") return Task::Seq2Seq;
  fail("unknown task '{}': use gpt or seq2seq", s);
}

RunConfig default_run_config(Task task) {
  RunConfig c;
  c.task = task;
  // What the data decides (train/auto_config.h): model size, context, batch, steps, lr, warmup,
  // dropout and (GPT) weight decay.
  GPTConfig& m = c.gpt;
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
  if (task == Task::Seq2Seq) {  // the paper's optimisation: Adam (0.9, 0.98, 1e-9), the Noam schedule
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

}  // namespace atto
