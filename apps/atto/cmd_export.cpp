// atto export: a trained GPT as a GGUF file for llama.cpp (docs/gguf.md).
#include <filesystem>

#include <fmt/format.h>

#include "base/error.h"
#include "commands.h"
#include "run/gguf_model.h"

namespace atto::cli {

namespace {

struct ExportFlags {
  std::string model, out, format = "gguf", type = "f32";
};

io::GgmlType parse_type(const std::string& s) {
  if (s == "f32") return io::GgmlType::F32;
  if (s == "f16") return io::GgmlType::F16;
  if (s == "q8_0") return io::GgmlType::Q8_0;
  throw UsageError(fmt::format("--type must be f32, f16 or q8_0, got '{}'", s));
}

int run_export(const ExportFlags& f) {
  if (f.format != "gguf") throw UsageError(fmt::format("--format must be gguf, got '{}'", f.format));
  const io::GgmlType type = parse_type(f.type);
  if (f.out.empty()) throw UsageError("no output file: pass --out FILE.gguf");
  LoadedModel lm = load_run(f.model);
  const std::string arch = export_gguf(lm, f.out, type);
  fmt::print("wrote {} ({}, {} parameters, {:.1f} MB): llama.cpp's {} architecture\n", f.out, f.type,
             lm.model->num_parameters(), static_cast<double>(std::filesystem::file_size(f.out)) / 1e6, arch);
  return 0;
}

}  // namespace

Command add_export(CLI::App& root) {
  CLI::App* app = root.add_subcommand("export", "Write a trained GPT as a GGUF file that llama.cpp runs");
  auto f = std::make_shared<ExportFlags>();
  app->add_option("--model", f->model, "Run directory of a trained GPT")->required();
  app->add_option("--out", f->out, "The GGUF file to write");
  app->add_option("--format", f->format, "gguf")->capture_default_str();
  app->add_option("--type", f->type, "f32, f16 or q8_0 (for the weight matrices; norms and biases stay f32)")
      ->capture_default_str();
  return {app, [f] { return run_export(*f); }};
}

}  // namespace atto::cli
