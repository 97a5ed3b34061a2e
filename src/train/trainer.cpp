#include "train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "base/error.h"
#include "base/files.h"
#include "base/json.h"
#include "io/file.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "train/auto_config.h"
#include "train/checkpoint.h"
#include "train/progress.h"
#include "train/rank_checks.h"
#include "train/task.h"

namespace atto {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Everything a run needs, built either fresh or from a run directory.
struct Session {
  RunConfig cfg;
  std::string dir;
  std::unique_ptr<TrainTask> task;
  std::unique_ptr<optim::Optimizer> opt;
  TrainState st;
  Rng data_rng, dropout_rng;
  kernels::Bf16WeightCache bf16_weights;  // the step's bf16 weight copies (--precision bf16)
  bool val_is_train = false;              // the last evaluation scored the training set (a tiny corpus)
  DistOptions dist;                       // the ranks of an mpirun (none: one process)
  // Rank 0 alone writes the run directory (every rank computes the same step).
  bool writer() const { return dist.collective == nullptr || dist.collective->rank() == 0; }
};

void build_task(Session& s, bool resume) {
  Rng init(s.cfg.train.seed);
  s.task = make_task(s.cfg, s.dir, resume, init, s.dist);
  nn::Module& m = s.task->model();
  m.set_rng(&s.dropout_rng);
  m.train();
  const TrainConfig& t = s.cfg.train;
  const optim::AdamOptions ao{t.beta1, t.beta2, t.eps};
  auto groups = optim::default_param_groups(m.trainable_parameters(), t.weight_decay);
  switch (t.optimizer) {
    case optim::OptimizerKind::SGD:
      s.opt = std::make_unique<optim::SGD>(std::move(groups), optim::SgdOptions{t.momentum, t.nesterov});
      break;
    case optim::OptimizerKind::Adam: s.opt = std::make_unique<optim::Adam>(std::move(groups), ao); break;
    case optim::OptimizerKind::AdamW: s.opt = std::make_unique<optim::AdamW>(std::move(groups), ao); break;
  }
}

void check_out_dir(const std::string& dir, bool force) {
  if (!fs::exists(dir)) return;
  ATTO_CHECK(fs::is_directory(dir), "--out {} exists and is not a directory", dir);
  if (force || !looks_like_run(dir)) return;
  // A run stopped before its first evaluation has files but no state to continue from.
  ATTO_CHECK(fs::exists(run_path(dir, "train_state.safetensors")),
             "--out {} holds a run that never saved a step (there is no train_state.safetensors: a run saves at each "
             "evaluation), so it cannot be resumed: pass --force to start again into that folder, or remove it "
             "(rm -r {})",
             dir, dir);
  fail(
      "--out {} already holds a run: continue it with `atto train --resume {}`, choose another --out, or pass "
      "--force to overwrite it",
      dir, dir);
}

void start_new(Session& s, const TrainerOptions& o) {
  s.cfg.train.validate();
  if (s.writer()) check_out_dir(s.dir, o.force);
  s.data_rng.reseed(s.cfg.train.seed ^ 0xDA7A5EEDull);
  s.dropout_rng.reseed(s.cfg.train.seed ^ 0xD50F0D7Eull);
  build_task(s, /*resume=*/false);  // reads and checks the data before anything is written
  s.cfg.train.validate();           // the values the data decided
  if (!s.writer()) return;
  fs::create_directories(s.dir);
  io::remove_stale_temp_files(s.dir);  // leftovers of killed saves (--force over an old run)
  io::write_json_atomic(run_path(s.dir, "config.json"), to_json(s.cfg));
  s.task->write_files(s.dir);
  io::write_file_atomic(run_path(s.dir, "metrics.jsonl"), "");
  fs::remove(run_path(s.dir, "model.safetensors"));
  fs::remove(run_path(s.dir, kAdapterFile));
  fs::remove(run_path(s.dir, "train_state.safetensors"));
  // LoRA: the frozen base is written once; the adapters go to adapter.safetensors.
  const nn::Module& m = s.task->model();
  if (!m.state_dict(nn::Module::Which::Frozen).empty())
    save_model_weights(run_path(s.dir, "model.safetensors"), m, nn::Module::Which::Frozen);
}

// metrics.jsonl of a run, whole ("" when there is none), by the file rule of base/files.h: a
// regular file (not a FIFO, a device or a directory) of at most files::kMetricsCap bytes.
std::string read_run_metrics(const std::string& path) {
  if (fs::symlink_status(path).type() == fs::file_type::not_found) return "";
  return files::read(path, files::kMetricsCap, "metrics.jsonl");
}

// The metrics lines up to `step` (later ones were logged after the last saved state); lines
// that are not records are kept as they are.
std::string metrics_up_to(const std::string& text, int64_t step) {
  std::string kept;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    const nlohmann::json j = json_util::parse_or_discard(line);
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer() && j["step"].get<int64_t>() > step)
      continue;
    kept.append(line) += '\n';
  }
  return kept;
}

