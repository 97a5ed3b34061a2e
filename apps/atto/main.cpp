// atto: train, sample, score and evaluate small transformers.
#include <cstdio>
#include <new>

#include "atto/atto.hpp"
#include "base/error.h"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App root{"atto: a small-transformer engine (train a GPT on a text file, sample from it, score text)"};
  root.require_subcommand(1);
  root.set_version_flag("--version", "atto 0.1.0");
  root.footer(
      "Examples:\n"
      "  atto train --data names.txt --out runs/names\n"
      "  atto sample --model runs/names -n 20\n"
      "  atto score --model runs/names emma xqzzt\n"
      "  atto eval --model runs/names --data other.txt\n"
      "  atto data synth reverse --n 20000 --out data/rev\n"
      "  atto train --task seq2seq --src data/rev.src --tgt data/rev.tgt --out runs/rev\n"
      "  atto translate --model runs/rev --beam 5 < test.src\n"
      "Run `atto <command> --help` for the flags of a command.");
  std::vector<atto::cli::Command> commands = {
      atto::cli::add_train(root), atto::cli::add_sample(root),   atto::cli::add_score(root),
      atto::cli::add_eval(root),  atto::cli::add_inspect(root),  atto::cli::add_translate(root),
      atto::cli::add_data(root),  atto::cli::add_bench(root),    atto::cli::add_export(root),
      atto::cli::add_serve(root), atto::cli::add_tokenize(root), atto::cli::add_tokenizer(root),
  };
  try {
    root.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = root.exit(e);  // prints help, or "error: ..." for bad flags
    return code == 0 ? 0 : 2;
  }
  try {
    for (auto& c : commands)
      if (c.app->parsed()) return c.run();
  } catch (const atto::Exception& e) {  // from the public API (include/atto/atto.hpp)
    std::fprintf(stderr, "atto: error: %s\n", e.what());
    return e.status() == ATTO_ERR_INVALID_ARGUMENT ? 2 : 1;
  } catch (const atto::UsageError& e) {
    std::fprintf(stderr, "atto: error: %s\n", e.what());
    return 2;
  } catch (const atto::Error& e) {
    std::fprintf(stderr, "atto: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "atto: error: out of memory: use a smaller model, batch or block size (or more memory)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "atto: error: %s\n", e.what());
    return 1;
  }
  return 2;
}
