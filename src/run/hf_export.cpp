#include "run/hf_export.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/file.h"
#include "io/safetensors.h"
#include "tokenize/bpe.h"

namespace atto {

namespace {

namespace fs = std::filesystem;

constexpr double kExportNormEps = 1e-5;  // nn::BlockConfig::norm_eps: atto's LayerNorm, GPT-2's
// Every file export_hf may write; with --force, the ones this export does not write are removed
// (an earlier export of another tokenizer kind must not leave its files beside these).
const char* const kExportFiles[] = {"model.safetensors",     "config.json",         "vocab.json", "merges.txt",
                                    "tokenizer_config.json", "atto_tokenizer.json", "spm.model"};

// ---- the architecture -------------------------------------------------------------------------

bool is_llama_layout(const GPTConfig& c) {
  return c.pre_norm && c.norm == nn::NormKind::RMSNorm && c.activation == nn::Activation::SwiGLU &&
         c.pos == PosKind::Rope && !c.bias;
}

}  // namespace

void check_hf_gpt2_architecture(const GPTConfig& c) {
  std::vector<std::string> bad;  // "model.<key>" "<value>" (GPT-2: <value>)
  auto add = [&](const char* key, const std::string& have, const char* want) {
    bad.push_back(fmt::format("\"model.{}\" is \"{}\" (GPT-2: {})", key, have, want));
  };
  if (c.pos != PosKind::Learned) add("pos", to_string(c.pos), "learned");
  if (c.norm != nn::NormKind::LayerNorm) add("norm", to_string(c.norm), "layernorm");
  if (!c.pre_norm) add("norm_placement", "post", "pre");
  if (c.activation != nn::Activation::GELU && c.activation != nn::Activation::GELUTanh)
    add("ffn", to_string(c.activation), "gelu_tanh or gelu");
  if (!c.bias) bad.push_back("\"model.bias\" is false (GPT-2: true)");
  if (c.kv_heads() != c.n_heads)
    bad.push_back(fmt::format("\"model.n_kv_heads\" is {} (GPT-2: every head has its keys and values)", c.n_kv_heads));
  if (bad.empty()) return;
  throw UsageError(fmt::format(
      "--format hf writes Hugging Face's GPT-2 architecture (learned positions, pre-norm LayerNorm, a GELU "
      "feed-forward, biases), but in the run's config.json {}: {}",
      fmt::join(bad, ", "),
      is_llama_layout(c) ? "this is llama.cpp's llama layout: export it with --format gguf instead"
                         : "Hugging Face's GPT-2 cannot express this model (--format gguf takes the GPT-2 and llama "
                           "layouts only, so neither fits)"));
}

namespace {

// ---- the weights ------------------------------------------------------------------------------

// The names GPT2LMHeadModel saves, which are atto's own; `conv1d` for the four linear weights.
struct HfName {
  std::string name;
  bool conv1d = false;
};

std::vector<HfName> hf_names(const GPTConfig& c) {
  std::vector<HfName> n = {{"transformer.wte.weight"}, {"transformer.wpe.weight"}};
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string h = fmt::format("transformer.h.{}.", i);
    for (const char* m : {"ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj"}) {
      const bool linear = std::string(m).find(".c_") != std::string::npos;
      n.push_back({h + m + ".weight", linear});
      n.push_back({h + m + ".bias"});
    }
  }
  n.push_back({"transformer.ln_f.weight"});
  n.push_back({"transformer.ln_f.bias"});
  if (!c.tie_weights) n.push_back({"lm_head.weight"});
  return n;
}

// atto's [out, in] as Hugging Face's Conv1D [in, out].
Tensor transposed(const Tensor& w) {
  const Tensor src = w.contiguous();
  const int64_t rows = src.size(0), cols = src.size(1);
  Tensor t = Tensor::empty({cols, rows});
  const float* in = src.data();
  float* out = t.data();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = in[r * cols + c];
  return t;
}

// The tensors to write, in GPT2LMHeadModel's order. Every tensor of the model must be one of them
// (a tensor GPT-2 has no place for, such as an adapter's, is an error naming it).
std::vector<std::pair<std::string, Tensor>> hf_tensors(const GPT& model) {
  std::map<std::string, Tensor> state;
  for (const auto& [name, t] : model.state_dict()) state.emplace(name, t);
  const std::vector<HfName> names = hf_names(model.config());
  std::set<std::string> wanted = {"lm_head.weight"};  // in state_dict() when tied too (wte's tensor)
  std::vector<std::pair<std::string, Tensor>> out;
  for (const HfName& n : names) {
    const auto it = state.find(n.name);
    ATTO_CHECK(it != state.end(), "--format hf: the model has no tensor '{}'", n.name);
    ATTO_CHECK(!n.conv1d || it->second.ndim() == 2, "--format hf: tensor '{}' has shape {}, not a 2-D weight", n.name,
               shape_str(it->second.shape()));
    out.emplace_back(n.name, n.conv1d ? transposed(it->second) : it->second);
    wanted.insert(n.name);
  }
  for (const auto& [name, t] : state)
    ATTO_CHECK(wanted.count(name), "--format hf: the model's tensor '{}' has no place in Hugging Face's GPT-2", name);
  return out;
}

// ---- config.json --------------------------------------------------------------------------------

// The feed-forward width: the length of h.0.mlp.c_fc.bias (GPTConfig's d_ff may be 0: 4 x d_model).
int64_t hf_ffn_width(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  for (const auto& [name, t] : tensors)
    if (name == "transformer.h.0.mlp.c_fc.bias") return t.numel();
  fail("--format hf: the model has no tensor 'transformer.h.0.mlp.c_fc.bias'");
}

// A float setting as the decimal it was given as (0.1f -> 0.1, not 0.10000000149011612).
double decimal(float x) { return std::stod(fmt::format("{}", x)); }

nlohmann::ordered_json config_json(const GPTConfig& c, int64_t d_ff, const GptTokenizer& tok) {
  using J = nlohmann::ordered_json;
  const J boundary = tok.has_boundary() ? J(tok.boundary_id()) : J(nullptr);
  return {{"architectures", J::array({"GPT2LMHeadModel"})},
          {"model_type", "gpt2"},
          {"vocab_size", c.vocab_size},
          {"n_positions", c.block_size},
          {"n_ctx", c.block_size},
          {"n_embd", c.d_model},
          {"n_layer", c.n_layers},
          {"n_head", c.n_heads},
          {"n_inner", d_ff == 4 * c.d_model ? J(nullptr) : J(d_ff)},
          {"activation_function", c.activation == nn::Activation::GELUTanh ? "gelu_new" : "gelu"},
          {"layer_norm_epsilon", kExportNormEps},
          {"resid_pdrop", decimal(c.dropout)},  // atto drops after each residual projection
          {"embd_pdrop", decimal(c.dropout)},   // and after the embeddings,
          {"attn_pdrop", 0.0},                  // never the attention weights
          {"initializer_range", 0.02},
          {"scale_attn_weights", true},
          {"scale_attn_by_inverse_layer_idx", false},
          {"reorder_and_upcast_attn", false},
          {"tie_word_embeddings", c.tie_weights},
          {"use_cache", true},
          {"bos_token_id", boundary},
          {"eos_token_id", boundary},
          {"torch_dtype", "float32"}};
}

// ---- the tokenizer ------------------------------------------------------------------------------

// The files to write for the tokenizer: name -> contents; `note` when not GPT-2's own.
struct TokenizerFiles {
  std::vector<std::pair<std::string, std::string>> files;
  std::string note;
};

// Why a byte-level BPE tokenizer has no exact vocab.json + merges.txt, or "" when it has.
std::string bpe_unexpressible(const nlohmann::json& j) {
  for (const auto& [content, id] : j["special_tokens"].items())
    if (content != BpeTokenizer::kEndOfText)
      return fmt::format("its special token {} is not GPT-2's <|endoftext|>", nlohmann::json(content).dump());
  if (j["merges"].empty()) return "it has no merges (a merges.txt without merges is not read back)";
  std::set<std::string> seen;
  for (const auto& t : j["vocab"])
    if (!seen.insert(t.get<std::string>()).second) return fmt::format("two of its tokens are written {}", t.dump());
  return "";
}

TokenizerFiles gpt2_tokenizer_files(const nlohmann::json& j, int64_t block_size) {
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();  // by id, as GPT-2 ships it
  for (size_t id = 0; id < j["vocab"].size(); ++id) vocab[j["vocab"][id].get<std::string>()] = id;
  std::string merges = "#version: 0.2\n";
  for (const auto& m : j["merges"]) merges += m.get<std::string>() + "\n";
  const nlohmann::ordered_json cfg = {{"model_max_length", block_size}};
  return {{{"vocab.json", vocab.dump()}, {"merges.txt", merges}, {"tokenizer_config.json", cfg.dump(2) + "\n"}}, ""};
}

TokenizerFiles tokenizer_files(const GptTokenizer& tok, int64_t block_size) {
  const nlohmann::json j = tok.to_json();
  std::string why;
  if (dynamic_cast<const BpeTokenizer*>(&tok) != nullptr) {
    why = bpe_unexpressible(j);
    if (why.empty()) return gpt2_tokenizer_files(j, block_size);
    why = "this byte-level BPE tokenizer cannot be (" + why + ")";
  } else {
    why = fmt::format("this run's tokenizer is {}", tok.kind());
  }
  return {{{"atto_tokenizer.json", j.dump(2) + "\n"}},
          fmt::format("Hugging Face's GPT-2 tokenizer files (vocab.json, merges.txt) are written only for byte-level "
                      "BPE runs and {}: atto's tokenizer is in atto_tokenizer.json",
                      why)};
}

// ---- the directory ------------------------------------------------------------------------------

void check_export_out(const std::string& out, bool force, const std::string& source) {
  ATTO_CHECK(!out.empty(), "no output directory: pass --out DIR");
  if (!fs::exists(out)) return;
  ATTO_CHECK(fs::is_directory(out), "--out {} exists and is not a directory", out);
  std::error_code ec;
  ATTO_CHECK(source.empty() || !fs::equivalent(source, out, ec),
             "--out {} is the run itself (--model {}): choose another --out", out, source);
  ATTO_CHECK(force || fs::is_empty(out),
             "--out {} exists and is not empty: choose another --out, or pass --force to overwrite its files", out);
}

}  // namespace

