// atto train: train a GPT on a text file (or continue a run with --resume).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <map>
#include <optional>
#include <thread>

#include <omp.h>
#include "base/error.h"
#include "commands.h"
#include "io/file.h"
#include "kernels/kernels.h"
#include "run/config_fields.h"
#include "run/run_dir.h"
#include "train/progress.h"
#include "train/trainer.h"
#ifdef ATTO_HAVE_MPI
#include "mpi/mpi_collective.h"
#endif

namespace atto::cli {

namespace {

// Ctrl-C while training: stop at the end of the current step and save (the trainer reads the flag).
std::atomic<bool> g_stop{false};
extern "C" void on_sigint(int) { g_stop = true; }

// Under mpirun also SIGTERM: Ctrl-C on mpirun reaches the ranks as SIGTERM (SIGKILL follows if
// they take too long), so they stop at the end of the step and rank 0 saves.
struct SigintScope {
  using Handler = void (*)(int);
  Handler prev, prev_term = SIG_DFL;
  bool term;
  explicit SigintScope(bool sigterm_too) : prev(std::signal(SIGINT, on_sigint)), term(sigterm_too) {
    if (term) prev_term = std::signal(SIGTERM, on_sigint);
    g_stop = false;
  }
  ~SigintScope() {
    std::signal(SIGINT, prev);
    if (term) std::signal(SIGTERM, prev_term);
  }
};

// The flags that are not configuration keys; the keys' flags come from run/config_fields.h.
struct TrainFlags {
  std::string out, config_file, resume, task = "gpt";
  bool force = false, quiet = false;
  std::string overlap = "auto";
  double dist_timeout = 300.0;
  std::map<std::string, std::string> values;  // a key's flag -> its text (std::map: stable addresses)
  std::map<std::string, bool> switches;       // a key's switch -> on/off
};

void add_flags(CLI::App* app, TrainFlags& f) {
  app->add_option("--task", f.task, "gpt (language model on --data) or seq2seq (translation on --src/--tgt)")
      ->default_str("gpt");
  app->add_option("--out", f.out, "Run directory to create (config, tokenizer, checkpoints, metrics)");
  app->add_option("--resume", f.resume, "Continue the run in this directory (bit-exact; --steps sets the new total)");
  app->add_option("--config", f.config_file, "JSON file with the same keys as the flags (flags override it)");
  app->add_flag("--force", f.force, "Allow --out to be a directory that already holds a run (it is overwritten)");
  app->add_flag("--quiet,-q", f.quiet, "No progress output");
  app->add_option("--overlap", f.overlap,
                  "mpirun: send gradient buckets during the backward pass (on) or after it (off); auto = on when "
                  "the ranks span several hosts (on one host the copies compete with the backward for the cores)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->default_str("auto");
  app->add_option("--dist-timeout", f.dist_timeout,
                  "mpirun: seconds a rank waits for the others before it ends the run with an error")
      ->default_str("300");
  for (const ConfigField& field : config_fields()) {
    if (!field.flag) continue;
    const std::string name = flag_name(field.flag);
    if (field.kind == ValueKind::Bool) {
      app->add_flag(field.flag, f.switches[name], field.help)->default_str(default_text(field));
    } else {
      const char* type = field.kind == ValueKind::Int        ? "INT"
                         : field.kind == ValueKind::Float    ? "FLOAT"
                         : field.kind == ValueKind::Duration ? "DURATION"
                                                             : "TEXT";
      app->add_option(field.flag, f.values[name], field.help)->type_name(type)->default_str(default_text(field));
    }
  }
}

// The text of a key's flag when it was given on the command line.
std::optional<std::string> flag_text(const CLI::App* app, const TrainFlags& f, const std::string& name) {
  if (!given(app, name)) return std::nullopt;
  if (auto s = f.switches.find(name); s != f.switches.end()) return s->second ? "true" : "false";
  return f.values.at(name);
}

// The ranks of an mpirun (nullptr: not started by one). Each rank's thread count, when left to
// auto: the cores it is bound to, or this host's cores shared among its ranks.
std::unique_ptr<Collective> open_world(const TrainFlags& f, int threads) {
#ifdef ATTO_HAVE_MPI
  if (!mpi::launched_by_mpirun()) return nullptr;
  std::unique_ptr<Collective> w = mpi::MpiCollective::init();
  w->timeout_s = f.dist_timeout;
  if (threads == 0) {
    const int procs = omp_get_num_procs(), cores = static_cast<int>(std::thread::hardware_concurrency());
    kernels::set_num_threads(procs < cores ? procs : std::max(1, cores / mpi::local_ranks()));
  }
  return w;
#else
  const char* n = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (n != nullptr && std::atoi(n) > 1)
    throw UsageError(
        "this atto was built without MPI, so mpirun's ranks would each train alone: install libopenmpi-dev and "
        "rebuild (cmake -DATTO_MPI=ON), or run one process");
  return nullptr;
#endif
}

// --overlap: auto is on when the ranks run on more than one host (every rank calls this).
bool overlap_on(Collective& world, const TrainFlags& f) {
  const std::vector<std::string> hosts = world.all_gather(world.host());
  if (f.overlap != "auto") return f.overlap == "on";
  return std::any_of(hosts.begin(), hosts.end(), [&](const std::string& h) { return h != hosts[0]; });
}

int run_train(CLI::App* app, const TrainFlags& f) {
  const bool resume = !f.resume.empty();
  RunConfig cfg;
  if (resume) {
    if (given(app, "--out") && f.out != f.resume)
      throw UsageError("--resume continues a run in place: do not also give a different --out");
    if (given(app, "--config")) throw UsageError("--config cannot be combined with --resume");
    if (given(app, "--task")) throw UsageError("--task cannot be changed when resuming");
    if (!std::filesystem::is_directory(f.resume) && std::filesystem::is_regular_file(f.resume))
      throw UsageError(fmt::format("--resume {}: a file, not a run directory; --resume continues a run that "
                                   "atto train --out wrote (to start from a model file's weights: --init-from {})",
                                   f.resume, f.resume));
    cfg = load_run_config(f.resume);
  } else {
    Task task;
    try {
      task = parse_task(f.task);
    } catch (const Error& e) {
      throw UsageError(fmt::format("--task: {}", e.what()));
    }
    cfg = default_run_config(task);
    if (!f.config_file.empty()) apply_config_json(cfg, io::read_json(f.config_file), f.config_file);
  }
  if (given(app, "--time") && given(app, "--steps"))
    throw UsageError("--time plans the number of steps itself: give --time or --steps, not both");
  apply_flags(cfg, resume, [&](const std::string& name) { return flag_text(app, f, name); });
  if (!resume) {
    check_new_run_inputs(cfg, [](const std::string& key) { return "--" + key + " FILE"; });
    if (f.out.empty()) throw UsageError("no output directory: pass --out DIR");
  }
  TrainerOptions opts;
  opts.out_dir = resume ? f.resume : f.out;
  opts.resume = resume;
  opts.force = f.force;
  opts.progress = f.quiet ? nullptr : stderr;
  opts.stop = &g_stop;
  cfg.train.validate();  // before the threads are made (--threads 100000 would start that many)
  kernels::set_num_threads(cfg.train.threads);
  if (f.dist_timeout <= 0) throw UsageError(fmt::format("--dist-timeout must be > 0 seconds, got {}", f.dist_timeout));
  const std::unique_ptr<Collective> world = open_world(f, cfg.train.threads);
  if (world != nullptr && world->size() > 1) opts.dist = {.collective = world.get(), .overlap = overlap_on(*world, f)};
  SigintScope sigint(opts.dist.collective != nullptr);
  TrainResult r;
  try {
    r = train_run(cfg, opts);
  } catch (const std::exception& e) {
    if (opts.dist.collective == nullptr) throw;
    opts.dist.collective->abort(e.what());  // every rank must end: MPI_Abort, not a lone exit
  }
  if (world != nullptr && world->rank() > 0) return 0;  // rank 0 reports
  fmt::print("trained {} steps in {:.1f}s ({:.0f} tokens/s): best {} {} {:.4f} at step {}; run saved in {}\n", r.steps,
             r.seconds, r.seconds > 0 ? r.tokens / r.seconds : 0.0, r.val_is_train ? "training-set" : "val",
             r.metric == Metric::Bleu ? "BLEU" : "loss", r.best_score, r.best_step, opts.out_dir);
  if (r.time_budget > 0)
    fmt::print("time budget {}: the run took {} (planned {})\n", format_duration(r.time_budget),
               format_duration(r.total_seconds), format_duration(r.planned_seconds));
  if (r.skipped_steps > 0) fmt::print("{} steps were skipped for a non-finite loss or gradient\n", r.skipped_steps);
  return 0;
}

}  // namespace

Command add_train(CLI::App& root) {
  CLI::App* app = root.add_subcommand("train", "Train a GPT on a text file");
  auto flags = std::make_shared<TrainFlags>();
  add_flags(app, *flags);
  return {app, [app, flags] { return run_train(app, *flags); }};
}

}  // namespace atto::cli