// Everything of the run directory is read and checked before anything in it changes: config.json
// (the planned steps), train_state.safetensors (strictly: train/checkpoint.h), model.safetensors
// (the best weights: this model's tensors, finite) and metrics.jsonl (readable, bounded). Then
// stale temporary files of killed saves go, config.json takes the new values and metrics.jsonl
// loses the lines logged after the saved step.
void start_resume(Session& s) {
  s.cfg.train.validate();
  if (s.writer()) {
    // Said before any work: a resumed run saves into its directory (a read-only copy, a
    // read-only mount, another user's run).
    ATTO_CHECK(::access(s.dir.c_str(), W_OK) == 0,
               "cannot resume {}: the run directory is not writable ({}), and a resumed run saves its checkpoints "
               "there; copy it to a folder you can write (cp -r {} NEW) and resume the copy",
               s.dir, std::strerror(errno), s.dir);
  }
  const std::string cfg_path = run_path(s.dir, "config.json"), state_path = run_path(s.dir, "train_state.safetensors");
  const RunConfig saved = load_run_config(s.dir);  // as config.json has it (before the flags)
  // The saved best is a loss or minus BLEU: a resume that switched between them would compare
  // validation losses with BLEU scores.
  const Metric was = best_metric(saved), now = best_metric(s.cfg);
  if (was != now)
    throw UsageError(fmt::format(
        "{} {}: this run keeps its best checkpoint by {} (best_by {}, eval_bleu {}), and a resumed run must "
        "keep it so: resume with {} {}",
        s.cfg.train.name_of("eval_bleu", "--eval-bleu"), s.cfg.train.eval_bleu,
        was == Metric::Bleu ? "BLEU" : "validation loss", to_string(saved.train.best_by), saved.train.eval_bleu,
        s.cfg.train.name_of("eval_bleu", "--eval-bleu"), was == Metric::Bleu ? "above 0" : "0"));
  const int64_t planned = saved.train.steps;
  build_task(s, /*resume=*/true);
  s.st = load_train_state(state_path, s.task->model(), *s.opt);
  check_state_fits_run(s.st, state_path, planned, cfg_path);
  check_best_weights(s.dir, s.st, s.task->model());
  const std::string metrics_path = run_path(s.dir, "metrics.jsonl");
  const std::string metrics = s.writer() ? read_run_metrics(metrics_path) : "";
  s.data_rng.set_state(s.st.data_rng);
  s.dropout_rng.set_state(s.st.dropout_rng);
  ATTO_CHECK(s.cfg.train.steps > s.st.step,
             "--steps {} is not beyond the {} steps this run has already done: pass a larger --steps to continue",
             s.cfg.train.steps, s.st.step);
  if (!s.writer()) return;
  io::remove_stale_temp_files(s.dir);  // leftovers of killed saves; a live writer's stay
  io::write_json_atomic(cfg_path, to_json(s.cfg));
  io::write_file_atomic(metrics_path, metrics_up_to(metrics, s.st.step));
}

void append_metrics(const std::string& dir, const nlohmann::json& j) {
  std::ofstream out(run_path(dir, "metrics.jsonl"), std::ios::app);
  ATTO_CHECK(out.good(), "cannot append to {}", run_path(dir, "metrics.jsonl"));
  out << j.dump() << "\n";
}

