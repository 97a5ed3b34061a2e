// atto train: train a GPT on a text file (or continue a run with --resume).
#include <fmt/format.h>

#include <atomic>
#include <csignal>

#include "commands.h"
#include "io/file.h"
#include "kernels/kernels.h"
#include "base/error.h"
#include "run/run_dir.h"
#include "train/progress.h"
#include "train/trainer.h"

namespace atto::cli {

namespace {

// Ctrl-C while training: stop at the end of the current step and save (the trainer reads the flag).
std::atomic<bool> g_stop{false};
extern "C" void on_sigint(int) { g_stop = true; }

struct SigintScope {
  using Handler = void (*)(int);
  Handler prev;
  SigintScope() : prev(std::signal(SIGINT, on_sigint)) { g_stop = false; }
  ~SigintScope() { std::signal(SIGINT, prev); }
};

struct TrainFlags {
  RunConfig cfg = default_run_config("gpt");  // flag values (defaults shown in --help)
  std::string out, config_file, resume, mode = "auto", ffn, norm, placement, pos, schedule, task = "gpt", time;
  std::string optimizer = "adamw", best_by = "loss";
  int64_t n_enc_layers = 0, n_dec_layers = 0, max_len = 0;
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
  // A model flag sets the GPT field, and the seq2seq field of the same meaning (if any).
  auto m = [](auto field) { return [field](RunConfig& c, const TrainFlags& f) { c.model.*field = f.cfg.model.*field; }; };
  auto both = [](auto gpt_field, auto s2s_field) {
    return [gpt_field, s2s_field](RunConfig& c, const TrainFlags& f) {
      c.model.*gpt_field = f.cfg.model.*gpt_field;
      c.seq2seq.*s2s_field = f.cfg.model.*gpt_field;
    };
  };
  auto d = [](auto field) { return [field](RunConfig& c, const TrainFlags& f) { c.data.*field = f.cfg.data.*field; }; };
  auto t = [](auto field) { return [field](RunConfig& c, const TrainFlags& f) { c.train.*field = f.cfg.train.*field; }; };
  return {
      {"--data", [](RunConfig& c, const TrainFlags& f) { c.data.path = f.cfg.data.path; }, false},
      {"--mode", [](RunConfig& c, const TrainFlags& f) { c.data.mode = parse_data_mode(f.mode); }, false},
      {"--split-seed", [](RunConfig& c, const TrainFlags& f) { c.data.split_seed = f.cfg.data.split_seed; }, false},
      {"--d-model", both(&GPTConfig::d_model, &Seq2SeqConfig::d_model), false},
      {"--n-heads", both(&GPTConfig::n_heads, &Seq2SeqConfig::n_heads), false},
      {"--n-layers",
       [](RunConfig& c, const TrainFlags& f) {
         c.model.n_layers = f.cfg.model.n_layers;
         c.seq2seq.n_enc_layers = c.seq2seq.n_dec_layers = f.cfg.model.n_layers;
       },
       false},
      {"--n-enc-layers", [](RunConfig& c, const TrainFlags& f) { c.seq2seq.n_enc_layers = f.n_enc_layers; }, false},
      {"--n-dec-layers", [](RunConfig& c, const TrainFlags& f) { c.seq2seq.n_dec_layers = f.n_dec_layers; }, false},
      {"--max-len", [](RunConfig& c, const TrainFlags& f) { c.seq2seq.max_len = f.max_len; }, false},
      {"--block-size", m(&GPTConfig::block_size), false},
      {"--d-ff", both(&GPTConfig::d_ff, &Seq2SeqConfig::d_ff), false},
      {"--dropout", both(&GPTConfig::dropout, &Seq2SeqConfig::dropout), false},
      {"--bias", both(&GPTConfig::bias, &Seq2SeqConfig::bias), false},
      {"--tie-weights", both(&GPTConfig::tie_weights, &Seq2SeqConfig::tie_weights), false},
      {"--ffn",
       [](RunConfig& c, const TrainFlags& f) { c.model.activation = c.seq2seq.activation = parse_activation(f.ffn); },
       false},
      {"--norm", [](RunConfig& c, const TrainFlags& f) { c.model.norm = c.seq2seq.norm = parse_norm(f.norm); }, false},
      {"--norm-placement",
       [](RunConfig& c, const TrainFlags& f) {
         if (f.placement != "pre" && f.placement != "post")
           throw UsageError(fmt::format("--norm-placement must be pre or post, got '{}'", f.placement));
         c.model.pre_norm = c.seq2seq.pre_norm = f.placement == "pre";
       },
       false},
      {"--pos", [](RunConfig& c, const TrainFlags& f) { c.model.pos = c.seq2seq.pos = parse_pos(f.pos); }, false},
      {"--src", d(&DataConfig::src), false},
      {"--tgt", d(&DataConfig::tgt), false},
      {"--valid-src", d(&DataConfig::valid_src), false},
      {"--valid-tgt", d(&DataConfig::valid_tgt), false},
      {"--tokenizer", d(&DataConfig::tokenizer), false},
      {"--vocab-size", d(&DataConfig::vocab_size), false},
      {"--shared-vocab",
       [](RunConfig& c, const TrainFlags& f) {
         c.data.shared_vocab = f.cfg.data.shared_vocab;
         c.seq2seq.share_embeddings = f.cfg.data.shared_vocab;
       },
       false},
      {"--label-smoothing", t(&TrainConfig::label_smoothing), false},
      {"--batch-tokens", t(&TrainConfig::batch_tokens), false},
      {"--eval-bleu", t(&TrainConfig::eval_bleu), true},
      {"--size", t(&TrainConfig::size), false},
      {"--time",
       [](RunConfig& c, const TrainFlags& f) {
         c.train.time_budget = parse_duration(f.time, "--time");
         c.train.steps = kAutoInt;  // planned
       },
       false},
      {"--optimizer",
       [](RunConfig& c, const TrainFlags& f) { c.train.optimizer = optim::optimizer_kind_from_string(f.optimizer); },
       false},
      {"--momentum", t(&TrainConfig::momentum), false},
      {"--nesterov", t(&TrainConfig::nesterov), false},
      {"--best-by", [](RunConfig& c, const TrainFlags& f) { c.train.best_by = parse_best_by(f.best_by); }, false},
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
      {"--shards", t(&TrainConfig::shards), false},
      {"--eval-every", t(&TrainConfig::eval_every), true},
      {"--eval-batches", t(&TrainConfig::eval_batches), true},
      {"--early-stop", t(&TrainConfig::early_stop), true},
      {"--log-every", t(&TrainConfig::log_every), true},
  };
}

void add_flags(CLI::App* app, TrainFlags& f) {
  GPTConfig& m = f.cfg.model;
  TrainConfig& t = f.cfg.train;
  app->add_option("--task", f.task, "gpt (language model on --data) or seq2seq (translation on --src/--tgt)")
      ->default_str("gpt");
  app->add_option("--data", f.cfg.data.path, "Training text file (UTF-8); for seq2seq, one tab-separated file");
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
  // "auto": chosen from the data when the run starts (docs/defaults.md); the run header says
  // what and why, and config.json records it.
  app->add_option("--size", t.size,
                  "Model size preset: auto (from the data), gpt: tiny, small, medium, large; seq2seq: small, base. "
                  "--d-model, --n-layers, --n-heads override it")
      ->default_str("auto");
  app->add_option("--time", f.time,
                  "Wall-clock budget, e.g. 90s, 5m, 1h30m: measures its step time, then sizes the model (with --size "
                  "auto) and the steps so the run ends on time with the LR decayed");
  app->add_option("--d-model", m.d_model, "Model width; 0 = auto")->default_str("auto");
  app->add_option("--n-heads", m.n_heads, "Attention heads (must divide --d-model); 0 = auto")->default_str("auto");
  app->add_option("--n-layers", m.n_layers, "Transformer blocks; 0 = auto")->default_str("auto");
  app->add_option("--block-size", m.block_size,
                  "Context length; 0 = auto (lines: longest line + 1; stream: by model size)")
      ->default_str("auto");
  app->add_option("--d-ff", m.d_ff, "Feed-forward width; 0 = 4 * d-model")->capture_default_str();
  app->add_option("--ffn", f.ffn, "Feed-forward activation: relu, gelu, gelu_tanh, swiglu")->default_str("gelu");
  app->add_option("--norm", f.norm, "layernorm or rmsnorm")->default_str("layernorm");
  app->add_option("--norm-placement", f.placement, "pre (GPT-2) or post (2017 paper)")->default_str("pre");
  app->add_option("--pos", f.pos, "Positional encoding: learned or sinusoidal")->default_str("learned");
  app->add_flag("--tie-weights,!--no-tie-weights", m.tie_weights, "Tie the output projection to the token embedding")
      ->capture_default_str();
  app->add_flag("--bias,!--no-bias", m.bias, "Biases in Linear layers and LayerNorm")->capture_default_str();
  app->add_option("--dropout", m.dropout, "Dropout probability; -1 = auto")->default_str("auto");
  app->add_option("--steps", t.steps, "Optimizer steps (with --resume: the new total); 0 = auto")
      ->default_str("auto");
  app->add_option("--decay-steps", t.decay_steps, "Length of the LR schedule; 0 = --steps")->capture_default_str();
  app->add_option("--batch-size", t.batch_size, "Sequences per micro-batch; 0 = auto")->default_str("auto");
  app->add_option("--grad-accum", t.grad_accum, "Micro-batches per optimizer step")->capture_default_str();
  app->add_option("--lr", t.lr, "Peak learning rate; 0 = auto (from --d-model)")->default_str("auto");
  app->add_option("--min-lr", t.min_lr, "Floor of the cosine schedule")->capture_default_str();
  app->add_option("--warmup", t.warmup, "Linear warmup steps; -1 = auto")->default_str("auto");
  app->add_option("--schedule", f.schedule, "constant, cosine (warmup + cosine decay), or invsqrt (Noam)")
      ->default_str("cosine");
  app->add_option("--weight-decay", t.weight_decay,
                  "Weight decay (not on biases, norms, embeddings); -1 = auto (GPT), 0 for seq2seq")
      ->default_str("auto");
  app->add_option("--beta1", t.beta1, "AdamW beta1")->capture_default_str();
  app->add_option("--beta2", t.beta2, "AdamW beta2")->capture_default_str();
  app->add_option("--grad-clip", t.grad_clip, "Clip the global gradient norm; 0 = off")->capture_default_str();
  app->add_option("--seed", t.seed, "Seed of the initial weights, batches and dropout")->capture_default_str();
  app->add_option("--threads", t.threads, "Threads; 0 = all cores")->capture_default_str();
  app->add_option("--shards", t.shards,
                  "Split each batch into N data-parallel shards of its rows, run side by side (one thread each); "
                  "the result does not depend on --threads. 0 = auto (2)")
      ->capture_default_str();
  app->add_option("--eval-every", t.eval_every, "Evaluate the validation split every N steps")->capture_default_str();
  app->add_option("--eval-batches", t.eval_batches, "Batches per evaluation; 0 = the whole split")
      ->capture_default_str();
  app->add_option("--early-stop", t.early_stop, "Stop after N evaluations without improvement; 0 = off")
      ->capture_default_str();
  app->add_option("--log-every", t.log_every, "Log every N steps")->capture_default_str();
  // Encoder-decoder (--task seq2seq); its defaults follow the paper (see docs/seq2seq.md).
  app->add_option("--src", f.cfg.data.src, "seq2seq: source-language file, one sentence per line");
  app->add_option("--tgt", f.cfg.data.tgt, "seq2seq: target-language file, aligned with --src");
  app->add_option("--valid-src", f.cfg.data.valid_src, "seq2seq: validation sources (default: a seeded split)");
  app->add_option("--valid-tgt", f.cfg.data.valid_tgt, "seq2seq: validation targets");
  app->add_option("--tokenizer", f.cfg.data.tokenizer, "seq2seq: char, word or spm (SentencePiece)")
      ->capture_default_str();
  app->add_option("--vocab-size", f.cfg.data.vocab_size, "seq2seq: SentencePiece pieces (spm) or word cap (word)")
      ->capture_default_str();
  app->add_flag("--shared-vocab", f.cfg.data.shared_vocab, "seq2seq: one vocabulary and embedding for both sides");
  app->add_option("--n-enc-layers", f.n_enc_layers, "seq2seq: encoder layers (default --n-layers)");
  app->add_option("--n-dec-layers", f.n_dec_layers, "seq2seq: decoder layers (default --n-layers)");
  app->add_option("--max-len", f.max_len, "seq2seq: longest sentence in tokens (longer training pairs are skipped)");
  app->add_option("--label-smoothing", t.label_smoothing, "Label smoothing (seq2seq default 0.1)");
  app->add_option("--batch-tokens", t.batch_tokens,
                  "seq2seq: padded tokens per batch; 0 = --batch-size sentences; -1 = auto")
      ->default_str("auto");
  app->add_option("--eval-bleu", t.eval_bleu, "seq2seq: validation sentences decoded for BLEU (-1 all, 0 none)");
  app->add_option("--optimizer", f.optimizer,
                  "adamw, adam or sgd (plain SGD with L2 --weight-decay; seq2seq default adam, as the paper)");
  app->add_option("--momentum", t.momentum, "sgd: momentum in [0, 1)")->capture_default_str();
  app->add_flag("--nesterov", t.nesterov, "sgd: Nesterov momentum (needs --momentum > 0)");
  app->add_option("--best-by", f.best_by, "Keep the checkpoint with the best loss or bleu (seq2seq default bleu)");
}

int run_train(CLI::App* app, const TrainFlags& f) {
  const bool resume = !f.resume.empty();
  RunConfig cfg;
  if (resume) {
    if (given(app, "--out") && f.out != f.resume)
      throw UsageError("--resume continues a run in place: do not also give a different --out");
    if (given(app, "--config")) throw UsageError("--config cannot be combined with --resume");
    if (given(app, "--task")) throw UsageError("--task cannot be changed when resuming");
    cfg = load_run_config(f.resume);
  } else {
    cfg = default_run_config(f.task);
    if (!f.config_file.empty()) apply_config_json(cfg, io::read_json(f.config_file), f.config_file);
  }
  if (given(app, "--time") && given(app, "--steps"))
    throw UsageError("--time plans the number of steps itself: give --time or --steps, not both");
  const std::vector<FlagCopy> table = flag_table();
  for (const FlagCopy& fc : table) {
    if (!given(app, fc.name)) continue;
    if (resume && !fc.allowed_on_resume) {
      std::string allowed;
      for (const FlagCopy& a : table)
        if (a.allowed_on_resume) allowed += std::string(allowed.empty() ? "" : ", ") + a.name;
      throw UsageError(fmt::format(
          "{} cannot be changed when resuming (the run's config.json fixes it); allowed with --resume: {}", fc.name,
          allowed));
    }
    fc.copy(cfg, f);
  }
  if (!resume) {
    if (cfg.task == "gpt" && cfg.data.path.empty())
      throw UsageError("no training data: pass --data FILE (or --resume DIR)");
    if (cfg.task == "seq2seq" && cfg.data.path.empty() && (cfg.data.src.empty() || cfg.data.tgt.empty()))
      throw UsageError("seq2seq needs --src FILE and --tgt FILE (or --data FILE.tsv)");
    if (f.out.empty()) throw UsageError("no output directory: pass --out DIR");
  }
  TrainerOptions opts;
  opts.out_dir = resume ? f.resume : f.out;
  opts.resume = resume;
  opts.force = f.force;
  opts.progress = f.quiet ? nullptr : stderr;
  opts.stop = &g_stop;
  kernels::set_num_threads(cfg.train.threads);
  SigintScope sigint;
  const TrainResult r = train_gpt(cfg, opts);
  const bool by_bleu = cfg.task == "seq2seq" && cfg.train.best_by == BestBy::Bleu && cfg.train.eval_bleu != 0;
  fmt::print("trained {} steps in {:.1f}s ({:.0f} tokens/s): best {} {} {:.4f} at step {}; run saved in {}\n", r.steps,
             r.seconds, r.seconds > 0 ? r.tokens / r.seconds : 0.0, r.val_is_train ? "training-set" : "val",
             by_bleu ? "BLEU" : "loss",
             by_bleu ? -r.best_val_loss : r.best_val_loss, r.best_step, opts.out_dir);
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
