// atto quantize: a trained GPT (a run directory) or a GGUF file written again as a GGUF file whose
// weight matrices are one of the types atto writes (f32, f16, bf16, q8_0, the K-quants q6_k, q5_k,
// q4_k and q3_k, q5_1, q5_0, q4_1, q4_0) or llama.cpp's q3_k_m, q4_k_m or q5_k_m mix, as llama.cpp's
// llama-quantize does for those types (docs/gguf.md).
#include <cstdint>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "commands.h"
#include "io/gguf.h"
#include "run/gguf_model.h"

namespace atto::cli {

namespace {

namespace fs = std::filesystem;

struct QuantizeFlags {
  std::string in, out, type;
  bool allow_requantize = false;
};

// IN exists and is a run directory or a GGUF file; OUT is a file that is not IN.
void check_quantize_paths(const QuantizeFlags& f) {
  std::error_code ec;
  if (!fs::exists(f.in, ec))
    throw UsageError(fmt::format("IN {} does not exist: give a run directory or a GGUF file", f.in));
  if (!fs::is_directory(f.in) && !io::is_gguf_file(f.in))
    throw UsageError(fmt::format("IN {} is neither a run directory nor a GGUF file", f.in));
  if (f.out.empty()) throw UsageError("OUT is empty: give the GGUF file to write");
  if (fs::is_directory(f.out, ec)) throw UsageError(fmt::format("OUT {} is a directory: give a file name", f.out));
  if (fs::exists(f.out, ec) && fs::equivalent(f.in, f.out, ec))
    throw UsageError(fmt::format("OUT {} is IN: write the quantized model to another file", f.out));
}

// The bytes of what IN holds: a GGUF file's size, a run directory's weights.
uintmax_t quantize_input_size(const std::string& in) {
  std::error_code ec;
  if (!fs::is_directory(in)) return fs::file_size(in);
  const uintmax_t n = fs::file_size(fs::path(in) / "model.safetensors", ec);
  return ec ? 0 : n;
}

int run_quantize(const QuantizeFlags& f) {
  const io::QuantRecipe type = parse_gguf_type(f.type);
  check_quantize_paths(f);
  int requantized = 0, copied = 0;
  if (fs::is_directory(f.in)) {  // atto export --format gguf --type T --out OUT
    LoadedModel lm = load_run(f.in);
    if (!lm.lora_adapter.empty())
      throw UsageError(
          fmt::format("IN {} is a LoRA run: write it with its adapters merged first (atto export "
                      "--merge-lora --model {} --out FILE.gguf) and quantize that file",
                      f.in, f.in));
    export_gguf(lm, f.out, type);
  } else {
    io::GgufRequantized r = io::requantize_gguf(io::read_gguf(f.in), type, f.allow_requantize);
    r.writer.write(f.out);
    requantized = r.requantized;
    copied = r.copied;
  }
  std::map<std::string, int> by_type;  // what OUT holds
  const io::GgufFile out = io::read_gguf(f.out);
  for (const io::GgufTensorInfo& t : out.tensors) ++by_type[io::to_string(t.type)];
  std::vector<std::string> counts;
  for (const auto& [name, n] : by_type) counts.push_back(fmt::format("{} {}", n, name));
  const std::string how =
      fs::is_directory(f.in) ? "exported" : fmt::format("{} re-encoded, {} copied as they were", requantized, copied);
  fmt::print("wrote {} ({}): {} tensors ({}; {}), {:.3f} MB from {:.3f} MB\n", f.out, f.type, out.tensors.size(),
             fmt::join(counts, ", "), how, static_cast<double>(fs::file_size(f.out)) / 1e6,
             static_cast<double>(quantize_input_size(f.in)) / 1e6);
  return 0;
}

}  // namespace

Command add_quantize(CLI::App& root) {
  CLI::App* app = root.add_subcommand(
      "quantize",
      "Write a trained GPT (a run directory) or a GGUF file as a GGUF file of another type, as llama.cpp's "
      "llama-quantize: the weight matrices as --type, norms, biases and other 1-D tensors as they are");
  auto f = std::make_shared<QuantizeFlags>();
  app->add_option("IN", f->in, "A run directory (as atto export --format gguf) or a GGUF file")->required();
  app->add_option("OUT", f->out, "The GGUF file to write (atomically; not IN)")->required();
  app->add_option(
         "--type", f->type,
         fmt::format(
             "{}: the type of the weight matrices (one whose rows are not a multiple of the "
             "type's block, 32 values or the k-quants' 256, is stored f16; the k-quants fall back to q8_0); "
             "q3_k_m, q4_k_m, q5_k_m: llama.cpp's Q3_K_M, Q4_K_M and Q5_K_M mixes, q3_k, q4_k or q5_k with q6_k "
             "for the output and more bits for some attention and MLP-down matrices",
             kGgufTypes))
      ->required();
  app->add_flag("--allow-requantize", f->allow_requantize,
                "A GGUF IN: re-encode a matrix to a type of more precision than it is stored in (q4_0 to q8_0, "
                "q8_0 to f16), which does not make it better; refused without this flag");
  app->footer(
      "Examples:\n"
      "  atto quantize runs/names names-q4.gguf --type q4_0\n"
      "  atto quantize names-f32.gguf names-q8.gguf --type q8_0\n"
      "  atto quantize runs/shakespeare shakespeare-q4km.gguf --type q4_k_m\n"
      "A GGUF IN keeps every metadata key (general.file_type becomes the new type's) and every tensor; a matrix "
      "of another type is re-encoded from its values (k-quants too), the rest is copied byte for byte. atto reads "
      "every type it writes and q2_k, iq4_nl, iq4_xs; it computes f32, f16, bf16 and q2_k in floats, the others "
      "as integers (docs/quantization.md).");
  return {app, [f] { return run_quantize(*f); }};
}

}  // namespace atto::cli