void save_state(Session& s) {
  s.st.data_rng = s.data_rng.state();
  s.st.dropout_rng = s.dropout_rng.state();
  save_train_state(run_path(s.dir, "train_state.safetensors"), s.task->model(), *s.opt, s.st);
}

// One optimizer step. Returns the mean micro-batch loss, or NaN when the step was skipped.
double train_step(Session& s, float lr, int64_t& tokens) {
  const TrainConfig& t = s.cfg.train;
  // set_to_none (PyTorch's default since 2.0): the first backward writes each gradient instead
  // of adding to a zeroed buffer (a Linear weight's gradient is then one GEMM with beta 0).
  s.opt->zero_grad(/*set_to_none=*/true);
  double loss_sum = 0.0;
  tokens = 0;
  const float loss_scale = 1.0f / static_cast<float>(t.grad_accum);
  for (int64_t micro = 0; micro < t.grad_accum; ++micro) {
    loss_sum += s.task->forward_backward(s.data_rng, loss_scale);
    tokens += s.task->last_batch_tokens();
  }
  const double loss = loss_sum / static_cast<double>(t.grad_accum);
  const auto& groups = s.opt->param_groups();
  // A step with a non-finite loss or gradient is skipped. With clipping, the norm's pass over the
  // gradients answers the finite check too (it scales nothing when they are not finite).
  bool finite = std::isfinite(loss);
  if (finite) {
    if (t.grad_clip > 0.0f) {
      optim::clip_grad_norm(groups, t.grad_clip, &finite);
    } else {
      finite = optim::grads_finite(groups);
    }
  }
  if (!finite) {
    s.opt->zero_grad();
    return std::nan("");
  }
  optim::step_and_refresh(*s.opt, lr, s.bf16_weights);  // and the bf16 weight copies packed anew
  return loss;
}

// Evaluates, keeps the best checkpoint, saves the training state. Returns the val loss.
// The state's best (stored as a loss, lower is better) in the metric's own units.
double best_score(const TrainState& st, Metric m) { return m == Metric::Bleu ? -st.best_val_loss : st.best_val_loss; }

double evaluate_and_save(Session& s, Progress& p) {
  if (s.dist.collective != nullptr) check_weights_agree(*s.dist.collective, s.task->model(), s.st.step);
  const Evaluation e = s.task->evaluate();
  const double val = e.loss;
  if (!std::isfinite(val)) {  // diverged weights never reach a checkpoint
    p.message(fmt::format("step {:>6}  val loss is not finite: nothing saved", s.st.step));
    return val;
  }
  // The best checkpoint is chosen by the metric when the task has one and --best-by asks for
  // it (stored negated, so lower is better either way), else by the loss.
  const bool by_metric = e.has_metric && s.cfg.train.best_by != BestBy::Loss;
  const double score = by_metric ? -e.metric : val;
  const bool best = s.st.best_step < 0 || score < s.st.best_val_loss;
  if (best) {
    s.st.best_val_loss = score;
    s.st.best_step = s.st.step;
    s.st.evals_without_improvement = 0;
    if (s.writer()) save_best_weights(s.dir, s.task->model());
  } else {
    s.st.evals_without_improvement++;
  }
  nlohmann::json line = {{"step", s.st.step}, {"val_loss", val}, {"best", best}};
  if (e.on_train_set) line["val_is_train"] = true;
  std::string metric;
  if (e.bits_per_byte > 0) {
    line["val_bpb"] = e.bits_per_byte;
    metric = fmt::format(" ({:.4f} bits/byte)", e.bits_per_byte);
  }
  if (e.has_metric) {
    line["val_" + e.metric_name] = e.metric;
    metric += fmt::format("  val {} {:.2f}", e.metric_name, e.metric);
  }
  // The record goes before the state that claims it: a kill in between leaves a line past the
  // saved step, which the resume cuts (metrics_up_to), never a saved step without its line.
  if (s.writer()) append_metrics(s.dir, line);
  if (s.writer()) save_state(s);
  p.message(fmt::format("step {:>6}  {} {:.4f}{}{}", s.st.step, e.on_train_set ? "train-set loss" : "val loss", val,
                        metric, best ? "  (best, saved)" : ""));
  s.val_is_train = e.on_train_set;
  return val;
}

