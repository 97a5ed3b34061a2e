#include "train/trainer.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>

#include "data/dataset.h"
#include "io/file.h"
#include "kernels/kernels.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "tensor/error.h"
#include "train/checkpoint.h"
#include "train/progress.h"

namespace atto {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// ============================================================================================
// Evaluation
// ============================================================================================
double evaluate_loss(GPT& model, const TextDataset& data, Split split, int64_t B, int64_t T, int64_t max_batches) {
  NoGradGuard no_grad;
  const bool was_training = model.training();
  model.eval();
  int64_t n = data.num_eval_batches(split, B, T);
  if (max_batches > 0) n = std::min(n, max_batches);
  double total = 0.0;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Batch b = data.eval_batch(split, i, B, T);
    const int64_t c = b.num_targets();
    if (c == 0) continue;
    Tensor logits = model.forward(b.x, b.B, b.T);
    total += static_cast<double>(cross_entropy(logits, b.y).item()) * c;
    count += c;
  }
  model.train(was_training);
  ATTO_CHECK(count > 0, "evaluation: the {} split has no targets to score", to_string(split));
  return total / count;
}

namespace {

// Ctrl-C: finish the current step, save, exit.
std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted = true; }

struct SigintScope {
  using Handler = void (*)(int);
  Handler prev;
  SigintScope() : prev(std::signal(SIGINT, on_sigint)) { g_interrupted = false; }
  ~SigintScope() { std::signal(SIGINT, prev); }
};

// Everything a run needs, built either fresh or from a run directory.
struct Session {
  RunConfig cfg;
  std::string dir;
  TextFile file;
  CharTokenizer tok;
  std::unique_ptr<TextDataset> data;
  std::unique_ptr<GPT> model;
  std::unique_ptr<optim::AdamW> opt;
  TrainState st;
  Rng data_rng, dropout_rng;
};

void prepare_data(Session& s, bool fresh_tokenizer) {
  s.file = read_text_file(s.cfg.data.path);
  const std::string fp = fingerprint_bytes(s.file.text);
  if (!fresh_tokenizer && !s.cfg.data.fingerprint.empty())
    ATTO_CHECK(fp == s.cfg.data.fingerprint,
               "{} has changed since this run started (fingerprint {} vs {} in config.json): resuming on different "
               "data would not continue the same run; start a new run instead",
               s.cfg.data.path, fp, s.cfg.data.fingerprint);
  s.cfg.data.fingerprint = fp;
  s.cfg.data.mode = resolve_mode(s.file, s.cfg.data.mode);
  if (fresh_tokenizer) s.tok = build_tokenizer(s.file, s.cfg.data.mode);
  s.data = make_dataset(s.file, s.tok, s.cfg.data.mode, {.split_seed = s.cfg.data.split_seed});
  GPTConfig& m = s.cfg.model;
  if (m.block_size <= 0)  // auto: the longest line (lines mode) or 128 tokens (stream mode)
    m.block_size = s.cfg.data.mode == DataMode::Lines ? s.data->min_block_size()
                                                      : std::min<int64_t>(128, s.data->max_block_size());
  s.data->check_block_size(m.block_size);
  m.vocab_size = s.tok.vocab_size();
  m.validate();
}

void build_model(Session& s) {
  Rng init(s.cfg.train.seed);
  s.model = std::make_unique<GPT>(s.cfg.model, init);
  s.model->set_rng(&s.dropout_rng);
  s.model->train();
  optim::AdamOptions ao{s.cfg.train.beta1, s.cfg.train.beta2, s.cfg.train.eps};
  s.opt = std::make_unique<optim::AdamW>(optim::default_param_groups(s.model->named_parameters(),
                                                                     s.cfg.train.weight_decay),
                                         ao);
}

void start_new(Session& s, const TrainerOptions& o) {
  s.cfg.train.validate();
  prepare_data(s, /*fresh_tokenizer=*/true);
  if (fs::exists(s.dir)) {
    ATTO_CHECK(fs::is_directory(s.dir), "--out {} exists and is not a directory", s.dir);
    ATTO_CHECK(o.force || !looks_like_run(s.dir),
               "--out {} already holds a run: continue it with `atto train --resume {}`, choose another --out, or "
               "pass --force to overwrite it",
               s.dir, s.dir);
  }
  fs::create_directories(s.dir);
  s.data_rng.reseed(s.cfg.train.seed ^ 0xDA7A5EEDull);
  s.dropout_rng.reseed(s.cfg.train.seed ^ 0xD50F0D7Eull);
  build_model(s);
  io::write_json_atomic(run_path(s.dir, "config.json"), to_json(s.cfg));
  io::write_json_atomic(run_path(s.dir, "tokenizer.json"), s.tok.to_json());
  io::write_file_atomic(run_path(s.dir, "metrics.jsonl"), "");
  fs::remove(run_path(s.dir, "model.safetensors"));
  fs::remove(run_path(s.dir, "train_state.safetensors"));
}

