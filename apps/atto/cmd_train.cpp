// atto train: train a GPT on a text file (or continue a run with --resume).
#include <fmt/format.h>

#include "commands.h"
#include "io/file.h"
#include "tensor/error.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace atto::cli {

namespace {

struct TrainFlags {
  RunConfig cfg;  // flag values (defaults shown in --help)
  std::string out, config_file, resume, mode = "auto", ffn, norm, placement, pos, schedule;
  bool force = false, quiet = false;
};

using Copy = std::function<void(RunConfig&, const TrainFlags&)>;
struct FlagCopy {
  const char* name;
  Copy copy;
  bool allowed_on_resume;
};

// How each given flag lands in the config (flags override --config, which overrides defaults).
std::vector<FlagCopy> flag_table() {
  auto m = [](auto field) { return [field](RunConfig& c, const TrainFlags& f) { c.model.*field = f.cfg.model.*field; }; };
  auto t = [](auto field) { return [field](RunConfig& c, const TrainFlags& f) { c.train.*field = f.cfg.train.*field; }; };
  return {
      {"--data", [](RunConfig& c, const TrainFlags& f) { c.data.path = f.cfg.data.path; }, false},
      {"--mode", [](RunConfig& c, const TrainFlags& f) { c.data.mode = parse_data_mode(f.mode); }, false},
      {"--split-seed", [](RunConfig& c, const TrainFlags& f) { c.data.split_seed = f.cfg.data.split_seed; }, false},
      {"--d-model", m(&GPTConfig::n_embd), false},
      {"--n-heads", m(&GPTConfig::n_head), false},
      {"--n-layers", m(&GPTConfig::n_layer), false},
      {"--block-size", m(&GPTConfig::block_size), false},
      {"--d-ff", m(&GPTConfig::d_ff), false},
      {"--dropout", m(&GPTConfig::dropout), false},
      {"--bias", m(&GPTConfig::bias), false},
      {"--tie-weights", m(&GPTConfig::tie_weights), false},
      {"--ffn", [](RunConfig& c, const TrainFlags& f) { c.model.activation = parse_activation(f.ffn); }, false},
      {"--norm", [](RunConfig& c, const TrainFlags& f) { c.model.norm = parse_norm(f.norm); }, false},
      {"--norm-placement",
       [](RunConfig& c, const TrainFlags& f) {
         if (f.placement != "pre" && f.placement != "post")
           throw UsageError(fmt::format("--norm-placement must be pre or post, got '{}'", f.placement));
         c.model.pre_norm = f.placement == "pre";
       },
       false},
      {"--pos", [](RunConfig& c, const TrainFlags& f) { c.model.pos = parse_pos(f.pos); }, false},
      {"--steps", t(&TrainConfig::steps), true},
      {"--decay-steps", t(&TrainConfig::decay_steps), false},
      {"--batch-size", t(&TrainConfig::batch_size), false},
      {"--grad-accum", t(&TrainConfig::grad_accum), false},
      {"--lr", t(&TrainConfig::lr), false},
      {"--min-lr", t(&TrainConfig::min_lr), false},
      {"--warmup", t(&TrainConfig::warmup), false},
      {"--schedule",
       [](RunConfig& c, const TrainFlags& f) { c.train.schedule = optim::schedule_kind_from_string(f.schedule); },
       false},
      {"--weight-decay", t(&TrainConfig::weight_decay), false},
      {"--beta1", t(&TrainConfig::beta1), false},
      {"--beta2", t(&TrainConfig::beta2), false},
      {"--grad-clip", t(&TrainConfig::grad_clip), false},
      {"--seed", t(&TrainConfig::seed), false},
      {"--threads", t(&TrainConfig::threads), true},
      {"--eval-every", t(&TrainConfig::eval_every), true},
      {"--eval-batches", t(&TrainConfig::eval_batches), true},
      {"--early-stop", t(&TrainConfig::early_stop), true},
      {"--log-every", t(&TrainConfig::log_every), true},
  };
}

void add_flags(CLI::App* app, TrainFlags& f) {
  GPTConfig& m = f.cfg.model;
  TrainConfig& t = f.cfg.train;
  app->add_option("--data", f.cfg.data.path, "Training text file (UTF-8)");
  app->add_option("--out", f.out, "Run directory to create (config, tokenizer, checkpoints, metrics)");
  app->add_option("--resume", f.resume, "Continue the run in this directory (bit-exact; --steps sets the new total)");
  app->add_option("--config", f.config_file, "JSON file with the same keys as the flags (flags override it)");
  app->add_flag("--force", f.force, "Allow --out to be a directory that already holds a run (it is overwritten)");
  app->add_flag("--quiet,-q", f.quiet, "No progress output");
  app->add_option("--mode", f.mode,
                  "lines: one sample per line (names, words); stream: one token stream cut into blocks (prose); "
                  "auto: lines when the median line is at most 32 characters")
      ->default_str("auto");
  app->add_option("--split-seed", f.cfg.data.split_seed, "Seed of the train/validation split (lines mode)")
      ->capture_default_str();
  app->add_option("--d-model", m.n_embd, "Model width")->capture_default_str();
  app->add_option("--n-heads", m.n_head, "Attention heads (must divide --d-model)")->capture_default_str();
  app->add_option("--n-layers", m.n_layer, "Transformer blocks")->capture_default_str();
  app->add_option("--block-size", m.block_size,
                  "Context length; 0 = auto (lines: longest line + 1; stream: 128)")
      ->default_str("0");
  app->add_option("--d-ff", m.d_ff, "Feed-forward width; 0 = 4 * d-model")->capture_default_str();
  app->add_option("--ffn", f.ffn, "Feed-forward activation: relu, gelu, gelu_tanh, swiglu")->default_str("gelu");
  app->add_option("--norm", f.norm, "layernorm or rmsnorm")->default_str("layernorm");
  app->add_option("--norm-placement", f.placement, "pre (GPT-2) or post (2017 paper)")->default_str("pre");
  app->add_option("--pos", f.pos, "Positional encoding: learned or sinusoidal")->default_str("learned");
  app->add_flag("--tie-weights,!--no-tie-weights", m.tie_weights, "Tie the output projection to the token embedding")
      ->capture_default_str();
  app->add_flag("--bias,!--no-bias", m.bias, "Biases in Linear layers and LayerNorm")->capture_default_str();
  app->add_option("--dropout", m.dropout, "Dropout probability")->capture_default_str();
  app->add_option("--steps", t.steps, "Optimizer steps (with --resume: the new total)")->capture_default_str();
  app->add_option("--decay-steps", t.decay_steps, "Length of the LR schedule; 0 = --steps")->capture_default_str();
  app->add_option("--batch-size", t.batch_size, "Sequences per micro-batch")->capture_default_str();
  app->add_option("--grad-accum", t.grad_accum, "Micro-batches per optimizer step")->capture_default_str();
  app->add_option("--lr", t.lr, "Peak learning rate")->capture_default_str();
  app->add_option("--min-lr", t.min_lr, "Floor of the cosine schedule")->capture_default_str();
  app->add_option("--warmup", t.warmup, "Linear warmup steps")->capture_default_str();
  app->add_option("--schedule", f.schedule, "constant, cosine (warmup + cosine decay), or invsqrt (Noam)")
      ->default_str("cosine");
  app->add_option("--weight-decay", t.weight_decay, "AdamW weight decay (not on biases, norms, embeddings)")
      ->capture_default_str();
  app->add_option("--beta1", t.beta1, "AdamW beta1")->capture_default_str();
  app->add_option("--beta2", t.beta2, "AdamW beta2")->capture_default_str();
  app->add_option("--grad-clip", t.grad_clip, "Clip the global gradient norm; 0 = off")->capture_default_str();
  app->add_option("--seed", t.seed, "Seed of the initial weights, batches and dropout")->capture_default_str();
  app->add_option("--threads", t.threads, "Threads; 0 = all cores")->capture_default_str();
  app->add_option("--eval-every", t.eval_every, "Evaluate the validation split every N steps")->capture_default_str();
  app->add_option("--eval-batches", t.eval_batches, "Batches per evaluation; 0 = the whole split")
      ->capture_default_str();
  app->add_option("--early-stop", t.early_stop, "Stop after N evaluations without improvement; 0 = off")
      ->capture_default_str();
  app->add_option("--log-every", t.log_every, "Log every N steps")->capture_default_str();
}

int run_train(CLI::App* app, const TrainFlags& f) {
  const bool resume = !f.resume.empty();
  RunConfig cfg;
  if (resume) {
    if (given(app, "--out") && f.out != f.resume)
      throw UsageError("--resume continues a run in place: do not also give a different --out");
    if (given(app, "--config")) throw UsageError("--config cannot be combined with --resume");
    cfg = load_run_config(f.resume);
  } else {
    if (!f.config_file.empty()) apply_config_json(cfg, io::read_json(f.config_file), f.config_file);
  }
  for (const FlagCopy& fc : flag_table()) {
    if (!given(app, fc.name)) continue;
    if (resume && !fc.allowed_on_resume)
      throw UsageError(fmt::format("{} cannot be changed when resuming (the run's config.json fixes it); allowed "
                                   "with --resume: --steps, --threads, --eval-every, --eval-batches, --early-stop, "
                                   "--log-every",
                                   fc.name));
    fc.copy(cfg, f);
  }
  if (!resume) {
    if (cfg.data.path.empty()) throw UsageError("no training data: pass --data FILE (or --resume DIR)");
    if (f.out.empty()) throw UsageError("no output directory: pass --out DIR");
  }
  TrainerOptions opts;
  opts.out_dir = resume ? f.resume : f.out;
  opts.resume = resume;
  opts.force = f.force;
  opts.progress = f.quiet ? nullptr : stderr;
  const TrainResult r = train_gpt(cfg, opts);
  fmt::print("trained {} steps in {}s ({:.0f} tokens/s): best val loss {:.4f} at step {}; run saved in {}\n", r.steps,
             fmt::format("{:.1f}", r.seconds), r.seconds > 0 ? r.tokens / r.seconds : 0.0, r.best_val_loss,
             r.best_step, opts.out_dir);
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