// ============================================================================================
// --time: plan the run for a wall-clock budget
// ============================================================================================
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Probe {
  RunConfig cfg;        // resolved as the data decides (size, default steps, ...)
  double step_s = 0.0;  // one optimizer step
  double eval_s = 0.0;  // one evaluation
};

// Builds the run of `cfg` on scratch state and times its steps (after one warm-up step, at least
// 3 and about a second's worth) and one evaluation. Nothing is written; the real run starts anew.
Probe probe(const RunConfig& cfg, const std::string& dir) {
  Session p;
  p.cfg = cfg;
  p.cfg.train.time_budget = 0.0;  // resolve the data's default steps, for the size rule
  p.dir = dir;
  p.data_rng.reseed(1);
  p.dropout_rng.reseed(2);
  build_task(p, /*resume=*/false);
  const kernels::PrecisionScope precision(p.cfg.train.precision, &p.bf16_weights);
  const optim::LrSchedule sched = p.cfg.train.lr_schedule();
  int64_t tokens = 0;
  train_step(p, sched.at(0), tokens);
  const auto t0 = Clock::now();
  int64_t n = 0;
  while (n < 3 || (n < 200 && seconds_since(t0) < 1.0)) train_step(p, sched.at(++n), tokens);
  Probe r{p.cfg, seconds_since(t0) / static_cast<double>(n), 0.0};
  const auto t1 = Clock::now();
  p.task->evaluate();
  r.eval_s = seconds_since(t1);
  return r;
}

// Steps that fit in `seconds` with an evaluation every eval_every steps and one at the end.
int64_t steps_that_fit(const Probe& pr, double seconds) {
  const double per_step = pr.step_s + pr.eval_s / static_cast<double>(pr.cfg.train.eval_every);
  return static_cast<int64_t>(std::floor((seconds - pr.eval_s) / per_step));
}

// Chooses the model size (when it is auto) and the number of steps so that the run, started at
// t_start, ends within cfg.train.time_budget: the data's size, unless fewer than a quarter of
// that size's default steps fit (then the next smaller, and so on), or more than 3x its default
// fit and the next size up gets at least half of its own default (then that one). The LR
// schedule runs to the planned last step.
double plan_time_budget(RunConfig& cfg, const std::string& dir, Clock::time_point t_start, Progress& p) {
  const double budget = cfg.train.time_budget;
  const bool auto_size = cfg.train.size == "auto" && cfg.train.init_from.empty();  // fine-tuning: SOURCE's size
  const std::vector<std::string>& sizes = cfg.task == Task::Seq2Seq ? seq2seq_sizes() : gpt_sizes();
  auto probe_size = [&](const std::string& size) {
    RunConfig c = cfg;
    c.train.size = size;
    return probe(c, dir);
  };
  Probe pr = probe_size(cfg.train.size);
  auto index_of = [&](const Probe& q) {
    return static_cast<size_t>(std::find(sizes.begin(), sizes.end(), q.cfg.train.size) - sizes.begin());
  };
  int64_t steps = steps_that_fit(pr, budget - seconds_since(t_start));
  while (auto_size && 4 * steps < pr.cfg.train.steps && index_of(pr) > 0) {
    pr = probe_size(sizes[index_of(pr) - 1]);
    steps = steps_that_fit(pr, budget - seconds_since(t_start));
  }
  if (auto_size && steps > 3 * pr.cfg.train.steps && index_of(pr) + 1 < sizes.size()) {
    Probe up = probe_size(sizes[index_of(pr) + 1]);
    const int64_t up_steps = steps_that_fit(up, budget - seconds_since(t_start));
    if (2 * up_steps >= up.cfg.train.steps)
      pr = up, steps = up_steps;
    else
      steps = steps_that_fit(pr, budget - seconds_since(t_start));
  }
  ATTO_CHECK(steps >= 1,
             "--time {} is too short: planning took {}, and one step of the smallest model takes {:.3f} s plus an "
             "evaluation of {:.2f} s; give a longer --time",
             format_duration(budget), format_duration(seconds_since(t_start)), pr.step_s, pr.eval_s);
  // Fine-tuning keeps the size the user gave (SOURCE's architecture decides the model).
  if (cfg.train.init_from.empty()) cfg.train.size = pr.cfg.train.size;
  cfg.train.steps = steps;
  const int64_t evals = steps / cfg.train.eval_every + 1;
  const double planned = seconds_since(t_start) + steps * pr.step_s + evals * pr.eval_s;
  p.message(fmt::format(
      "time budget {}: {}, {} steps of {:.1f} ms and {} evaluations of {:.2f} s, planned to "
      "end at {}{}",
      format_duration(budget),
      cfg.train.init_from.empty() ? "size " + cfg.train.size : "the model of --init-from " + cfg.train.init_from, steps, 1e3 * pr.step_s, evals, pr.eval_s, format_duration(planned),
      4 * steps < pr.cfg.train.steps ? " (few steps for this size: a longer --time helps)" : ""));
  return planned;
}

