// atto data synth: synthetic sequence-to-sequence tasks for tests and demos; atto data prepare:
// a corpus larger than memory streamed through a tokenizer into token files.
#include <fmt/format.h>

#include "base/error.h"
#include "commands.h"
#include "data/prepare.h"
#include "data/synth.h"
#include "io/file.h"
#include "run/run_dir.h"

#include <filesystem>
#include <nlohmann/json.hpp>

namespace atto::cli {

namespace {
struct PrepareFlags {
  std::string tokenizer, model;
  PrepareOptions opt;
};

int run_prepare(const PrepareFlags& f) {
  const std::shared_ptr<const GptTokenizer> tok = load_gpt_tokenizer_flag(f.tokenizer, f.model);
  const PrepareStats s = prepare_corpus(*tok, f.opt);
  fmt::print(
      "atto data prepare: {:.1f} MB, {} documents ({} val) -> {} train + {} val tokens ({} tokenizer, vocabulary {}) "
      "in {:.1f} s ({:.1f} MB/s) -> {}\n",
      static_cast<double>(s.bytes) / 1e6, s.documents, s.val_documents, s.train_tokens, s.val_tokens, tok->kind(),
      tok->vocab_size(), s.seconds, static_cast<double>(s.bytes) / 1e6 / std::max(s.seconds, 1e-9), f.opt.out);
  return 0;
}

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
  auto pf = std::make_shared<PrepareFlags>();
  CLI::App* prep = app->add_subcommand(
      "prepare", "Tokenize text files into token files that training maps (corpora larger than memory)");
  prep->add_option("--tokenizer", pf->tokenizer, "A tokenizer.json (atto tokenizer train|import-gpt2)");
  prep->add_option("--model", pf->model, "A run directory or a GGUF file: its tokenizer");
  prep->add_option("--input", pf->opt.inputs, "Text files")->required();
  prep->add_option("--out", pf->opt.out, "Folder for train.bin, val.bin, tokenizer.json, meta.json")->required();
  prep->add_option("--val-fraction", pf->opt.val_fraction, "Share of documents held out for validation")
      ->capture_default_str();
  prep->add_option("--seed", pf->opt.seed, "Seed of the document split")->capture_default_str();
  prep->add_flag("--lines", pf->opt.lines_are_documents, "Each line is a document (default: paragraphs)");
  prep->add_option("--chunk-bytes", pf->opt.chunk_bytes, "Bytes read and encoded at a time per thread")
      ->capture_default_str();
  return {app, [app, prep, pf, f] {
            if (app->got_subcommand(prep)) return run_prepare(*pf);
            ATTO_CHECK(f->n >= 1, "--n must be at least 1, got {}", f->n);
            const SynthTask task = parse_synth_task(f->task);
            write_synth(task, f->n, f->opt, f->out);
            fmt::print("wrote {} {} pairs to {}.src and {}.tgt\n", f->n, to_string(task), f->out, f->out);
            return 0;
          }};
}

}  // namespace atto::cli
