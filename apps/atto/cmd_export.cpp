// atto export: a trained GPT as a GGUF file for llama.cpp (docs/gguf.md), or as a Hugging Face
// GPT-2 checkpoint directory (--format hf: docs/import.md).
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "commands.h"
#include "run/gguf_lora.h"
#include "run/gguf_model.h"
#include "run/hf_export.h"

namespace atto::cli {

namespace {

struct ExportFlags {
  std::string model, out, format = "gguf", type = "f32";
  bool force = false;  // --format hf: overwrite a non-empty --out directory
  bool merge_lora = false;
  bool lora_only = false;  // a LoRA run's adapters alone, as llama.cpp's adapter GGUF
};

// load_run merges a LoRA run's adapters into its base; writing that out is asked for by name.
LoadedModel load_for_export(const ExportFlags& f) {
  LoadedModel lm = load_run(f.model);
  if (!lm.lora_adapter.empty() && !f.merge_lora)
    throw UsageError(fmt::format(
        "--model {} is a LoRA run (adapters in {} over the frozen base in model.safetensors): pass --merge-lora to "
        "write the model with the adapters merged into its weights, or --lora-only to write the adapters alone "
        "(llama.cpp's LoRA adapter GGUF)",
        f.model, lm.lora_adapter));
  if (lm.lora_adapter.empty() && f.merge_lora)
    throw UsageError(fmt::format("--merge-lora: --model {} has no LoRA adapter (it was not trained with --lora-rank)",
                                 f.model));
  return lm;
}

int run_export_hf(const ExportFlags& f) {
  if (f.type != "f32")
    throw UsageError(
        fmt::format("--type {} applies to --format gguf only: --format hf writes float32 weights", f.type));
  if (f.out.empty()) throw UsageError("no output directory: pass --out DIR");
  LoadedModel lm = load_for_export(f);
  const HfExportSummary s = export_hf(lm, f.out, f.force, f.model);
  if (!s.tokenizer_note.empty()) fmt::print("{}\n", s.tokenizer_note);
  fmt::print("wrote {} ({}; {} parameters, {} head): Hugging Face's GPT-2 (GPT2LMHeadModel)\n", f.out,
             fmt::join(s.files, ", "), s.parameters, s.tied ? "tied" : "untied");
  return 0;
}

// --lora-only: a LoRA run's adapters as llama.cpp's adapter GGUF (run/gguf_lora.h), for the GGUF
// that `atto export` writes of the run's base.
int run_export_lora(const ExportFlags& f) {
  if (f.merge_lora) throw UsageError("--lora-only and --merge-lora conflict: pass one (the adapters alone, or merged)");
  if (f.format != "gguf")
    throw UsageError(fmt::format("--lora-only writes llama.cpp's adapter GGUF: --format must be gguf, got '{}'",
                                 f.format));
  if (f.type != "f32")
    throw UsageError(fmt::format("--lora-only writes f32 adapters: --type must be f32, got '{}'", f.type));
  if (f.out.empty()) throw UsageError("no output file: pass --out ADAPTER.gguf");
  LoadedModel lm = load_run(f.model);
  if (lm.lora_adapter.empty())
    throw UsageError(fmt::format("--lora-only: --model {} is not a LoRA run (it was not trained with --lora-rank): "
                                 "export it without --lora-only",
                                 f.model));
  const GPTConfig lora_cfg = load_run_config(f.model).gpt;
  const std::string arch = export_gguf_lora(lm, lora_cfg, f.out);
  fmt::print("wrote {} (LoRA adapter, rank {}, alpha {:g}, targets {}; {:.1f} kB): llama.cpp's {} architecture; "
             "load it over the base's GGUF: llama-cli -m base.gguf --lora {}\n",
             f.out, lora_cfg.lora_rank,
             lora_cfg.lora_alpha > 0.0f ? lora_cfg.lora_alpha : static_cast<float>(lora_cfg.lora_rank),
             lora_cfg.lora_targets, static_cast<double>(std::filesystem::file_size(f.out)) / 1e3, arch, f.out);
  return 0;
}

int run_export(const ExportFlags& f) {
  if (f.lora_only) return run_export_lora(f);
  if (f.format == "hf") return run_export_hf(f);
  if (f.format != "gguf") throw UsageError(fmt::format("--format must be gguf or hf, got '{}'", f.format));
  const io::QuantRecipe type = parse_gguf_type(f.type);
  if (f.out.empty()) throw UsageError("no output file: pass --out FILE.gguf");
  LoadedModel lm = load_for_export(f);
  const std::string arch = export_gguf(lm, f.out, type);
  fmt::print("wrote {} ({}, {} parameters, {:.1f} MB): llama.cpp's {} architecture\n", f.out, f.type,
             lm.model->num_parameters(), static_cast<double>(std::filesystem::file_size(f.out)) / 1e6, arch);
  return 0;
}

}  // namespace

io::QuantRecipe parse_gguf_type(const std::string& s) {
  io::QuantRecipe r;
  if (!io::parse_recipe(s, r)) throw UsageError(fmt::format("--type must be {}, got '{}'", kGgufTypes, s));
  return r;
}

Command add_export(CLI::App& root) {
  CLI::App* app = root.add_subcommand(
      "export",
      "Write a trained GPT as a GGUF file that llama.cpp runs, or (--format hf) as a Hugging Face GPT-2 "
      "directory that transformers loads");
  auto f = std::make_shared<ExportFlags>();
  app->add_option("--model", f->model, "Run directory of a trained GPT")->required();
  app->add_option("--out", f->out, "The GGUF file to write (--format hf: the directory)");
  app->add_option("--format", f->format,
                  "gguf (llama.cpp) or hf (Hugging Face GPT-2: model.safetensors, config.json, vocab.json, "
                  "merges.txt; GPT-2's architecture only)")
      ->capture_default_str();
  app->add_option("--type", f->type,
                  fmt::format("gguf: {} (for the weight matrices; norms and biases stay f32); hf: f32 only",
                              kGgufTypes))
      ->capture_default_str();
  app->add_flag("--force", f->force, "--format hf: write into an --out directory that is not empty");
  app->add_flag("--merge-lora", f->merge_lora,
                "A LoRA run (--lora-rank): write its base with the adapters merged in (W + alpha/rank * B A)");
  app->add_flag("--lora-only", f->lora_only,
                "A LoRA run (--lora-rank): write its adapters alone as llama.cpp's LoRA adapter GGUF (f32), for the "
                "GGUF of its base (llama-cli -m base.gguf --lora adapter.gguf)");
  return {app, [f] { return run_export(*f); }};
}

}  // namespace atto::cli
