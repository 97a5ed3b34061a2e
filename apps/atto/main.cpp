// atto: train, sample, score and evaluate small transformers.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "atto/atto.hpp"
#include "base/error.h"
#include "base/output.h"
#include "commands.h"

extern "C" char* openblas_get_corename(void);  // OpenBLAS's own (cblas.h of OpenBLAS declares it)

namespace {

// OpenBLAS, which runs atto's large fp32 products, picks its kernels for the CPU as it loads. A
// version older than the CPU does not know it and falls back to its Prescott (SSE3) kernels:
// Debian 12's OpenBLAS 0.3.21 on an Emerald Rapids Xeon (family 6, model 207) does, and atto's
// fp32 training then ran 5x slower (model (d): ~720 against ~3,900 tokens/s; sgemm 1024^3 33
// against 390 GFLOP/s). On such a CPU with AVX-512 (or AVX2) atto starts itself again with
// OPENBLAS_CORETYPE naming the kernels that fit (SkylakeX, Haswell), as a user would set it.
// An AVX2 build (x86-64-v3: AVX2, no AVX-512) takes OpenBLAS's AVX2 kernels (Haswell) on any CPU
// unless OpenBLAS chose AVX2 kernels itself (Haswell, Zen): on an AVX-512 CPU it would otherwise
// run OpenBLAS's AVX-512 kernels beside its own AVX2 ones, and measure as no AVX2 machine runs it.
// A value the user set is left alone; if the restart fails, atto goes on as it was. Off x86-64
// (ARM64) OpenBLAS's own choice stands.
void fit_openblas_kernels(char** argv) {
#if defined(__x86_64__)
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  const char* core = openblas_get_corename();
  if (core == nullptr) return;
  const std::string chosen(core);
  __builtin_cpu_init();
  const char* fit = nullptr;
#if defined(__AVX2__) && !defined(__AVX512F__)
  if (chosen == "Haswell" || chosen == "Zen") return;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) fit = "Haswell";
#else
  if (chosen != "Prescott") return;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd"))
    fit = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    fit = "Haswell";
#endif
  if (fit == nullptr) return;
  ::setenv("OPENBLAS_CORETYPE", fit, 1);
  ::execv("/proc/self/exe", argv);
#endif
}

// "atto: error: MESSAGE" on stderr, the message made safe for a terminal (base/output.h).
void print_error(std::string_view msg) {
  std::fprintf(stderr, "atto: error: %s\n", atto::terminal_safe(msg).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  fit_openblas_kernels(argv);
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
    if (e.get_exit_code() == 0) return root.exit(e);  // --help, --version
    print_error(e.what());                             // a bad flag: "atto: error: --steps: ..."
    std::fprintf(stderr, "Run with --help for the flags.\n");
    return 2;
  }
  int code = 2;
  try {
    for (auto& c : commands)
      if (c.app->parsed()) code = c.run();
    // Every byte a command printed must have reached its destination: a full disk or a closed
    // pipe is an error with a non-zero exit, not a silent loss.
    atto::check_stdout();
  } catch (const atto::Exception& e) {  // from the public API (include/atto/atto.hpp)
    print_error(e.what());
    return e.status() == ATTO_ERR_INVALID_ARGUMENT ? 2 : 1;
  } catch (const atto::UsageError& e) {
    print_error(e.what());
    return 2;
  } catch (const atto::Error& e) {
    print_error(e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    print_error("out of memory: use a smaller model, batch or block size (or more memory)");
    return 1;
  } catch (const std::exception& e) {
    print_error(e.what());
    return 1;
  }
  return code;
}