HfExportSummary export_hf(const LoadedModel& lm, const std::string& out, bool force, const std::string& source) {
  const GPT& model = *lm.model;
  const GPTConfig& c = model.config();
  check_hf_gpt2_architecture(c);
  check_export_out(out, force, source);
  const auto tensors = hf_tensors(model);
  const int64_t d_ff = hf_ffn_width(tensors);
  const TokenizerFiles tok = tokenizer_files(*lm.tokenizer, c.block_size);
  const nlohmann::ordered_json config = config_json(c, d_ff, *lm.tokenizer);
  // Everything is known: write.
  HfExportSummary s;
  s.parameters = model.num_parameters();
  s.tied = c.tie_weights;
  s.tokenizer_note = tok.note;
  std::error_code ec;
  fs::create_directories(out, ec);
  ATTO_CHECK(!ec, "cannot create --out {}: {}", out, ec.message());
  io::remove_stale_temp_files(out);
  std::set<std::string> writes = {"model.safetensors", "config.json"};
  for (const auto& [name, bytes] : tok.files) writes.insert(name);
  for (const char* f : kExportFiles)
    if (!writes.count(f)) fs::remove(run_path(out, f));
  io::save_safetensors(run_path(out, "model.safetensors"), tensors, {{"format", "pt"}});
  s.files.push_back("model.safetensors");
  for (const auto& [name, bytes] : tok.files) {
    io::write_file_atomic(run_path(out, name.c_str()), bytes);
    s.files.push_back(name);
  }
  if (!tok.note.empty()) {
    lm.tokenizer->write_files(out);  // SentencePiece: spm.model, which atto_tokenizer.json names
    if (fs::exists(run_path(out, "spm.model"))) s.files.push_back("spm.model");
  }
  s.tokenizer_files = tok.note.empty();
  io::write_file_atomic(run_path(out, "config.json"), config.dump(2) + "\n");  // last: the directory is complete
  s.files.push_back("config.json");
  return s;
}

}  // namespace atto
