// atto import: a GPT-2 checkpoint in the Hugging Face layout, or a GGUF file, as an atto run
// directory (docs/import.md).
#include <fmt/format.h>

#include "base/error.h"
#include "commands.h"
#include "run/hf_model.h"

namespace atto::cli {

namespace {

struct ImportFlags {
  std::string from, out;
  bool force = false;
};

int run_import(const ImportFlags& f) {
  if (f.out.empty()) throw UsageError("no output directory: pass --out DIR");
  const ImportSummary s = import_run(f.from, f.out, f.force);
  fmt::print("imported {} ({}, {} parameters, lm_head {}) into {}: try `atto sample --model {}`\n", f.from, s.source,
             s.parameters, s.tied ? "tied to wte" : "untied", f.out, f.out);
  return 0;
}

}  // namespace

Command add_import(CLI::App& root) {
  CLI::App* app =
      root.add_subcommand("import", "Make a run directory from a Hugging Face GPT-2 checkpoint or a GGUF file");
  auto f = std::make_shared<ImportFlags>();
  app->add_option("--from", f->from,
                  "A Hugging Face GPT-2 directory (model.safetensors, config.json, vocab.json, merges.txt) or a "
                  "GGUF file")
      ->required();
  app->add_option("--out", f->out, "The run directory to write")->required();
  app->add_flag("--force", f->force, "Allow --out to be a directory that already holds a run (it is overwritten)");
  return {app, [f] { return run_import(*f); }};
}

}  // namespace atto::cli