// Drops metrics.jsonl lines logged after `step` (written after the last saved state).
void truncate_metrics(const std::string& path, int64_t step) {
  if (!fs::exists(path)) return;
  std::ifstream in(path);
  std::string line, kept;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer() && j["step"].get<int64_t>() > step)
      continue;
    kept += line + "\n";
  }
  io::write_file_atomic(path, kept);
}

void start_resume(Session& s) {
  s.cfg.train.validate();
  s.tok = load_tokenizer(s.dir);
  prepare_data(s, /*fresh_tokenizer=*/false);
  build_model(s);
  s.st = load_train_state(run_path(s.dir, "train_state.safetensors"), *s.model, *s.opt);
  s.data_rng.set_state(s.st.data_rng);
  s.dropout_rng.set_state(s.st.dropout_rng);
  ATTO_CHECK(s.cfg.train.steps > s.st.step,
             "--steps {} is not beyond the {} steps this run has already done: pass a larger --steps to continue",
             s.cfg.train.steps, s.st.step);
  io::write_json_atomic(run_path(s.dir, "config.json"), to_json(s.cfg));
  truncate_metrics(run_path(s.dir, "metrics.jsonl"), s.st.step);
}

void append_metrics(const std::string& dir, const nlohmann::json& j) {
  std::ofstream out(run_path(dir, "metrics.jsonl"), std::ios::app);
  ATTO_CHECK(out.good(), "cannot append to {}", run_path(dir, "metrics.jsonl"));
  out << j.dump() << "\n";
}

void save_state(Session& s) {
  s.st.data_rng = s.data_rng.state();
  s.st.dropout_rng = s.dropout_rng.state();
  save_train_state(run_path(s.dir, "train_state.safetensors"), *s.model, *s.opt, s.st);
}

// One optimizer step. Returns the mean micro-batch loss, or NaN when the step was skipped.
double train_step(Session& s, float lr) {
  const TrainConfig& t = s.cfg.train;
  const int64_t T = s.cfg.model.block_size;
  s.opt->zero_grad();
  double loss_sum = 0.0;
  for (int64_t micro = 0; micro < t.grad_accum; ++micro) {
    const Batch b = s.data->sample_batch(s.data_rng, t.batch_size, T);
    Tensor loss = cross_entropy(s.model->forward(b.x, b.B, b.T), b.y);
    loss_sum += loss.item();
    backward(t.grad_accum == 1 ? loss : scale(loss, 1.0f / static_cast<float>(t.grad_accum)));
  }
  const double loss = loss_sum / static_cast<double>(t.grad_accum);
  const auto& groups = s.opt->param_groups();
  if (!std::isfinite(loss) || !optim::grads_finite(groups)) {
    s.opt->zero_grad();
    return std::nan("");
  }
  if (t.grad_clip > 0.0f) optim::clip_grad_norm(groups, t.grad_clip);
  s.opt->step(lr);
  return loss;
}

// Evaluates, keeps the best checkpoint, saves the training state. Returns the val loss.
double evaluate_and_save(Session& s, Progress& p) {
  const double val = evaluate_loss(*s.model, *s.data, Split::Val, s.cfg.train.batch_size, s.cfg.model.block_size,
                                   s.cfg.train.eval_batches);
  if (!std::isfinite(val)) {  // diverged weights never reach a checkpoint
    p.message(fmt::format("step {:>6}  val loss is not finite: nothing saved", s.st.step));
    return val;
  }
  const bool best = s.st.best_step < 0 || val < s.st.best_val_loss;
  if (best) {
    s.st.best_val_loss = val;
    s.st.best_step = s.st.step;
    s.st.evals_without_improvement = 0;
    save_model_weights(run_path(s.dir, "model.safetensors"), *s.model);
  } else {
    s.st.evals_without_improvement++;
  }
  save_state(s);
  append_metrics(s.dir, {{"step", s.st.step}, {"val_loss", val}, {"best", best}});
  p.message(fmt::format("step {:>6}  val loss {:.4f}{}", s.st.step, val, best ? "  (best, saved)" : ""));
  return val;
}

}  // namespace

