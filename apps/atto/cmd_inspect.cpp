// atto inspect: a self-contained HTML report (with SVG figures) of what a trained GPT does with
// one input (a GPT run: --text; a seq2seq run: --src, with cross-attention): attention maps, residual stream,
// next-token distribution, embeddings, positions, training curves. See docs/inspect.md.
#include <fmt/format.h>

#include "base/error.h"
#include "commands.h"
#include "kernels/kernels.h"
#include "run/run_config.h"
#include "run/run_dir.h"
#include "viz/report.h"

namespace atto::cli {

namespace {

struct InspectFlags {
  std::string model, out;
  viz::InspectOptions opt;
  int threads = 0;
  bool text_given = false;
  std::string tgt;
  bool tgt_given = false;
};

int run_inspect(const InspectFlags& f) {
  viz::InspectOptions opt = f.opt;
  opt.validate();
  if (f.tgt_given) opt.tgt = f.tgt;
  const bool seq2seq = load_run_config(f.model).task == Task::Seq2Seq;
  if (seq2seq && f.text_given)
    throw UsageError(
        fmt::format("--text is for GPT runs; {} is a seq2seq run: give the source sentence with --src", f.model));
  if (!seq2seq && !f.text_given)
    throw UsageError(
        fmt::format("{} is a GPT run: give the input with --text (--src/--tgt are for seq2seq runs)", f.model));
  kernels::set_num_threads(f.threads);
  const viz::Report r = viz::inspect_run(f.model, opt);
  viz::write_report(r, f.out);
  for (const std::string& n : r.notes) fmt::print(stderr, "atto: note: {}\n", n);
  fmt::print("wrote {}/index.html and {} SVG figures\n", f.out, r.figures.size());
  return 0;
}

}  // namespace

Command add_inspect(CLI::App& root) {
  CLI::App* app = root.add_subcommand("inspect", "Write an HTML report (SVG figures) of what a model does with a text");
  auto f = std::make_shared<InspectFlags>();
  viz::InspectOptions& o = f->opt;
  app->add_option("--model", f->model, "Run directory of a trained model")->required();
  app->add_option("--text", o.text, "GPT runs: input text (lines mode: the model sees <eos> + text)");
  app->add_option("--src", o.src, "Seq2seq runs: the source sentence (translated greedily; cross-attention shown)");
  app->add_option("--tgt", f->tgt, "Seq2seq runs: force this target instead of the greedy translation");
  app->add_option("--out", f->out, "Folder for index.html and the SVG files (created if missing)")->required();
  app->add_option("--temperature", o.temperature, "Next-token figure: divide the logits by this (> 0)")
      ->capture_default_str();
  app->add_option("--top-k", o.top_k, "Next-token figure: keep the k most likely tokens; 0 = off")
      ->capture_default_str();
  app->add_option("--top-p", o.top_p, "Next-token figure: keep the most likely tokens up to this probability; 1 = off")
      ->capture_default_str();
  app->add_option("--max-attention-tokens", o.max_attention_tokens, "Attention maps show at most the last N positions")
      ->capture_default_str();
  add_threads_flag(app, f->threads);
  return {app, [f, app] {
            f->text_given = app->count("--text") > 0;
            f->tgt_given = app->count("--tgt") > 0;
            return run_inspect(*f);
          }};
}

}  // namespace atto::cli
