// The subcommand table of the atto CLI. Each cmd_<name>.cpp adds one subcommand: it parses
// flags into an options struct and makes one library call. No logic a library user would need
// lives here.
#pragma once

#include <CLI/CLI.hpp>

#include "base/limits.h"
#include "generate/seq2seq_decode.h"
#include "io/gguf_recipe.h"
#include "tokenize/gpt_tokenizer.h"

#include <functional>
#include <string>
#include <vector>

namespace atto::cli {

struct Command {
  CLI::App* app;
  std::function<int()> run;  // called when the subcommand was given; returns the exit code
};

// Each registers its subcommand on `root` and returns it.
Command add_train(CLI::App& root);
Command add_sample(CLI::App& root);
Command add_score(CLI::App& root);
Command add_eval(CLI::App& root);
Command add_data(CLI::App& root);
Command add_translate(CLI::App& root);
Command add_inspect(CLI::App& root);
Command add_bench(CLI::App& root);
Command add_export(CLI::App& root);
Command add_import(CLI::App& root);
Command add_quantize(CLI::App& root);
Command add_serve(CLI::App& root);
Command add_tokenize(CLI::App& root);
Command add_tokenizer(CLI::App& root);

// The GPT tokenizer named by --tokenizer FILE (a tokenizer.json) or --model RUN (its
// tokenizer.json): exactly one of them (UsageError otherwise). For tokenize and data prepare.
std::shared_ptr<const GptTokenizer> load_gpt_tokenizer_flag(const std::string& tokenizer, const std::string& model);

// --type of atto export --format gguf and atto quantize: the GGUF types atto writes (UsageError
// naming the flag and kGgufTypes otherwise).
inline constexpr const char* kGgufTypes = "f32, f16, bf16, q8_0, q6_k, q5_k, q5_1, q5_0, q4_k, q4_1, q4_0, q3_k, q3_k_m, q4_k_m or q5_k_m";
io::QuantRecipe parse_gguf_type(const std::string& s);

// Beam search flags shared by translate and eval.
void add_decode_flags(CLI::App* app, gen::DecodeOptions& d);

// --threads N, checked as every entry point checks it (base/limits.h: 0 = all cores, at most
// kMaxThreads): a bad value is a usage error naming the flag.
inline CLI::Option* add_threads_flag(CLI::App* app, int& threads) {
  return app
      ->add_option("--threads", threads, fmt::format("Threads; 0 = all cores (at most {})", kMaxThreads))
      ->check(CLI::Validator(
          [](std::string& s) {
            try {
              check_threads(std::stoll(s), "the thread count");  // CLI11 puts "--threads: " in front
            } catch (const Error& e) {
              return std::string(e.what());
            } catch (const std::exception&) {
              return std::string("the thread count must be a whole number");
            }
            return std::string();
          },
          "", "threads"))
      ->capture_default_str();
}

// True when the flag was given on the command line (not just defaulted).
inline bool given(const CLI::App* app, const std::string& name) { return app->count(name) > 0; }

}  // namespace atto::cli