TrainResult train_gpt(RunConfig cfg, const TrainerOptions& o) {
  Session s;
  s.cfg = std::move(cfg);
  s.dir = o.out_dir;
  ATTO_CHECK(!s.dir.empty(), "no output directory: pass --out DIR");
  kernels::set_num_threads(s.cfg.train.threads);
  if (o.resume) start_resume(s); else start_new(s, o);

  Progress p(o.progress);
  TrainResult r;
  r.num_parameters = s.model->num_parameters();
  p.message(fmt::format("atto: {} parameters, {} data, vocabulary {}, block {}, {} train / {} val {}",
                        r.num_parameters, to_string(s.cfg.data.mode), s.cfg.model.vocab_size, s.cfg.model.block_size,
                        s.data->size(Split::Train), s.data->size(Split::Val),
                        s.cfg.data.mode == DataMode::Lines ? "lines" : "tokens"));
  if (o.resume) p.message(fmt::format("resuming {} at step {} of {}", s.dir, s.st.step, s.cfg.train.steps));

  SigintScope sigint;
  const TrainConfig& t = s.cfg.train;
  const optim::LrSchedule sched = t.lr_schedule();
  const int64_t tokens_per_step = t.batch_size * t.grad_accum * s.cfg.model.block_size;
  const auto t0 = Clock::now();
  const double base_elapsed = s.st.elapsed_seconds;  // earlier invocations of this run
  auto last_log = t0;
  int64_t bad_streak = 0, steps_since_log = 0;
  double val = std::nan("");
  while (s.st.step < t.steps) {
    const float lr = sched.at(s.st.step);
    const double loss = train_step(s, lr);
    if (std::isnan(loss)) {
      s.st.skipped_steps++;
      ATTO_CHECK(++bad_streak < t.max_bad_steps,
                 "training diverged: {} steps in a row at step {} had a NaN or Inf loss or gradient (they were "
                 "skipped; the saved checkpoints are untouched). Lower --lr or raise --warmup, then resume or restart",
                 bad_streak, s.st.step);
      p.message(fmt::format("step {:>6}  non-finite loss or gradient: step skipped", s.st.step));
      continue;
    }
    bad_streak = 0;
    s.st.step++;
    steps_since_log++;
    r.last_train_loss = loss;
    r.tokens += tokens_per_step;
    const bool last = s.st.step == t.steps;
    if (s.st.step % t.log_every == 0 || last) {
      const auto now = Clock::now();
      const double dt = std::chrono::duration<double>(now - last_log).count();
      const double tok_s = dt > 0 ? tokens_per_step * steps_since_log / dt : 0.0;
      const double elapsed = std::chrono::duration<double>(now - t0).count();
      const double eta = elapsed / std::max<int64_t>(1, r.tokens / tokens_per_step) * (t.steps - s.st.step);
      append_metrics(s.dir, {{"step", s.st.step}, {"train_loss", loss}, {"lr", lr}, {"tokens_per_s", tok_s},
                             {"elapsed_s", base_elapsed + elapsed}});
      p.step(fmt::format("step {:>6}/{}  train loss {:.4f}  val loss {}  lr {:.2e}  {:.0f} tok/s  ETA {}", s.st.step,
                         t.steps, loss, std::isnan(val) ? std::string("-") : fmt::format("{:.4f}", val), lr, tok_s,
                         format_duration(eta)));
      last_log = now;
      steps_since_log = 0;
    }
    if (s.st.step % t.eval_every == 0 || last || g_interrupted) {
      s.st.elapsed_seconds = base_elapsed + std::chrono::duration<double>(Clock::now() - t0).count();
      val = evaluate_and_save(s, p);
      r.last_val_loss = val;
      if (t.early_stop > 0 && s.st.evals_without_improvement >= t.early_stop) {
        r.early_stopped = true;
        p.message(fmt::format("early stop: {} evaluations without improvement", t.early_stop));
        break;
      }
    }
    if (g_interrupted) {
      r.interrupted = true;
      p.message(fmt::format("interrupted at step {}: state saved; continue with `atto train --resume {}`", s.st.step,
                            s.dir));
      break;
    }
  }
  p.finish();
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.steps = s.st.step;
  r.best_val_loss = s.st.best_val_loss;
  r.best_step = s.st.best_step;
  r.skipped_steps = s.st.skipped_steps;
  return r;
}

}  // namespace atto
