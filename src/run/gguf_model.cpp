#include "run/gguf_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>

#include "base/error.h"
#include "tokenize/utf8.h"

namespace atto {

namespace {

using io::GgmlType;
using io::GgufValue;

constexpr int32_t kTokenNormal = 1, kTokenControl = 3;  // llama.cpp's token types
constexpr float kNormEps = 1e-5f;                       // nn::BlockConfig::norm_eps

// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the others for U+0100 + n.
const std::array<char32_t, 256>& byte_to_unicode() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = printable ? static_cast<char32_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

// The byte-level symbols of a character's UTF-8 bytes, one string per byte.
std::vector<std::string> byte_symbols(char32_t c) {
  std::vector<std::string> out;
  for (unsigned char b : utf8::encode(c)) out.push_back(utf8::encode(byte_to_unicode()[b]));
  return out;
}

// Merges that join each multi-byte character's symbols left to right (and nothing else: a
// merge starts with a lead byte's symbol, so it never joins two characters).
std::vector<std::string> char_merges(const std::vector<char32_t>& chars) {
  std::vector<std::string> merges;
  std::set<std::string> seen;
  for (char32_t c : chars) {
    const std::vector<std::string> s = byte_symbols(c);
    std::string left = s[0];
    for (size_t i = 1; i < s.size(); ++i) {
      const std::string m = left + " " + s[i];
      if (seen.insert(m).second) merges.push_back(m);
      left += s[i];
    }
  }
  return merges;
}

struct TensorMap {
  std::string atto, gguf;
};

// atto's state_dict names and llama.cpp's gpt2 names, block by block.
std::vector<TensorMap> gpt2_names(const GPTConfig& c) {
  std::vector<TensorMap> m = {{"transformer.wte.weight", "token_embd.weight"},
                              {"transformer.wpe.weight", "position_embd.weight"}};
  const std::pair<const char*, const char*> block[] = {{"ln_1", "attn_norm"},          {"attn.c_attn", "attn_qkv"},
                                                       {"attn.c_proj", "attn_output"}, {"ln_2", "ffn_norm"},
                                                       {"mlp.c_fc", "ffn_up"},         {"mlp.c_proj", "ffn_down"}};
  for (int64_t i = 0; i < c.n_layers; ++i)
    for (const auto& [a, g] : block)
      for (const char* p : {"weight", "bias"})
        m.push_back({fmt::format("transformer.h.{}.{}.{}", i, a, p), fmt::format("blk.{}.{}.{}", i, g, p)});
  m.push_back({"transformer.ln_f.weight", "output_norm.weight"});
  m.push_back({"transformer.ln_f.bias", "output_norm.bias"});
  if (!c.tie_weights) m.push_back({"lm_head.weight", "output.weight"});
  return m;
}

void check_exportable(const GPTConfig& c) {
  ATTO_CHECK(c.pre_norm, "GGUF export: this model is post-norm; llama.cpp's gpt2 graph is pre-norm");
  ATTO_CHECK(c.norm == nn::NormKind::LayerNorm,
             "GGUF export: this model uses RMSNorm; llama.cpp's gpt2 layout needs LayerNorm (--norm layernorm)");
  ATTO_CHECK(c.activation == nn::Activation::GELU || c.activation == nn::Activation::GELUTanh,
             "GGUF export: this model's FFN is {}; llama.cpp's gpt2 layout needs gelu or gelu_tanh",
             to_string(c.activation));
  ATTO_CHECK(c.pos == PosKind::Learned,
             "GGUF export: this model has sinusoidal positions; llama.cpp's gpt2 layout needs learned ones");
}

GgmlType stored_type(GgmlType want, const std::vector<int64_t>& shape) {
  if (shape.size() < 2 || want == GgmlType::F32) return GgmlType::F32;
  if (want == GgmlType::Q8_0 && shape.back() % 32 != 0) return GgmlType::F16;
  return want;
}

uint32_t file_type(GgmlType t) { return t == GgmlType::F32 ? 0 : t == GgmlType::F16 ? 1 : 7; }

void add_vocabulary(io::GgufWriter& w, const CharTokenizer& tok) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  if (tok.has_boundary()) {
    tokens.push_back(tok.id_to_string(tok.boundary_id()));
    types.push_back(kTokenControl);
  }
  for (char32_t c : tok.chars()) {
    std::string s;
    for (const std::string& b : byte_symbols(c)) s += b;
    tokens.push_back(std::move(s));
    types.push_back(kTokenNormal);
  }
  w.add("tokenizer.ggml.model", GgufValue::string("gpt2"));
  w.add("tokenizer.ggml.pre", GgufValue::string("gpt-2"));
  w.add("tokenizer.ggml.tokens", GgufValue::string_array(std::move(tokens)));
  w.add("tokenizer.ggml.token_type", GgufValue::i32_array(types));
  w.add("tokenizer.ggml.merges", GgufValue::string_array(char_merges(tok.chars())));
  if (tok.has_boundary()) {
    const auto eos = static_cast<uint32_t>(tok.boundary_id());
    for (const char* k : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"})
      w.add(k, GgufValue::u32(eos));
  }
  w.add("tokenizer.ggml.add_bos_token", GgufValue::boolean(false));
  w.add("tokenizer.ggml.add_eos_token", GgufValue::boolean(false));
}

// ---- reading --------------------------------------------------------------------------------
uint64_t meta_uint(const io::GgufFile& f, const std::string& key) {
  return f.get(key).as_uint(fmt::format("{}: {}", f.path, key));
}

CharTokenizer read_vocabulary(const io::GgufFile& f) {
  const std::string& model = f.get("tokenizer.ggml.model").as_string(f.path + ": tokenizer.ggml.model");
  ATTO_CHECK(model == "gpt2", "{}: tokenizer.ggml.model is '{}'; atto reads byte-level (gpt2) vocabularies", f.path,
             model);
  const auto& tokens = f.get("tokenizer.ggml.tokens").as_strings(f.path + ": tokenizer.ggml.tokens");
  const auto& types = f.get("tokenizer.ggml.token_type").as_numbers(f.path + ": tokenizer.ggml.token_type");
  ATTO_CHECK(!tokens.empty() && types.size() == tokens.size(), "{}: {} tokens but {} token types", f.path,
             tokens.size(), types.size());
  const bool boundary = types[0] == kTokenControl;
  std::vector<char32_t> chars;
  for (size_t i = boundary ? 1 : 0; i < tokens.size(); ++i) {
    ATTO_CHECK(types[i] == kTokenNormal,
               "{}: token {} ({}) has type {}; atto reads one control token (<eos>, id 0) "
               "and character tokens",
               f.path, i, utf8::quote(tokens[i]), types[i]);
    try {
      chars.push_back(char_of_byte_level(tokens[i]));
    } catch (const Error& e) {
      fail("{}: token {}: {}", f.path, i, e.what());
    }
  }
  try {
    return CharTokenizer::from_chars(std::move(chars), boundary);
  } catch (const Error& e) {
    fail("{}: the vocabulary: {}", f.path, e.what());
  }
}

GPTConfig read_gpt_config(const io::GgufFile& f, int64_t vocab) {
  const std::string& arch = f.get("general.architecture").as_string(f.path + ": general.architecture");
  ATTO_CHECK(arch == "gpt2", "{}: the architecture is '{}'; atto reads gpt2 GGUF files (the ones it exports)", f.path,
             arch);
  GPTConfig c;
  c.vocab_size = vocab;
  c.block_size = static_cast<int64_t>(meta_uint(f, "gpt2.context_length"));
  c.d_model = static_cast<int64_t>(meta_uint(f, "gpt2.embedding_length"));
  c.d_ff = static_cast<int64_t>(meta_uint(f, "gpt2.feed_forward_length"));
  c.n_layers = static_cast<int64_t>(meta_uint(f, "gpt2.block_count"));
  c.n_heads = static_cast<int64_t>(meta_uint(f, "gpt2.attention.head_count"));
  const double eps = f.get("gpt2.attention.layer_norm_epsilon").as_number(f.path + ": layer_norm_epsilon");
  ATTO_CHECK(std::fabs(eps - kNormEps) < 1e-9, "{}: layer_norm_epsilon is {}; atto's LayerNorm uses {}", f.path, eps,
             kNormEps);
  // llama.cpp's gpt2 graph computes the tanh GELU; files atto wrote say which form they trained with.
  c.activation = f.has("atto.ffn") ? parse_activation(f.get("atto.ffn").as_string(f.path + ": atto.ffn"))
                                   : nn::Activation::GELUTanh;
  c.tie_weights = f.find("output.weight") == nullptr;
  c.dropout = 0.0f;
  // Every dimension against the tensors (whose sizes the reader checked against the file)
  // before anything is allocated for the model.
  auto shape_is = [&](const std::string& name, std::vector<int64_t> want, const char* keys) {
    const io::GgufTensorInfo* t = f.find(name);
    ATTO_CHECK(t != nullptr, "{}: the GGUF file has no tensor {}", f.path, name);
    ATTO_CHECK(t->shape == want, "{}: tensor {} has shape [{}], but {} say [{}]", f.path, name,
               fmt::join(t->shape, ", "), keys, fmt::join(want, ", "));
  };
  shape_is("token_embd.weight", {c.vocab_size, c.d_model}, "the vocabulary and gpt2.embedding_length");
  shape_is("position_embd.weight", {c.block_size, c.d_model}, "gpt2.context_length and embedding_length");
  shape_is("blk.0.ffn_up.weight", {c.d_ff, c.d_model}, "gpt2.feed_forward_length and embedding_length");
  ATTO_CHECK(c.n_layers >= 1 && f.find(fmt::format("blk.{}.attn_qkv.weight", c.n_layers - 1)) &&
                 !f.find(fmt::format("blk.{}.attn_qkv.weight", c.n_layers)),
             "{}: gpt2.block_count is {}, but the tensors blk.<i>.* say otherwise", f.path, c.n_layers);
  try {
    c.validate();
  } catch (const Error& e) {
    fail("{}: {}", f.path, e.what());
  }
  return c;
}

}  // namespace

std::string byte_level_string(char32_t c) {
  std::string s;
  for (const std::string& b : byte_symbols(c)) s += b;
  return s;
}

char32_t char_of_byte_level(const std::string& token) {
  static const std::array<int, 512> unicode_to_byte = [] {
    std::array<int, 512> t;
    t.fill(-1);
    for (int b = 0; b < 256; ++b) t[byte_to_unicode()[b]] = b;
    return t;
  }();
  std::string bytes;
  for (char32_t cp : utf8::decode(token, "a token")) {
    ATTO_CHECK(cp < 512 && unicode_to_byte[cp] >= 0, "{} is not a byte-level BPE string", utf8::quote(token));
    bytes.push_back(static_cast<char>(unicode_to_byte[cp]));
  }
  const std::vector<char32_t> cps = utf8::decode(bytes, "a token's bytes");
  ATTO_CHECK(cps.size() == 1,
             "{} stands for {} characters; atto reads character vocabularies (as atto export "
             "writes them)",
             utf8::quote(token), cps.size());
  return cps[0];
}

void export_gguf(const LoadedModel& lm, const std::string& path, GgmlType type) {
  const GPTConfig& c = lm.model->config();
  check_exportable(c);
  io::GgufWriter w;
  w.add("general.architecture", GgufValue::string("gpt2"));
  w.add("general.name", GgufValue::string("atto"));
  w.add("general.file_type", GgufValue::u32(file_type(type)));
  w.add("general.alignment", GgufValue::u32(32));
  w.add("gpt2.context_length", GgufValue::u32(static_cast<uint32_t>(c.block_size)));
  w.add("gpt2.embedding_length", GgufValue::u32(static_cast<uint32_t>(c.d_model)));
  w.add("gpt2.feed_forward_length", GgufValue::u32(static_cast<uint32_t>(c.d_ff > 0 ? c.d_ff : 4 * c.d_model)));
  w.add("gpt2.block_count", GgufValue::u32(static_cast<uint32_t>(c.n_layers)));
  w.add("gpt2.attention.head_count", GgufValue::u32(static_cast<uint32_t>(c.n_heads)));
  w.add("gpt2.attention.layer_norm_epsilon", GgufValue::f32(kNormEps));
  add_vocabulary(w, lm.tokenizer);
  w.add("atto.ffn", GgufValue::string(to_string(c.activation)));
  w.add("atto.lines_mode", GgufValue::boolean(lm.tokenizer.has_boundary()));
  const auto state = lm.model->state_dict();
  for (const TensorMap& m : gpt2_names(c)) {
    auto it = std::find_if(state.begin(), state.end(), [&](const auto& p) { return p.first == m.atto; });
    std::vector<int64_t> shape;
    std::vector<float> data;
    if (it == state.end()) {  // a model without biases: llama.cpp's gpt2 graph adds them, so zeros
      ATTO_CHECK(m.atto.ends_with(".bias") && !c.bias, "GGUF export: the model has no tensor {}", m.atto);
      const std::string weight = m.atto.substr(0, m.atto.size() - 4) + "weight";
      auto wt = std::find_if(state.begin(), state.end(), [&](const auto& p) { return p.first == weight; });
      shape = {wt->second.size(0)};
      data.assign(static_cast<size_t>(shape[0]), 0.0f);
    } else {
      const Tensor t = it->second.contiguous();
      shape = t.shape();
      data.assign(t.data(), t.data() + t.numel());
    }
    w.add_tensor(m.gguf, shape, stored_type(type, shape), data);
  }
  w.write(path);
}

LoadedModel load_gguf(const std::string& path) {
  const io::GgufFile f = io::read_gguf(path);
  LoadedModel lm;
  lm.tokenizer = read_vocabulary(f);
  lm.config = default_run_config(Task::Gpt);
  lm.config.model = read_gpt_config(f, lm.tokenizer.vocab_size());
  lm.config.data.path = path;
  Rng rng(0);  // overwritten by the file's weights
  lm.model = std::make_unique<GPT>(lm.config.model, rng);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const TensorMap& m : gpt2_names(lm.config.model)) {
    const io::GgufTensorInfo* t = f.find(m.gguf);
    ATTO_CHECK(t != nullptr, "{}: the GGUF file has no tensor {}", path, m.gguf);
    std::vector<float> v = f.tensor_f32(m.gguf);
    const auto bad = std::find_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); });
    ATTO_CHECK(bad == v.end(), "{}: tensor {} holds non-finite values ({} at element {})", path, m.gguf, *bad,
               bad - v.begin());
    tensors.emplace_back(m.atto, Tensor::from_vector(t->shape, v));
  }
  if (lm.config.model.tie_weights) tensors.emplace_back("lm_head.weight", tensors[0].second);
  lm.model->load_state_dict(tensors, path);
  lm.model->eval();
  return lm;
}

}  // namespace atto