// The progress line and metrics.jsonl record of the logged steps; the wall time of this invocation.
class StepLog {
 public:
  explicit StepLog(double base_elapsed) : base_elapsed_(base_elapsed) {}
  void add(int64_t tokens) {
    tokens_ += tokens;
    steps_++;
  }
  // The run's training time so far: earlier invocations (resumed runs) plus this one.
  double run_elapsed() const { return base_elapsed_ + seconds_since(t0_); }
  double seconds() const { return seconds_since(t0_); }
  double tokens_per_s() const { return tokens_per_s_; }
  void write(const Session& s, Progress& p, double loss, float lr, double val) {
    const auto now = Clock::now();
    const double dt = std::chrono::duration<double>(now - last_).count();
    const double tok_s = tokens_per_s_ = dt > 0 ? static_cast<double>(tokens_) / dt : 0.0;
    const TrainConfig& t = s.cfg.train;
    const double eta = seconds() / static_cast<double>(steps_) * static_cast<double>(t.steps - s.st.step);
    if (s.writer())
      append_metrics(s.dir, {{"step", s.st.step},
                             {"train_loss", loss},
                             {"lr", lr},
                             {"tokens_per_s", tok_s},
                             {"elapsed_s", run_elapsed()}});
    const std::string shown = std::isnan(val) ? std::string("-") : fmt::format("{:.4f}", val);
    p.step(fmt::format("step {:>6}/{}  train loss {:.4f}  {} {}  lr {:.2e}  {:.0f} tok/s  ETA {}", s.st.step, t.steps,
                       loss, s.val_is_train ? "train-set loss" : "val loss", shown, lr, tok_s, format_duration(eta)));
    last_ = now;
    tokens_ = 0;
  }

 private:
  double base_elapsed_;
  Clock::time_point t0_ = Clock::now(), last_ = t0_;
  int64_t tokens_ = 0, steps_ = 0;  // tokens since the last log line; steps of this invocation
  double tokens_per_s_ = 0.0;
};

// A fresh run or a resumed one, planned for a time budget when asked, its header printed.
Session open_session(RunConfig cfg, const TrainerOptions& o, Clock::time_point t_start, Progress& p, TrainResult& r) {
  Session s;
  s.cfg = std::move(cfg);
  s.dir = o.out_dir;
  s.dist = o.dist;
  ATTO_CHECK(!s.dir.empty(), "no output directory: pass --out DIR");
  if (!o.resume && s.cfg.train.time_budget > 0.0 && s.cfg.train.steps == kAutoInt) {
    s.cfg.train.validate();
    if (s.writer()) check_out_dir(s.dir, o.force);
    r.time_budget = s.cfg.train.time_budget;
    r.planned_seconds = plan_time_budget(s.cfg, s.dir, t_start, p);  // each rank alone
    if (s.dist.collective != nullptr) adopt_rank0_plan(*s.dist.collective, s.cfg, r.planned_seconds);
  }
  if (o.resume)
    start_resume(s);
  else
    start_new(s, o);
  r.num_parameters = s.task->model().num_parameters();
  if (s.dist.collective != nullptr) check_ranks_agree(*s.dist.collective, s.cfg, s.task->model(), s.st.step);
  const bool bf16 = s.cfg.train.precision == kernels::Precision::BF16;
  p.message("atto: " + s.task->summary() + (bf16 ? ", " + kernels::precision_label(kernels::Precision::BF16) : ""));
  for (const std::string& why : s.task->auto_notes()) p.message("  from the data: " + why);
  if (o.resume) p.message(fmt::format("resuming {} at step {} of {}", s.dir, s.st.step, s.cfg.train.steps));
  return s;
}

