#include "run/gguf_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>

#include "base/error.h"
#include "base/json.h"
#include "kernels/kernels.h"
#include "tokenize/bpe.h"
#include "tokenize/char_tokenizer.h"
#include "tokenize/spm_tokenizer.h"
#include "tokenize/utf8.h"

#include <nlohmann/json.hpp>

namespace atto {

namespace {

using io::GgmlType;
using io::GgufValue;

constexpr int32_t kTokenNormal = 1, kTokenControl = 3;  // llama.cpp's token types
constexpr float kGgufNormEps = 1e-5f;                       // nn::BlockConfig::norm_eps

// The byte-level symbols of a character's UTF-8 bytes, one string per byte.
std::vector<std::string> byte_symbols(char32_t c) {
  std::vector<std::string> out;
  for (unsigned char b : utf8::encode(c)) out.push_back(utf8::encode(gpt2_byte_to_char(b)));
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

enum class Arch { Gpt2, Llama };
const char* arch_name(Arch a) { return a == Arch::Gpt2 ? "gpt2" : "llama"; }

// The llama.cpp architecture of a GPT's layout; anything else is an error naming the setting.
Arch arch_of(const GPTConfig& c) {
  using nn::Activation;
  const bool gelu = c.activation == Activation::GELU || c.activation == Activation::GELUTanh;
  if (c.pre_norm && c.norm == nn::NormKind::LayerNorm && gelu && c.pos == PosKind::Learned) {
    ATTO_CHECK(c.kv_heads() == c.n_heads,
               "GGUF export: grouped-query attention (n_kv_heads {} of {} heads) has no place in llama.cpp's gpt2 "
               "layout; train it with the llama layout (--norm rmsnorm --ffn swiglu --pos rope --no-bias)",
               c.kv_heads(), c.n_heads);
    return Arch::Gpt2;
  }
  if (c.pre_norm && c.norm == nn::NormKind::RMSNorm && c.activation == Activation::SwiGLU && c.pos == PosKind::Rope &&
      !c.bias)
    return Arch::Llama;
  fail(
      "GGUF export: this model ({}-norm, {}, {}, {} positions, bias {}) is neither llama.cpp's gpt2 layout (pre-norm "
      "LayerNorm, gelu or gelu_tanh, learned positions) nor its llama layout (pre-norm RMSNorm, swiglu, rope, no bias)",
      c.pre_norm ? "pre" : "post", c.norm == nn::NormKind::LayerNorm ? "layernorm" : "rmsnorm", to_string(c.activation),
      to_string(c.pos), c.bias);
}

// One GGUF tensor: an atto tensor, or its rows [row0, row0 + rows) (llama's attn_q, attn_k,
// attn_v are the three row blocks of atto's fused c_attn: C, KV and KV rows). rows -1: all.
struct TensorMap {
  std::string atto, gguf;
  int64_t row0 = 0, rows = -1;
  bool last = true;  // the last block of its atto tensor
};

std::vector<TensorMap> tensor_names(const GPTConfig& c, Arch arch) {
  std::vector<TensorMap> m = {{"transformer.wte.weight", "token_embd.weight"}};
  if (arch == Arch::Gpt2) m.push_back({"transformer.wpe.weight", "position_embd.weight"});
  for (int64_t i = 0; i < c.n_layers; ++i) {
    auto add = [&](const std::string& a, const std::string& g, int64_t row0 = 0, int64_t rows = -1, bool last = true) {
      m.push_back({fmt::format("transformer.h.{}.{}", i, a), fmt::format("blk.{}.{}", i, g), row0, rows, last});
    };
    if (arch == Arch::Gpt2) {
      for (const char* p : {"weight", "bias"})
        for (auto [a, g] : {std::pair{"ln_1", "attn_norm"},
                            {"attn.c_attn", "attn_qkv"},
                            {"attn.c_proj", "attn_output"},
                            {"ln_2", "ffn_norm"},
                            {"mlp.c_fc", "ffn_up"},
                            {"mlp.c_proj", "ffn_down"}})
          add(fmt::format("{}.{}", a, p), fmt::format("{}.{}", g, p));
    } else {
      add("ln_1.weight", "attn_norm.weight");
      const int64_t C = c.d_model, KV = c.kv_heads() * (c.d_model / c.n_heads);
      add("attn.c_attn.weight", "attn_q.weight", 0, C, false);
      add("attn.c_attn.weight", "attn_k.weight", C, KV, false);
      add("attn.c_attn.weight", "attn_v.weight", C + KV, KV);
      add("attn.c_proj.weight", "attn_output.weight");
      add("ln_2.weight", "ffn_norm.weight");
      add("mlp.c_fc.weight", "ffn_gate.weight");  // silu(c_fc x) * c_fc2 x
      add("mlp.c_fc2.weight", "ffn_up.weight");
      add("mlp.c_proj.weight", "ffn_down.weight");
    }
  }
  m.push_back({"transformer.ln_f.weight", "output_norm.weight"});
  if (arch == Arch::Gpt2) m.push_back({"transformer.ln_f.bias", "output_norm.bias"});
  if (!c.tie_weights) m.push_back({"lm_head.weight", "output.weight"});
  return m;
}


// A byte-level BPE vocabulary is already in llama.cpp's gpt2 form: tokens and merges in GPT-2's
// printable byte form, <|endoftext|> a control token.
void add_bpe_vocabulary(io::GgufWriter& w, const BpeTokenizer& tok) {
  const nlohmann::json j = tok.to_json();
  std::vector<std::string> tokens = j["vocab"].get<std::vector<std::string>>();
  std::vector<int32_t> types(tokens.size(), kTokenNormal);
  for (const auto& [content, id] : j["special_tokens"].items()) types[id.get<size_t>()] = kTokenControl;
  w.add("tokenizer.ggml.model", GgufValue::string("gpt2"));
  w.add("tokenizer.ggml.pre", GgufValue::string("gpt-2"));
  w.add("tokenizer.ggml.tokens", GgufValue::string_array(std::move(tokens)));
  w.add("tokenizer.ggml.token_type", GgufValue::i32_array(types));
  w.add("tokenizer.ggml.merges", GgufValue::string_array(j["merges"].get<std::vector<std::string>>()));
}

void add_char_vocabulary(io::GgufWriter& w, const CharTokenizer& tok) {
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
}

// A SentencePiece vocabulary in llama.cpp's llama form: pieces, scores and types (SentencePiece's
// numbering is llama.cpp's), no space put before the text unless the model does so.
void add_spm_vocabulary(io::GgufWriter& w, const SpmGptTokenizer& tok) {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (SpmPiece& p : tok.pieces()) {
    tokens.push_back(std::move(p.piece));
    scores.push_back(p.score);
    types.push_back(p.type);
  }
  w.add("tokenizer.ggml.model", GgufValue::string("llama"));
  w.add("tokenizer.ggml.tokens", GgufValue::string_array(std::move(tokens)));
  w.add("tokenizer.ggml.scores", GgufValue::f32_array(scores));
  w.add("tokenizer.ggml.token_type", GgufValue::i32_array(types));
  w.add("tokenizer.ggml.unknown_token_id", GgufValue::u32(0));
  w.add("tokenizer.ggml.add_space_prefix", GgufValue::boolean(tok.add_dummy_prefix()));
}

void add_vocabulary(io::GgufWriter& w, const GptTokenizer& any) {
  if (const auto* bpe = dynamic_cast<const BpeTokenizer*>(&any)) {
    add_bpe_vocabulary(w, *bpe);
  } else if (const auto* spm = dynamic_cast<const SpmGptTokenizer*>(&any)) {
    add_spm_vocabulary(w, *spm);
  } else {
    ATTO_CHECK(dynamic_cast<const CharTokenizer*>(&any) != nullptr,
               "GGUF export of a {} tokenizer is not supported: export models with a char, bpe or spm tokenizer",
               any.kind());
    add_char_vocabulary(w, dynamic_cast<const CharTokenizer&>(any));
  }
  if (any.has_boundary()) {
    const auto eos = static_cast<uint32_t>(any.boundary_id());
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

// A vocabulary with tokens of more than one character: byte-level BPE with its merges.
std::unique_ptr<GptTokenizer> read_bpe_vocabulary(const io::GgufFile& f, const std::vector<std::string>& tokens,
                                                  const std::vector<double>& types) {
  ATTO_CHECK(f.has("tokenizer.ggml.merges"), "{}: a BPE vocabulary without tokenizer.ggml.merges", f.path);
  nlohmann::json j = {{"type", "bpe"},
                      {"version", 1},
                      {"pattern", "gpt2"},
                      {"vocab", tokens},
                      {"merges", f.get("tokenizer.ggml.merges").as_strings(f.path + ": tokenizer.ggml.merges")},
                      {"special_tokens", nlohmann::json::object()}};
  for (size_t i = 0; i < tokens.size(); ++i) {
    ATTO_CHECK(types[i] == kTokenNormal || types[i] == kTokenControl,
               "{}: token {} ({}) has type {}; atto reads normal and control tokens", f.path, i, utf8::quote(tokens[i]),
               types[i]);
    if (types[i] == kTokenControl) j["special_tokens"][tokens[i]] = i;
  }
  return std::make_unique<BpeTokenizer>(BpeTokenizer::from_json(j, f.path + ": the tokenizer"));
}

// llama's SentencePiece vocabulary: tokens, scores and types. The boundary (lines mode) is </s>
// when the file says its data mode is lines (atto's export), none otherwise.
std::unique_ptr<GptTokenizer> read_spm_vocabulary(const io::GgufFile& f, const std::vector<std::string>& tokens,
                                                  const std::vector<double>& types) {
  const auto& scores = f.get("tokenizer.ggml.scores").as_numbers(f.path + ": tokenizer.ggml.scores");
  ATTO_CHECK(scores.size() == tokens.size(), "{}: {} tokens but {} scores", f.path, tokens.size(), scores.size());
  std::vector<SpmPiece> pieces(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const double t = types[i];
    pieces[i] = {tokens[i], static_cast<float>(scores[i]), t >= 1 && t <= 6 && t == std::floor(t) ? int32_t(t) : 0};
  }
  const bool prefix = !f.has("tokenizer.ggml.add_space_prefix") ||
                      f.get("tokenizer.ggml.add_space_prefix").as_bool(f.path + ": tokenizer.ggml.add_space_prefix");
  const bool lines =
      f.has("atto.data.mode") && f.get("atto.data.mode").as_string(f.path + ": atto.data.mode") == "lines";
  return std::make_unique<SpmGptTokenizer>(
      SpmGptTokenizer::from_pieces(pieces, lines, prefix, f.path + ": the vocabulary (tokenizer.ggml.*)"));
}

std::unique_ptr<GptTokenizer> read_vocabulary(const io::GgufFile& f) {
  const std::string& model = f.get("tokenizer.ggml.model").as_string(f.path + ": tokenizer.ggml.model");
  ATTO_CHECK(model == "gpt2" || model == "llama",
             "{}: tokenizer.ggml.model is {}; atto reads byte-level BPE (gpt2) and SentencePiece (llama) vocabularies",
             f.path, json_util::printable(model));
  const auto& tokens = f.get("tokenizer.ggml.tokens").as_strings(f.path + ": tokenizer.ggml.tokens");
  const auto& types = f.get("tokenizer.ggml.token_type").as_numbers(f.path + ": tokenizer.ggml.token_type");
  ATTO_CHECK(!tokens.empty() && types.size() == tokens.size(), "{}: {} tokens but {} token types", f.path,
             tokens.size(), types.size());
  if (model == "llama") return read_spm_vocabulary(f, tokens, types);
  // A character vocabulary (atto export of a char model): every normal token one character.
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (types[i] != kTokenNormal) continue;
    try {
      char_of_byte_level(tokens[i]);
    } catch (const Error&) {
      return read_bpe_vocabulary(f, tokens, types);
    }
  }
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
    return std::make_unique<CharTokenizer>(CharTokenizer::from_chars(std::move(chars), boundary));
  } catch (const Error& e) {
    fail("{}: the vocabulary: {}", f.path, e.what());
  }
}

// llama's attention keys: grouped-query attention (head_count_kv) and RoPE's base and width.
void read_llama_attention(const io::GgufFile& f, GPTConfig& c) {
  auto key = [&](const char* k) { return static_cast<int64_t>(meta_uint(f, std::string("llama.") + k)); };
  if (f.has("llama.attention.head_count_kv")) {
    const int64_t kv = key("attention.head_count_kv");
    ATTO_CHECK(kv > 0 && kv <= c.n_heads && c.n_heads % kv == 0,
               "{}: llama.attention.head_count_kv is {}: it must divide llama.attention.head_count ({})", f.path, kv,
               c.n_heads);
    c.n_kv_heads = kv == c.n_heads ? 0 : kv;
  }
  if (f.has("llama.rope.freq_base"))
    c.rope_base = static_cast<float>(f.get("llama.rope.freq_base").as_number(f.path + ": llama.rope.freq_base"));
  if (c.n_heads > 0 && f.has("llama.rope.dimension_count"))
    ATTO_CHECK(key("rope.dimension_count") == c.d_model / c.n_heads,
               "{}: llama.rope.dimension_count is {}; atto rotates whole heads ({} dimensions)", f.path,
               key("rope.dimension_count"), c.d_model / c.n_heads);
}

// The architecture-specific keys of a GPT config; every dimension is checked against the tensors
// (whose sizes the reader checked against the file) before anything is allocated for the model.
GPTConfig read_gpt_config(const io::GgufFile& f, int64_t vocab, Arch& arch) {
  const std::string& name = f.get("general.architecture").as_string(f.path + ": general.architecture");
  ATTO_CHECK(name == "gpt2" || name == "llama",
             "{}: the architecture is {}; atto reads gpt2 and llama GGUF files (the ones it exports)", f.path,
             json_util::printable(name));
  arch = name == "gpt2" ? Arch::Gpt2 : Arch::Llama;
  auto key = [&](const char* k) { return static_cast<int64_t>(meta_uint(f, name + "." + k)); };
  GPTConfig c;
  c.vocab_size = vocab;
  c.block_size = key("context_length");
  c.d_model = key("embedding_length");
  c.d_ff = key("feed_forward_length");
  c.n_layers = key("block_count");
  c.n_heads = key("attention.head_count");
  c.tie_weights = f.find("output.weight") == nullptr;
  c.dropout = 0.0f;
  const std::string eps_key =
      name + (arch == Arch::Gpt2 ? ".attention.layer_norm_epsilon" : ".attention.layer_norm_rms_epsilon");
  const double eps = f.get(eps_key).as_number(f.path + ": " + eps_key);
  ATTO_CHECK(std::fabs(eps - kGgufNormEps) < 1e-9, "{}: {} is {}; atto's norms use {}", f.path, eps_key, eps, kGgufNormEps);
  if (arch == Arch::Gpt2) {  // llama.cpp computes the tanh GELU; atto's files say what they trained with
    c.activation = f.has("atto.ffn") ? parse_activation(f.get("atto.ffn").as_string(f.path + ": atto.ffn"))
                                     : nn::Activation::GELUTanh;
  } else {
    c.norm = nn::NormKind::RMSNorm;
    c.activation = nn::Activation::SwiGLU;
    c.pos = PosKind::Rope;
    c.bias = false;
    read_llama_attention(f, c);
  }
  auto shape_is = [&](const std::string& t_name, std::vector<int64_t> want, const char* keys) {
    const io::GgufTensorInfo* t = f.find(t_name);
    ATTO_CHECK(t != nullptr, "{}: the GGUF file has no tensor {}", f.path, t_name);
    ATTO_CHECK(t->shape == want, "{}: tensor {} has shape [{}], but {} say [{}]", f.path, t_name,
               fmt::join(t->shape, ", "), keys, fmt::join(want, ", "));
  };
  shape_is("token_embd.weight", {c.vocab_size, c.d_model}, "the vocabulary and embedding_length");
  if (arch == Arch::Gpt2)
    shape_is("position_embd.weight", {c.block_size, c.d_model}, "context_length and embedding_length");
  shape_is("blk.0.ffn_up.weight", {c.d_ff, c.d_model}, "feed_forward_length and embedding_length");
  const char* probe = arch == Arch::Gpt2 ? "attn_qkv" : "attn_q";
  ATTO_CHECK(c.n_layers >= 1 && f.find(fmt::format("blk.{}.{}.weight", c.n_layers - 1, probe)) &&
                 !f.find(fmt::format("blk.{}.{}.weight", c.n_layers, probe)),
             "{}: {}.block_count is {}, but the tensors blk.<i>.* say otherwise", f.path, name, c.n_layers);
  try {
    c.validate();
  } catch (const Error& e) {
    fail("{}: {}", f.path, e.what());
  }
  return c;
}

void add_hparams(io::GgufWriter& w, const GPTConfig& c, Arch arch) {
  const std::string a = arch_name(arch);
  auto u32 = [](int64_t v) { return GgufValue::u32(static_cast<uint32_t>(v)); };
  w.add(a + ".context_length", u32(c.block_size));
  w.add(a + ".embedding_length", u32(c.d_model));
  w.add(a + ".feed_forward_length", u32(c.d_ff > 0 ? c.d_ff : 4 * c.d_model));
  w.add(a + ".block_count", u32(c.n_layers));
  w.add(a + ".attention.head_count", u32(c.n_heads));
  if (arch == Arch::Gpt2) {
    w.add(a + ".attention.layer_norm_epsilon", GgufValue::f32(kGgufNormEps));
  } else {
    w.add(a + ".attention.head_count_kv", u32(c.kv_heads()));
    w.add(a + ".attention.layer_norm_rms_epsilon", GgufValue::f32(kGgufNormEps));
    w.add(a + ".rope.freq_base", GgufValue::f32(c.rope_base));
    w.add(a + ".rope.dimension_count", u32(c.d_model / c.n_heads));
    w.add(a + ".vocab_size", u32(c.vocab_size));
  }
}

// The data of one GGUF tensor from the model's state: a tensor, a row block of one, or (a GPT-2
// model without biases) zeros.
std::vector<float> tensor_data(const std::vector<std::pair<std::string, Tensor>>& state, const TensorMap& m,
                               std::vector<int64_t>& shape) {
  auto find = [&](const std::string& n) {
    return std::find_if(state.begin(), state.end(), [&](const auto& p) { return p.first == n; });
  };
  auto it = find(m.atto);
  if (it == state.end()) {  // llama.cpp's gpt2 graph has biases: a model without them gets zeros
    ATTO_CHECK(m.atto.ends_with(".bias"), "GGUF export: the model has no tensor {}", m.atto);
    auto wt = find(m.atto.substr(0, m.atto.size() - 4) + "weight");
    ATTO_CHECK(wt != state.end(), "GGUF export: the model has no tensor {}", m.atto);
    shape = {wt->second.size(0)};
    return std::vector<float>(static_cast<size_t>(shape[0]), 0.0f);
  }
  const Tensor t = it->second.contiguous();
  shape = t.shape();
  const int64_t rows = m.rows < 0 ? shape[0] : m.rows, row = t.numel() / shape[0];
  ATTO_CHECK(m.row0 + rows <= shape[0], "GGUF export: {} has {} rows, not {}", m.atto, shape[0], m.row0 + rows);
  shape[0] = rows;
  const float* p = t.data() + m.row0 * row;
  return std::vector<float>(p, p + rows * row);
}

}  // namespace

std::string byte_level_string(char32_t c) {
  std::string s;
  for (const std::string& b : byte_symbols(c)) s += b;
  return s;
}

char32_t char_of_byte_level(const std::string& token) {
  const std::string bytes = gpt2_chars_to_bytes(token, "a token");
  const std::vector<char32_t> cps = utf8::decode(bytes, "a token's bytes");
  ATTO_CHECK(cps.size() == 1, "{} stands for {} characters, not one", utf8::quote(token), cps.size());
  return cps[0];
}

const char* gguf_arch_name(const GPTConfig& c) { return arch_name(arch_of(c)); }

std::string export_gguf(const LoadedModel& lm, const std::string& path, const io::QuantRecipe& type) {
  ATTO_CHECK(io::ggml_type_writable(type.type), "GGUF export: atto does not write ggml type {}",
             io::to_string(type.type));
  const GPTConfig& c = lm.model->config();
  const Arch arch = arch_of(c);
  io::GgufWriter w;
  w.add("general.architecture", GgufValue::string(arch_name(arch)));
  w.add("general.name", GgufValue::string("atto"));
  w.add("general.file_type", GgufValue::u32(io::file_type_of(type)));
  w.add("general.alignment", GgufValue::u32(32));
  // How the model reads text (atto eval scores a file that way); other programs ignore it.
  if (lm.config.data.mode != DataMode::Auto) w.add("atto.data.mode", GgufValue::string(to_string(lm.config.data.mode)));
  add_hparams(w, c, arch);
  add_vocabulary(w, *lm.tokenizer);
  w.add("atto.ffn", GgufValue::string(to_string(c.activation)));
  w.add("atto.lines_mode", GgufValue::boolean(lm.tokenizer->has_boundary()));
  const auto state = lm.model->state_dict();
  const std::vector<TensorMap> maps = tensor_names(c, arch);
  std::vector<std::string> names;
  for (const TensorMap& m : maps) names.push_back(m.gguf);
  // 1-D tensors f32, matrices as the recipe says (io's rule, which `atto quantize` applies to a
  // GGUF file too).
  const io::TypePlan plan(type, names);
  for (const TensorMap& m : maps) {
    std::vector<int64_t> shape;
    const std::vector<float> data = tensor_data(state, m, shape);
    w.add_tensor(m.gguf, shape, plan.type_of(m.gguf, shape, GgmlType::F32), data);
  }
  w.write(path);
  return arch_name(arch);
}

namespace {

// The run configuration a GGUF file describes (and its vocabulary and architecture).
RunConfig config_of(const io::GgufFile& f, const GptTokenizer& tok, Arch& arch) {
  RunConfig cfg = default_run_config(Task::Gpt);
  cfg.gpt = read_gpt_config(f, tok.vocab_size(), arch);
  cfg.data.path = f.path;
  cfg.data.tokenizer = parse_tokenizer_kind(tok.kind());
  // The data mode atto's export records; in another program's file, lines for a character
  // vocabulary with a boundary token (atto's lines runs), stream otherwise (GPT-2's, llama's).
  cfg.data.mode = tok.has_boundary() && cfg.data.tokenizer == TokenizerKind::Char ? DataMode::Lines : DataMode::Stream;
  if (f.has("atto.data.mode")) {
    const std::string m = f.get("atto.data.mode").as_string(f.path + ": atto.data.mode");
    ATTO_CHECK(m == "lines" || m == "stream", "{}: atto.data.mode is {}, not lines or stream", f.path,
               json_util::printable(m));
    cfg.data.mode = m == "lines" ? DataMode::Lines : DataMode::Stream;
  }
  return cfg;
}

// Whether an atto tensor can keep its file's quantized rows: a matrix that a linear layer or the
// token embedding reads (not the learned positions, which are sliced), every part of one type
// that io::integer_type_for computes as integers (the k-quants: rows of whole super-blocks of 256,
// as their rows must be).
bool keeps_quantized(const io::GgufFile& f, const std::vector<TensorMap>& names, size_t first) {
  if (names[first].atto == "transformer.wpe.weight") return false;
  const io::GgmlType type = f.find(names[first].gguf)->type;
  if (io::integer_type_for(type) == static_cast<uint32_t>(io::GgmlType::F32)) return false;
  const bool super = io::ggml_block_size(type) == 256;
  for (size_t i = first;; ++i) {
    const io::GgufTensorInfo* t = f.find(names[i].gguf);
    if (t->type != type || t->shape.size() != 2) return false;
    if (super && t->shape[1] % 256 != 0) return false;
    if (names[i].last) return true;
  }
}

// A quantized block's scales must be finite, as a float weight must be: a block's first two bytes
// (fp16), a Q4_K or Q5_K super-block's d and dmin and a q4_1 or q5_1 block's d and m (their first
// four), a Q6_K or Q3_K super-block's d (its last two).
void check_block_scales(const std::string& path, const io::GgufTensorInfo& t, const std::string& bytes) {
  using T = io::GgmlType;
  const bool min = t.type == T::Q4_K || t.type == T::Q5_K || t.type == T::Q4_1 || t.type == T::Q5_1;
  const bool k6 = t.type == T::Q6_K || t.type == T::Q3_K;
  const uint64_t block = io::ggml_nbytes(t.type, io::ggml_block_size(t.type));
  const std::vector<uint64_t> scales = k6    ? std::vector<uint64_t>{block - 2}
                                       : min ? std::vector<uint64_t>{0, 2}
                                             : std::vector<uint64_t>{0};
  for (uint64_t b = 0; b + block <= bytes.size(); b += block)
    for (uint64_t at : scales) {
      uint16_t h = 0;
      std::memcpy(&h, bytes.data() + b + at, 2);
      const float d = io::f16_to_f32(h);
      ATTO_CHECK(std::isfinite(d), "{}: tensor {} holds a non-finite block {} ({} in block {})", path, t.name,
                 min && at == 2 ? "min scale" : "scale", d, b / block);
    }
}

// Tensor t's rows appended to q (as blocks of io::integer_type_for its type), their block scales
// checked first.
void append_rows(QuantizedData& q, const std::string& path, const io::GgufFile& f, const io::GgufTensorInfo& t) {
  std::string bytes = f.tensor_bytes(t);
  check_block_scales(path, t, bytes);
  bytes = io::as_integer_blocks(t.type, bytes, static_cast<uint64_t>(t.numel()));
  q.bytes.insert(q.bytes.end(), bytes.begin(), bytes.end());
}

// The rows in the layout the integer kernels read fastest at this level (on x86 every quantized
// type is regrouped for them: quant.h's Lanes16; the same bytes, the same results).
void pack_for_kernels(QuantizedData& q, const std::vector<int64_t>& shape) {
  const auto type = static_cast<kernels::QuantType>(q.type);
  const kernels::QuantLayout layout = kernels::quant_layout_for(type);
  if (layout == kernels::QuantLayout::Rows) return;
  std::vector<uint8_t> packed(q.bytes.size());
  kernels::quant_pack(packed.data(), q.bytes.data(), type, layout, shape[0], shape[1]);
  q.bytes = std::move(packed);
  q.layout = static_cast<int>(layout);
}

}  // namespace

RunConfig gguf_run_config(const std::string& path) {
  const io::GgufFile f = io::read_gguf(path);
  Arch arch;
  return config_of(f, *read_vocabulary(f), arch);
}

std::shared_ptr<const GptTokenizer> gguf_tokenizer(const std::string& path) {
  const io::GgufFile f = io::read_gguf(path);
  std::shared_ptr<const GptTokenizer> tok = read_vocabulary(f);
  Arch arch;
  (void)config_of(f, *tok, arch);  // the header checked as load_gguf checks it
  return tok;
}

static_assert(io::kU8M == static_cast<uint32_t>(kernels::QuantType::U8M), "io's and the kernels' U8M id");
static_assert(io::kQ8F == static_cast<uint32_t>(kernels::QuantType::Q8F), "io's and the kernels' Q8F id");

LoadedModel load_gguf(const std::string& path, WeightStorage weights) {
  const io::GgufFile f = io::read_gguf(path);
  LoadedModel lm;
  lm.tokenizer = read_vocabulary(f);
  Arch arch;
  lm.config = config_of(f, *lm.tokenizer, arch);
  const std::vector<TensorMap> names = tensor_names(lm.config.gpt, arch);
  for (const TensorMap& m : names)
    ATTO_CHECK(f.find(m.gguf) != nullptr, "{}: the GGUF file has no tensor {}", path, m.gguf);
  Rng rng(0);  // overwritten by the file's weights
  {
    // Quantized rows replace whole matrices: their floats are never initialised (nor resident).
    std::optional<NoInitScope> no_init;
    if (weights == WeightStorage::Quantized) no_init.emplace();
    lm.model = std::make_unique<GPT>(lm.config.gpt, rng);
  }
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::vector<float> parts;  // the row blocks of one atto tensor, gathered in order
  std::shared_ptr<QuantizedData> qparts;  // or their quantized rows
  std::vector<int64_t> shape;
  for (size_t i = 0; i < names.size(); ++i) {
    const TensorMap& m = names[i];
    const io::GgufTensorInfo* t = f.find(m.gguf);
    if (m.row0 == 0) {
      parts.clear(), shape = t->shape, shape[0] = 0, qparts.reset();
      if (weights == WeightStorage::Quantized && keeps_quantized(f, names, i)) {
        qparts = std::make_shared<QuantizedData>();
        const auto kept = static_cast<kernels::QuantType>(io::integer_type_for(t->type));
        qparts->type = static_cast<int>(kept);
        qparts->row_bytes = kernels::quant_row_bytes(kept, t->shape.at(1));
      }
    }
    ATTO_CHECK(m.rows < 0 || t->shape.at(0) == m.rows, "{}: tensor {} has {} rows; the file's hyperparameters say {}",
               path, m.gguf, t->shape.at(0), m.rows);
    ATTO_CHECK(t->shape.size() == shape.size() && std::equal(shape.begin() + 1, shape.end(), t->shape.begin() + 1),
               "{}: tensor {} has shape [{}], unlike the other parts of {}", path, m.gguf, fmt::join(t->shape, ", "),
               m.atto);
    if (qparts) {
      append_rows(*qparts, path, f, *t);
    } else {
      std::vector<float> v = f.tensor_f32(m.gguf);
      const auto bad = std::find_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); });
      ATTO_CHECK(bad == v.end(), "{}: tensor {} holds non-finite values ({} at element {})", path, m.gguf, *bad,
                 bad - v.begin());
      parts.insert(parts.end(), v.begin(), v.end());
    }
    shape[0] += t->shape[0];
    if (m.last && qparts) pack_for_kernels(*qparts, shape);
    if (m.last)
      tensors.emplace_back(m.atto, qparts ? Tensor::quantized(shape, qparts) : Tensor::from_vector(shape, parts));
  }
  if (lm.config.gpt.tie_weights) tensors.emplace_back("lm_head.weight", tensors[0].second);
  lm.model->load_state_dict(tensors, path);
  lm.model->eval();
  if (weights == WeightStorage::Quantized) allocator_release_cached();  // the floats the quantized rows replaced
  return lm;
}

}  // namespace atto
