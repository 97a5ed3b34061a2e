// atto: train, sample, score and evaluate small transformers.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include <fmt/format.h>

#include "atto/atto.hpp"
#include "base/error.h"
#include "base/output.h"
#include "commands.h"
#include "kernels/isa.h"

extern "C" char* openblas_get_corename(void);  // OpenBLAS's own (cblas.h of OpenBLAS declares it)

namespace {

// OpenBLAS, which runs atto's large fp32 products, picks its kernels for the CPU as it loads. A
// version older than the CPU does not know it and falls back to its Prescott (SSE3) kernels:
// Debian 12's OpenBLAS 0.3.21 on an Emerald Rapids Xeon (family 6, model 207) does, and atto's
// fp32 training then ran 5x slower (model (d): ~720 against ~3,900 tokens/s; sgemm 1024^3 33
// against 390 GFLOP/s). On such a CPU atto starts itself again with OPENBLAS_CORETYPE naming the
// kernels that fit the level its own kernels run at (SkylakeX for AVX-512, Haswell for AVX2), as
// a user would set it. At the avx2 level (an AVX2 build, or ATTO_CPU=avx2) OpenBLAS takes its AVX2
// kernels (Haswell) on any CPU unless it chose AVX2 kernels itself (Haswell, Zen): on an AVX-512
// CPU it would otherwise run OpenBLAS's AVX-512 kernels beside atto's AVX2 ones, and measure as
// no AVX2 machine runs. A value the user set is left alone; if the restart fails, atto goes on.
#if defined(__x86_64__)
void fit_core(char** argv, const char* core) {
  ::setenv("OPENBLAS_CORETYPE", core, 1);
  ::execv("/proc/self/exe", argv);
}
#endif

void fit_openblas_kernels(char** argv) {
#if defined(__x86_64__)
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  const char* core = openblas_get_corename();
  if (core == nullptr) return;
  const std::string chosen(core);
  namespace k = atto::kernels;
  k::CpuLevel level = k::cpu_level();
  if (level == k::CpuLevel::Native) {  // a native build: its -march
#if defined(__AVX512F__)
    level = k::CpuLevel::Avx512;
#elif defined(__AVX2__)
    level = k::CpuLevel::Avx2;
#else
    if (chosen == "Prescott" && k::cpu_features().avx2) fit_core(argv, "Haswell");  // OpenBLAS's own choice
    return;
#endif
  }
  const char* fit = nullptr;
  if (level == k::CpuLevel::Avx2) {
    if (chosen == "Haswell" || chosen == "Zen") return;
    fit = "Haswell";
  } else {
    if (chosen != "Prescott") return;
    fit = "SkylakeX";
  }
  fit_core(argv, fit);
#else
  (void)argv;
#endif
}

// "atto: error: MESSAGE" on stderr, the message made safe for a terminal (base/output.h).
void print_error(std::string_view msg) {
  std::fprintf(stderr, "atto: error: %s\n", atto::terminal_safe(msg).c_str());
}

// The kernels' level (a bad $ATTO_CPU stops here, before anything runs), then OpenBLAS's.
bool choose_kernels(char** argv) {
  try {
    atto::kernels::cpu_level();
    fit_openblas_kernels(argv);
  } catch (const std::exception& e) {
    print_error(e.what());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (!choose_kernels(argv)) return 2;
  CLI::App root{"atto: a small-transformer engine (train a GPT on a text file, sample from it, score text)"};
  root.require_subcommand(1);
  root.set_version_flag("--version", [] {  // the project's version, and which kernels run
    return fmt::format("atto {}\n{}", atto::version(), atto::kernels::kernels_description());
  });
  root.footer(
      "Examples:\n"
      "  atto train --data names.txt --out runs/names\n"
      "  atto sample --model runs/names -n 20\n"
      "  atto score --model runs/names emma xqzzt\n"
      "  atto eval --model runs/names --data other.txt\n"
      "  atto data synth reverse --n 20000 --out data/rev\n"
      "  atto train --task seq2seq --src data/rev.src --tgt data/rev.tgt --out runs/rev\n"
      "  atto translate --model runs/rev --beam 5 < test.src\n"
      "  atto quantize runs/names names-q4.gguf --type q4_0\n"
      "Run `atto <command> --help` for the flags of a command.");
  std::vector<atto::cli::Command> commands = {
      atto::cli::add_train(root), atto::cli::add_sample(root),   atto::cli::add_score(root),
      atto::cli::add_eval(root),  atto::cli::add_inspect(root),  atto::cli::add_translate(root),
      atto::cli::add_data(root),  atto::cli::add_bench(root),    atto::cli::add_export(root),
      atto::cli::add_serve(root), atto::cli::add_tokenize(root), atto::cli::add_tokenizer(root),
      atto::cli::add_import(root), atto::cli::add_quantize(root),
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