// A step whose loss or gradient was not finite: counted and skipped, until too many in a row.
void skip_bad_step(Session& s, Progress& p, int64_t bad_streak) {
  s.st.skipped_steps++;
  ATTO_CHECK(bad_streak < s.cfg.train.max_bad_steps,
             "training diverged: {} steps in a row at step {} had a NaN or Inf loss or gradient (they were "
             "skipped; the saved checkpoints are untouched). Lower --lr or raise --warmup, then resume or restart",
             bad_streak, s.st.step);
  p.message(fmt::format("step {:>6}  non-finite loss or gradient: step skipped", s.st.step));
}

void record_end(const Session& s, TrainResult& r) {
  r.steps = s.st.step;
  r.metric = best_metric(s.cfg);
  r.best_score = best_score(s.st, r.metric);
  r.best_step = s.st.best_step;
  r.skipped_steps = s.st.skipped_steps;
  r.val_is_train = s.val_is_train;
}

}  // namespace

// The library's progress callback, after a logged step or an evaluation (val: NaN when none).
void report_progress(const Session& s, const TrainerOptions& o, const StepLog& log, double loss, double val) {
  const Metric m = best_metric(s.cfg);
  o.on_progress({.step = s.st.step,
                 .total_steps = s.cfg.train.steps,
                 .train_loss = loss,
                 .val_loss = val,
                 .best_score = best_score(s.st, m),
                 .metric = m,
                 .elapsed_s = log.seconds(),
                 .tokens_per_s = log.tokens_per_s()});
}

TrainResult train_run(RunConfig cfg, const TrainerOptions& o) {
  const auto t_start = Clock::now();
  Progress p(o.dist.collective == nullptr || o.dist.collective->rank() == 0 ? o.progress : nullptr);  // rank 0's
  TrainResult r;
  Session s = open_session(std::move(cfg), o, t_start, p, r);
  const TrainConfig& t = s.cfg.train;
  const kernels::PrecisionScope precision(t.precision, &s.bf16_weights);  // checks that the CPU has bf16
  const optim::LrSchedule sched = t.lr_schedule();
  StepLog log(s.st.elapsed_seconds);
  int64_t bad_streak = 0;
  double val = std::nan("");
  while (s.st.step < t.steps) {
    const float lr = sched.at(s.st.step);
    int64_t step_tokens = 0;
    const double loss = train_step(s, lr, step_tokens);
    if (std::isnan(loss)) {
      skip_bad_step(s, p, ++bad_streak);
      continue;
    }
    bad_streak = 0;
    s.st.step++;
    log.add(step_tokens);
    r.last_train_loss = loss;
    r.tokens += step_tokens;
    const bool last = s.st.step == t.steps;
    // Read once: both checks below agree (and every rank agrees: one stops, all stop).
    const bool stopping = any_rank(s.dist.collective, o.stop != nullptr && o.stop->load());
    const bool logged = s.st.step % t.log_every == 0 || last;
    if (logged) log.write(s, p, loss, lr, val);
    const bool evaluating = s.st.step % t.eval_every == 0 || last || stopping;
    if (evaluating) {
      s.st.elapsed_seconds = log.run_elapsed();
      val = r.last_val_loss = evaluate_and_save(s, p);
    }
    if (o.on_progress && (logged || evaluating)) report_progress(s, o, log, loss, evaluating ? val : std::nan(""));
    if (evaluating && t.early_stop > 0 && s.st.evals_without_improvement >= t.early_stop) {
      r.early_stopped = true;
      p.message(fmt::format("early stop: {} evaluations without improvement", t.early_stop));
      break;
    }
    if (stopping) {
      r.interrupted = true;
      p.message(
          fmt::format("interrupted at step {}: state saved; continue with `atto train --resume {}`", s.st.step, s.dir));
      break;
    }
  }
  p.finish();
  r.seconds = log.seconds();
  r.total_seconds = seconds_since(t_start);
  record_end(s, r);
  return r;
}

}  // namespace atto
