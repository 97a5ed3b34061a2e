// atto data synth: synthetic sequence-to-sequence tasks for tests and demos.
#include <fmt/format.h>

#include "base/error.h"
#include "commands.h"
#include "data/synth.h"

namespace atto::cli {

namespace {
struct SynthFlags {
  std::string task, out;
  int64_t n = 20000;
  SynthOptions opt;
};
}  // namespace

Command add_data(CLI::App& root) {
  CLI::App* app = root.add_subcommand("data", "Make data sets");
  app->require_subcommand(1);
  CLI::App* synth = app->add_subcommand("synth", "Synthetic seq2seq pairs: reverse, copy or sort a digit sequence");
  auto f = std::make_shared<SynthFlags>();
  synth->add_option("task", f->task, "reverse, copy or sort")->required();
  synth->add_option("--n", f->n, "Number of pairs")->capture_default_str();
  synth->add_option("--out", f->out, "Output prefix: writes PREFIX.src and PREFIX.tgt")->required();
  synth->add_option("--min-len", f->opt.min_len, "Shortest sequence")->capture_default_str();
  synth->add_option("--max-len", f->opt.max_len, "Longest sequence")->capture_default_str();
  synth->add_option("--vocab", f->opt.vocab, "Number of symbols (0 .. vocab-1)")->capture_default_str();
  synth->add_option("--seed", f->opt.seed, "Seed")->capture_default_str();
  return {app, [f] {
            ATTO_CHECK(f->n >= 1, "--n must be at least 1, got {}", f->n);
            const SynthTask task = parse_synth_task(f->task);
            write_synth(task, f->n, f->opt, f->out);
            fmt::print("wrote {} {} pairs to {}.src and {}.tgt\n", f->n, to_string(task), f->out, f->out);
            return 0;
          }};
}

}  // namespace atto::cli
