// run/gguf_model: a GPT exported as llama.cpp's gpt2 GGUF and read back.
#include "run/gguf_model.h"
#include "tokenize/bpe.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#include "autograd/tape.h"
#include "io/file.h"
#include "kernels/kernels.h"
#include "support.h"
#include "tokenize/utf8.h"

namespace atto {
namespace {

using test::error_of;
using ::testing::HasSubstr;

LoadedModel random_model(const std::string& text, bool boundary, nn::Activation act = nn::Activation::GELU,
                         bool tie = true, bool bias = true) {
  LoadedModel lm;
  lm.tokenizer = std::make_shared<CharTokenizer>(CharTokenizer::build(text, {.boundary = boundary}));
  lm.config = default_run_config(Task::Gpt);
  GPTConfig& c = lm.config.gpt;
  c.vocab_size = lm.tokenizer->vocab_size();
  c.block_size = 12;
  c.d_model = 32;
  c.n_heads = 4;
  c.n_layers = 2;
  c.dropout = 0.0f;
  c.activation = act;
  c.tie_weights = tie;
  c.bias = bias;
  Rng rng(11);
  lm.model = std::make_unique<GPT>(c, rng);
  lm.model->eval();
  return lm;
}

// The quantized matrix t's rows, dequantized, are exactly tensor `name` of `floats` (the same file
// read as floats).
void expect_same_values(const Tensor& t, GPT& floats, const std::string& name, const std::string& what) {
  const QuantizedData* q = t.quantized();
  const int64_t N = t.size(0), K = t.size(1);
  std::vector<int32_t> rows(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; n++) rows[n] = static_cast<int32_t>(n);
  std::vector<float> values(static_cast<size_t>(N * K));
  kernels::dequantize_rows(values.data(), q->bytes.data(), static_cast<kernels::QuantType>(q->type),
                           static_cast<kernels::QuantLayout>(q->layout), N, K, rows.data(), N);
  int found = 0;
  for (const auto& [fname, ft] : floats.state_dict())
    if (fname == name) {
      EXPECT_EQ(values, ft.to_vector()) << what << " " << name;
      ++found;
    }
  EXPECT_EQ(found, 1) << what << " " << name;
}

std::vector<float> logits_of(GPT& m, const std::vector<int32_t>& ids) {
  NoGradGuard ng;
  const Tensor t = m.forward(ids, 1, static_cast<int64_t>(ids.size())).contiguous();
  return std::vector<float>(t.data(), t.data() + t.numel());
}

// f with metadata `key` set to v, written to `path`: the message load_gguf gives for it.
std::string load_error_with(const io::GgufFile& f, const std::string& key, const io::GgufValue& v,
                            const std::string& path) {
  io::GgufWriter out;
  for (const auto& [k, val] : f.metadata) out.add(k, k == key ? v : val);
  for (const io::GgufTensorInfo& t : f.tensors) out.add_tensor(t.name, t.shape, t.type, f.tensor_f32(t.name));
  out.write(path);
  return error_of([&] { load_gguf(path); });
}

TEST(GgufModel, F32ExportReadsBackBitExact) {
  test::TempDir dir;
  for (bool tie : {true, false}) {
    LoadedModel lm = random_model("emma\nolivia\nzoë\n", true, nn::Activation::GELU, tie);
    const std::string path = dir / "m.gguf";
    export_gguf(lm, path, io::GgmlType::F32);
    LoadedModel back = load_gguf(path);
    EXPECT_EQ(back.config.gpt.activation, nn::Activation::GELU);  // atto.ffn: the form it trained with
    EXPECT_EQ(back.config.gpt.tie_weights, tie);
    EXPECT_EQ(back.tokenizer->to_json(), lm.tokenizer->to_json());
    const std::vector<int32_t> ids = lm.tokenizer->encode("zoëem");
    EXPECT_EQ(logits_of(*back.model, ids), logits_of(*lm.model, ids));
    // load_run takes a GGUF file too (atto sample|score|eval --model m.gguf).
    EXPECT_EQ(load_run(path).model->num_parameters(), lm.model->num_parameters());
  }
}

// A byte-level BPE model: the vocabulary and merges go to llama.cpp's gpt2 tokenizer keys as they
// are, and come back as the same tokenizer (stream and lines mode: <|endoftext|> a control token).
TEST(GgufModel, BpeVocabularyReadsBackTheSameTokenizer) {
  test::TempDir dir;
  for (bool eot : {false, true}) {
    LoadedModel lm = random_model("abc\n", false);
    const std::string_view texts[] = {"the cat sat on the mat, the cat ate. 123 123 \xE2\x82\xAC\xE2\x82\xAC"};
    auto bpe = std::make_shared<BpeTokenizer>(
        BpeTokenizer::train(texts, {.vocab_size = 280, .min_frequency = 2, .end_of_text = eot}));
    lm.tokenizer = bpe;
    lm.config.gpt.vocab_size = bpe->vocab_size();
    Rng rng(3);
    lm.model = std::make_unique<GPT>(lm.config.gpt, rng);
    export_gguf(lm, dir / "bpe.gguf", io::GgmlType::F32);
    LoadedModel back = load_gguf(dir / "bpe.gguf");
    EXPECT_STREQ(back.tokenizer->kind(), "bpe");
    EXPECT_EQ(back.tokenizer->to_json(), bpe->to_json());
    EXPECT_EQ(back.tokenizer->boundary_id(), bpe->boundary_id());
    const std::vector<int32_t> ids = bpe->encode("the mat ate 123 \xE2\x82\xAC");
    EXPECT_EQ(logits_of(*back.model, ids), logits_of(*lm.model, ids));
  }
}

TEST(GgufModel, HalfAndQ8StayClose) {
  test::TempDir dir;
  LoadedModel lm = random_model("abcdefgh\n", false, nn::Activation::GELUTanh, true, false);
  const std::vector<int32_t> ids = lm.tokenizer->encode("abcabc");
  const std::vector<float> ref = logits_of(*lm.model, ids);
  // q4_0 (every matrix: d_model 32 fills its blocks): 4 bits a weight move these logits by up to
  // 0.037 (measured; f16 1e-4, q8_0 1.6e-3); the bound is 3x that.
  for (auto [type, tol] :
       {std::pair{io::GgmlType::F16, 2e-3}, std::pair{io::GgmlType::Q8_0, 2e-2}, std::pair{io::GgmlType::Q4_0, 0.11}}) {
    export_gguf(lm, dir / "m.gguf", type);
    LoadedModel back = load_gguf(dir / "m.gguf");
    EXPECT_FALSE(back.tokenizer->has_boundary());
    const std::vector<float> got = logits_of(*back.model, ids);
    double worst = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_NEAR(got[i], ref[i], tol) << io::to_string(type) << " " << i;
      worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - ref[i]));
    }
    std::printf("%s: max |logit - f32 logit| = %.3g\n", io::to_string(type), worst);
    EXPECT_GT(worst, 0.0) << io::to_string(type) << " changed nothing";
  }
  // The file says what it holds: llama.cpp's MOSTLY_Q4_0, the matrices q4_0, the norms f32.
  const io::GgufFile f = io::read_gguf(dir / "m.gguf");
  EXPECT_EQ(f.get("general.file_type").as_uint("file type"), 2u);
  EXPECT_EQ(f.find("blk.0.attn_qkv.weight")->type, io::GgmlType::Q4_0);
  EXPECT_EQ(f.find("blk.0.attn_norm.weight")->type, io::GgmlType::F32);
}

TEST(GgufModel, EveryCharacterIsOneByteLevelToken) {
  for (char32_t c : {U'a', U' ', U'\n', U'\t', U'Ġ', U'é', U'ß', U'€', U'😀', U'\u00a0', U'\x7f'}) {
    const std::string s = byte_level_string(c);
    EXPECT_EQ(char_of_byte_level(s), c) << utf8::describe(c);
    for (char32_t cp : utf8::decode(s)) EXPECT_TRUE(cp > 32 && cp != 127) << "printable symbols only";
  }
  EXPECT_EQ(byte_level_string(U' '), "Ġ");  // GPT-2's space
  EXPECT_EQ(byte_level_string(U'\n'), "Ċ");
  EXPECT_THAT(error_of([] { char_of_byte_level("ab"); }), HasSubstr("stands for 2 characters"));
}

// llama's layout (RMSNorm, SwiGLU, RoPE, no bias) exports as llama.cpp's llama architecture, with
// c_attn split into attn_q, attn_k, attn_v and gathered again on the way back.
// The llama layout (RMSNorm, SwiGLU, RoPE, no biases); kv_heads < 4: grouped-query attention.
LoadedModel llama_model(int64_t kv_heads, float rope_base) {
  LoadedModel lm = random_model("emma\nolivia\nzoë\n", true, nn::Activation::SwiGLU, false, false);
  GPTConfig c = lm.config.gpt;
  c.norm = nn::NormKind::RMSNorm;
  c.pos = PosKind::Rope;
  c.d_ff = 48;
  c.n_kv_heads = kv_heads == c.n_heads ? 0 : kv_heads;
  c.rope_base = rope_base;
  Rng rng(3);
  lm.config.gpt = c;
  lm.model = std::make_unique<GPT>(c, rng);
  lm.model->eval();
  return lm;
}

TEST(GgufModel, LlamaLayoutExportsAsLlama) {
  test::TempDir dir;
  for (const auto& [kv, base] : {std::pair<int64_t, float>{4, 10000.0f}, {2, 500000.0f}}) {
    LoadedModel lm = llama_model(kv, base);
    export_gguf(lm, dir / "l.gguf", io::GgmlType::F32);
    const io::GgufFile f = io::read_gguf(dir / "l.gguf");
    EXPECT_EQ(f.get("general.architecture").text, "llama");
    EXPECT_EQ(f.get("llama.rope.dimension_count").as_uint("dims"), 8u);
    EXPECT_EQ(f.get("llama.attention.head_count_kv").as_uint("kv"), static_cast<uint64_t>(kv));
    EXPECT_EQ(f.get("llama.rope.freq_base").as_number("base"), base);
    EXPECT_EQ(f.find("blk.1.attn_q.weight")->shape, (std::vector<int64_t>{32, 32}));
    EXPECT_EQ(f.find("blk.1.attn_k.weight")->shape, (std::vector<int64_t>{8 * kv, 32}));
    EXPECT_EQ(f.find("blk.1.attn_v.weight")->shape, (std::vector<int64_t>{8 * kv, 32}));
    EXPECT_EQ(f.find("position_embd.weight"), nullptr);
    LoadedModel back = load_gguf(dir / "l.gguf");
    EXPECT_EQ(back.config.gpt.pos, PosKind::Rope);
    EXPECT_EQ(back.config.gpt.kv_heads(), kv);
    EXPECT_EQ(back.config.gpt.rope_base, base);
    const std::vector<int32_t> ids = lm.tokenizer->encode("zoëem");
    EXPECT_EQ(logits_of(*back.model, ids), logits_of(*lm.model, ids));
  }
}

// WeightStorage::Quantized (atto sample|score|eval|serve): the q8_0 and q4_0 matrices of the linear
// layers and the token embedding stay quantized rows and the model computes on them (the integer
// kernels; q5_0 ones as q8_0 rows of exactly their values, q4_1 and q5_1 ones as U8M rows); what
// has no such rows (norms, biases, learned positions, a matrix whose rows do not fill 32-value
// blocks and so was stored as f16) is floats as before. Nothing can train on them.
TEST(GgufModel, QuantizedWeightsStayQuantizedAndComputeClose) {
  test::TempDir dir;
  for (const bool llama : {false, true}) {
    LoadedModel lm = llama ? llama_model(2, 10000.0f) : random_model("abcdefgh\n", false);
    const std::vector<int32_t> ids = lm.tokenizer->encode(llama ? "emmazoë" : "abcabcd");
    for (auto [type, tol] : {std::pair{io::GgmlType::Q8_0, 0.01}, std::pair{io::GgmlType::Q4_0, 0.01},
                             std::pair{io::GgmlType::Q5_0, 0.01}, std::pair{io::GgmlType::Q4_1, 0.01},
                             std::pair{io::GgmlType::Q5_1, 0.01}}) {
      const uint32_t kept = io::integer_type_for(type);  // q5_0: q8_0; q4_1, q5_1: U8M
      EXPECT_EQ(kept, type == io::GgmlType::Q5_0                                 ? 8u
                      : type == io::GgmlType::Q4_1 || type == io::GgmlType::Q5_1 ? 256u
                                                                                 : static_cast<uint32_t>(type));
      const std::string what = fmt::format("{} {}", llama ? "llama" : "gpt2", io::to_string(type));
      export_gguf(lm, dir / "m.gguf", type);
      LoadedModel floats = load_gguf(dir / "m.gguf");
      LoadedModel quant = load_gguf(dir / "m.gguf", WeightStorage::Quantized);
      int64_t quantized_bytes = 0, float_bytes = 0;
      for (const auto& [name, t] : quant.model->state_dict()) {
        const bool matrix = t.ndim() == 2 && name != "transformer.wpe.weight" && t.size(1) % 32 == 0;
        EXPECT_EQ(t.quantized() != nullptr, matrix) << what << " " << name;
        if (const QuantizedData* q = t.quantized()) {
          EXPECT_EQ(q->type, static_cast<int>(kept)) << name;
          quantized_bytes += static_cast<int64_t>(q->bytes.size());
          float_bytes += t.numel() * 4;
          // The rows hold exactly the file's values (q5_0's too, as q8_0 blocks).
          expect_same_values(t, *floats.model, name, what);
        }
      }
      EXPECT_GT(quantized_bytes, 0) << what;
      EXPECT_LE(quantized_bytes, float_bytes * (kept == 8 ? 34 : kept == 256 ? 36 : 18) / 128) << what;
      // Close to the same file's weights as floats (measured 1.6-2.3e-3): the activations are rounded to int8 per
      // block of 32 too (as llama.cpp does), so q8_0 is not the float result.
      const std::vector<float> want = logits_of(*floats.model, ids), got = logits_of(*quant.model, ids);
      double worst = 0;
      for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
      EXPECT_LT(worst, tol) << what;
      EXPECT_GT(worst, 0.0) << what << ": computed on floats";
      std::printf("%s: max |logit(integer kernels) - logit(floats)| = %.3g\n", what.c_str(), worst);
      // The loss the chunked head computes on the quantized head is the logits' cross-entropy.
      {
        NoGradGuard ng;
        std::vector<int32_t> x(ids.begin(), ids.end() - 1), y(ids.begin() + 1, ids.end());
        const int64_t T = static_cast<int64_t>(x.size());
        const float fused = quant.model->loss(x, y, 1, T).item();
        const float plain = cross_entropy(quant.model->forward(x, 1, T), y).item();
        EXPECT_NEAR(fused, plain, 1e-5f) << what;
      }
      // Training on quantized rows is refused, naming why; so is reading them as floats.
      EXPECT_THAT(error_of([&] { quant.model->forward(ids, 1, static_cast<int64_t>(ids.size())); }),
                  HasSubstr("serve inference only"))
          << what;
      const Tensor w = quant.model->named_parameters()[0].tensor;
      EXPECT_THAT(error_of([&] { (void)w.data(); }), HasSubstr("holds quantized weights")) << what;
      // A block whose scale (or, q4_1 and q5_1, its min) is not finite is refused by name.
      const bool with_min = type == io::GgmlType::Q4_1 || type == io::GgmlType::Q5_1;
      const io::GgufFile f = io::read_gguf(dir / "m.gguf");
      const io::GgufTensorInfo* t = f.find("token_embd.weight");
      ASSERT_EQ(t->type, type) << what;
      std::string bytes = io::read_file(dir / "m.gguf");
      const uint16_t inf = 0x7C00;
      const uint64_t block = io::ggml_nbytes(type, 32);
      std::memcpy(bytes.data() + f.data_start_ + t->offset + block + (with_min ? 2 : 0), &inf, 2);  // block 1's
      {
        std::ofstream out(dir / "bad.gguf", std::ios::binary);
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      }
      EXPECT_THAT(error_of([&] { load_gguf(dir / "bad.gguf", WeightStorage::Quantized); }),
                  HasSubstr(fmt::format("token_embd.weight holds a non-finite block {} (inf in block 1)",
                                        with_min ? "min scale" : "scale")))
          << what;
    }
  }
}

// The file `in` written again to `path` with general.file_type `file_type` and each tensor's type
// and bytes as retype(tensor, bytes) leaves them; how many it changed.
template <class Retype>
int write_retyped(const std::string& path, const io::GgufFile& in, uint32_t file_type, const Retype& retype) {
  io::GgufWriter w;
  for (const std::string& k : in.keys)
    w.add(k, k == "general.file_type" ? io::GgufValue::u32(file_type) : in.metadata.at(k));
  int changed = 0;
  for (const io::GgufTensorInfo& t : in.tensors) {
    std::string bytes = in.tensor_bytes(t);
    const io::GgmlType type = retype(t, bytes);
    w.add_tensor_bytes(t.name, t.shape, type, bytes);
    changed += type != t.type ? 1 : 0;
  }
  std::ofstream out(path, std::ios::binary);
  const std::string bytes = w.bytes();
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return changed;
}

// The file at path read both ways: every quantized matrix kept as `kept` blocks of exactly the
// file's values, at least `matrices` of them, and the logits of ids within `bound` of the floats'.
void expect_kept_exactly_and_close(const std::string& path, int kept, int matrices, const std::vector<int32_t>& ids,
                                   double bound, const std::string& what) {
  LoadedModel floats = load_gguf(path);
  LoadedModel quant = load_gguf(path, WeightStorage::Quantized);
  int found = 0;
  for (const auto& [name, t] : quant.model->state_dict())
    if (const QuantizedData* q = t.quantized()) {
      EXPECT_EQ(q->type, kept) << what << " " << name;
      expect_same_values(t, *floats.model, name, what);
      found++;
    }
  EXPECT_GE(found, matrices) << what;
  const std::vector<float> want = logits_of(*floats.model, ids), got = logits_of(*quant.model, ids);
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
  std::printf("%s: max |logit(integer kernels) - logit(floats)| = %.3g\n", what.c_str(), worst);
  EXPECT_LT(worst, bound) << what;
  EXPECT_GT(worst, 0.0) << what << ": computed on floats";
}

// An iq4_nl file (llama.cpp's fallback for Q3_K in models whose widths are not multiples of 256;
// here a q4_0 file's blocks read as iq4_nl, whose block is laid out as q4_0's with non-linear
// levels, d / 16): every matrix stays quantized as q8_0 blocks of exactly its values and computes
// on the integer kernels, close to the same file read as floats. An iq4_xs file (random
// super-blocks for a d_model 256 model's matrices): as Q8F blocks, likewise.
TEST(GgufModel, NonLinearWeightsComputeAsIntegers) {
  test::TempDir dir;
  LoadedModel lm = llama_model(2, 10000.0f);
  export_gguf(lm, dir / "q4.gguf", io::GgmlType::Q4_0);
  const int nl = write_retyped(dir / "nl.gguf", io::read_gguf(dir / "q4.gguf"), 25,
                               [](const io::GgufTensorInfo& t, std::string& bytes) {
                                 if (t.type != io::GgmlType::Q4_0) return t.type;
                                 for (size_t at = 0; at < bytes.size(); at += 18) {  // d / 16
                                   uint16_t h;
                                   std::memcpy(&h, bytes.data() + at, 2);
                                   h = io::f32_to_f16(io::f16_to_f32(h) / 16);
                                   std::memcpy(bytes.data() + at, &h, 2);
                                 }
                                 return io::GgmlType::IQ4_NL;
                               });
  EXPECT_GE(nl, 5);
  expect_kept_exactly_and_close(dir / "nl.gguf", 8, 5, lm.tokenizer->encode("emmazoë"), 0.01, "iq4_nl");
  LoadedModel big = random_model("abcdefgh\n", false);
  big.config.gpt.d_model = 256, big.config.gpt.n_layers = 1;
  Rng rng(5);
  big.model = std::make_unique<GPT>(big.config.gpt, rng);
  export_gguf(big, dir / "f32.gguf", io::GgmlType::F32);
  std::mt19937 gen(7);
  const int xs = write_retyped(dir / "xs.gguf", io::read_gguf(dir / "f32.gguf"), 30,
                               [&](const io::GgufTensorInfo& t, std::string& bytes) {
                                 if (t.shape.size() != 2 || t.name == "position_embd.weight") return t.type;
                                 bytes.assign(io::ggml_nbytes(io::GgmlType::IQ4_XS, t.numel()), '\0');
                                 for (size_t at = 0; at < bytes.size(); at++) bytes[at] = static_cast<char>(gen());
                                 for (size_t at = 0; at < bytes.size(); at += 136) {
                                   const uint16_t d = 0x0100;  // 2^-16 (subnormal): values up to 0.062
                                   std::memcpy(bytes.data() + at, &d, 2);
                                 }
                                 return io::GgmlType::IQ4_XS;
                               });
  EXPECT_GE(xs, 5);
  // (measured 7.8e-3; the super-block types' bound below, which q4_k's 8.8e-3 meets)
  expect_kept_exactly_and_close(dir / "xs.gguf", 257, 5, big.tokenizer->encode("abcabcd"), 0.02, "iq4_xs");
}

// A Q3_K, Q4_K, Q5_K or Q6_K file (atto quantize --type q3_k|q4_k|q5_k|q6_k) of a model whose
// matrices have rows of 256 values: every matrix stays rows of that type (Q3_K's as Q6_K rows of
// exactly its values) and computes on the integer kernels (as q4_0 does above), close to the same
// file read as floats (Q5_K closer than Q4_K, Q6_K closer still, Q3_K furthest).
TEST(GgufModel, SuperBlockWeightsStayQuantizedAndComputeClose) {
  test::TempDir dir;
  LoadedModel lm = random_model("abcdefgh\n", false);
  lm.config.gpt.d_model = 256, lm.config.gpt.n_layers = 1;
  Rng rng(5);
  lm.model = std::make_unique<GPT>(lm.config.gpt, rng);
  lm.model->eval();
  const std::vector<int32_t> ids = lm.tokenizer->encode("abcabcd");
  const std::vector<float> original = logits_of(*lm.model, ids);
  double file_error[4] = {0, 0, 0, 0};  // the file's weights (as floats) against the model's: Q4_K, Q5_K, Q6_K, Q3_K
  for (const io::GgmlType type : {io::GgmlType::Q4_K, io::GgmlType::Q5_K, io::GgmlType::Q6_K, io::GgmlType::Q3_K}) {
    const bool k6 = type == io::GgmlType::Q6_K || type == io::GgmlType::Q3_K;  // d last, no dmin
    const io::GgmlType kept = type == io::GgmlType::Q3_K ? io::GgmlType::Q6_K : type;
    const int which = type == io::GgmlType::Q4_K ? 0 : type == io::GgmlType::Q5_K ? 1 : type == io::GgmlType::Q6_K ? 2 : 3;
    const int64_t sb = static_cast<int64_t>(io::ggml_nbytes(type, 256)), kept_sb = io::ggml_nbytes(kept, 256);
    const std::string name_of = io::to_string(type), file = dir / (name_of + ".gguf");
    export_gguf(lm, file, type);
    LoadedModel floats = load_gguf(file);
    LoadedModel quant = load_gguf(file, WeightStorage::Quantized);
    int matrices = 0;
    for (const auto& [name, t] : quant.model->state_dict()) {
      const bool matrix = t.ndim() == 2 && name != "transformer.wpe.weight";
      EXPECT_EQ(t.quantized() != nullptr, matrix) << name_of << " " << name;
      if (const QuantizedData* q = t.quantized()) {
        EXPECT_EQ(q->type, static_cast<int>(kept)) << name;
        EXPECT_EQ(static_cast<int64_t>(q->bytes.size()), t.numel() / 256 * kept_sb) << name;
        // Regrouped for the column-a-lane kernels where the level has them (x86).
        const auto want_layout = kernels::quant_layout_for(static_cast<kernels::QuantType>(kept));
        EXPECT_EQ(q->layout, static_cast<int>(want_layout)) << name;
#if defined(__x86_64__)
        EXPECT_EQ(want_layout, kernels::QuantLayout::Lanes16);
#endif
        // The rows hold exactly the file's values (Q3_K's too, as Q6_K super-blocks).
        expect_same_values(t, *floats.model, name, name_of);
        matrices++;
      }
    }
    EXPECT_GE(matrices, 5) << name_of;  // the embedding (tied head), attention's two, the MLP's two
    const std::vector<float> want = logits_of(*floats.model, ids), got = logits_of(*quant.model, ids);
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
      file_error[which] = std::max(file_error[which], std::fabs(double(want[i]) - original[i]));
    }
    EXPECT_LT(worst, 0.02) << name_of;
    EXPECT_GT(worst, 0.0) << name_of << ": computed on floats";
    std::printf("%s: max |logit(integer kernels) - logit(floats)| = %.3g\n", name_of.c_str(), worst);
    // A super-block whose dmin (Q4_K, Q5_K) or d (Q6_K) is not finite is refused by name, as a
    // block's scale is.
    const io::GgufFile f = io::read_gguf(file);
    const io::GgufTensorInfo* t = f.find("blk.0.ffn_down.weight");
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->type, type);
    std::string bytes = io::read_file(file);
    const uint16_t inf = 0x7C00;
    std::memcpy(bytes.data() + f.data_start_ + t->offset + sb + (k6 ? sb - 2 : 2), &inf, 2);  // super-block 1's
    {
      std::ofstream out(dir / "bad.gguf", std::ios::binary);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    EXPECT_THAT(error_of([&] { load_gguf(dir / "bad.gguf", WeightStorage::Quantized); }),
                HasSubstr(fmt::format("blk.0.ffn_down.weight holds a non-finite block {} (inf in block 1)",
                                      k6 ? "scale" : "min scale")));
  }
  // llama.cpp's Q4_K_M mix: a 1-layer gpt2 model's tied head Q6_K, its fused attention Q5_K, its
  // ffn_down Q6_K (layer 0 of 1), the other two Q4_K, the learned positions f32. Its Q3_K_M mix: the
  // head Q6_K, attention's two and ffn_down Q4_K, ffn_up Q3_K. Every matrix computes on its own type.
  using T = io::GgmlType;
  struct Mix {
    T base, qkv, output, down, up;
    uint64_t file_type;
  };
  for (const Mix& mix : {Mix{T::Q4_K, T::Q5_K, T::Q4_K, T::Q6_K, T::Q4_K, 15}, Mix{T::Q3_K, T::Q4_K, T::Q4_K, T::Q4_K, T::Q3_K, 12}}) {
    const std::string what = io::to_string(io::QuantRecipe::k_mix(mix.base));
    export_gguf(lm, dir / "m.gguf", io::QuantRecipe::k_mix(mix.base));
    const io::GgufFile f = io::read_gguf(dir / "m.gguf");
    EXPECT_EQ(f.get("general.file_type").as_uint("file type"), mix.file_type) << what;
    EXPECT_EQ(f.find("position_embd.weight")->type, T::F32) << what;
    EXPECT_EQ(f.find("token_embd.weight")->type, T::Q6_K) << what;
    EXPECT_EQ(f.find("blk.0.attn_qkv.weight")->type, mix.qkv) << what;
    EXPECT_EQ(f.find("blk.0.attn_output.weight")->type, mix.output) << what;
    EXPECT_EQ(f.find("blk.0.ffn_down.weight")->type, mix.down) << what;
    EXPECT_EQ(f.find("blk.0.ffn_up.weight")->type, mix.up) << what;
    LoadedModel floats = load_gguf(dir / "m.gguf");
    LoadedModel quant = load_gguf(dir / "m.gguf", WeightStorage::Quantized);
    for (const auto& [name, t] : quant.model->state_dict())
      EXPECT_EQ(t.quantized() != nullptr, t.ndim() == 2 && name != "transformer.wpe.weight") << what << " " << name;
    const std::vector<float> want = logits_of(*floats.model, ids), got = logits_of(*quant.model, ids);
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
    EXPECT_LT(worst, 0.02) << what;
  }
  // Q5_K's weights are 2x finer than Q4_K's, Q6_K's 4x: their files move the logits less.
  std::printf("file against the model: q3_k %.3g, q4_k %.3g, q5_k %.3g, q6_k %.3g\n", file_error[3], file_error[0],
              file_error[1], file_error[2]);
  EXPECT_LT(file_error[1], file_error[0]);
  EXPECT_LT(file_error[2], file_error[0] / 2);
  EXPECT_GT(file_error[3], file_error[0]);
}

// A llama file whose attention keys disagree with its tensors, or name what atto cannot run.
TEST(GgufModel, DamagedLlamaAttentionKeysAreNamed) {
  test::TempDir dir;
  export_gguf(llama_model(2, 10000.0f), dir / "ok.gguf", io::GgmlType::F32);
  const io::GgufFile f = io::read_gguf(dir / "ok.gguf");
  auto rewrite = [&](const std::string& key, io::GgufValue v) { return load_error_with(f, key, v, dir / "bad.gguf"); };
  EXPECT_THAT(rewrite("llama.attention.head_count_kv", io::GgufValue::u32(3)),
              HasSubstr("llama.attention.head_count_kv is 3: it must divide llama.attention.head_count (4)"));
  EXPECT_THAT(rewrite("llama.attention.head_count_kv", io::GgufValue::u32(0)), HasSubstr("head_count_kv is 0"));
  EXPECT_THAT(rewrite("llama.attention.head_count_kv", io::GgufValue::u32(1)),
              HasSubstr("blk.0.attn_k.weight has 16 rows; the file's hyperparameters say 8"));
  EXPECT_THAT(rewrite("llama.rope.dimension_count", io::GgufValue::u32(4)),
              HasSubstr("llama.rope.dimension_count is 4; atto rotates whole heads (8 dimensions)"));
  EXPECT_THAT(rewrite("llama.rope.freq_base", io::GgufValue::f32(-1.0f)), HasSubstr("rope_base"));
  EXPECT_THAT(rewrite("llama.attention.head_count", io::GgufValue::u32(0)), HasSubstr("head_count (0)"));
}

TEST(GgufModel, OtherLayoutsAreRefusedNamingThem) {
  test::TempDir dir;
  LoadedModel lm = random_model("abc\n", true);
  GPTConfig c = lm.config.gpt;
  c.norm = nn::NormKind::RMSNorm;
  Rng rng(1);
  LoadedModel rms;
  rms.tokenizer = lm.tokenizer;
  rms.config = lm.config;
  rms.config.gpt = c;
  rms.model = std::make_unique<GPT>(c, rng);
  const std::string msg = error_of([&] { export_gguf(rms, dir / "x.gguf", io::GgmlType::F32); });
  EXPECT_THAT(msg, HasSubstr("pre-norm, rmsnorm, gelu, learned positions"));
  EXPECT_THAT(msg, HasSubstr("neither llama.cpp's gpt2 layout"));
}

TEST(GgufModel, ForeignOrDamagedFilesAreErrors) {
  test::TempDir dir;
  LoadedModel lm = random_model("abc\n", true);
  // A file whose metadata disagrees with its tensors.
  io::GgufWriter w;
  w.add("general.architecture", io::GgufValue::string("llama"));
  w.write(dir / "llama.gguf");
  EXPECT_THAT(error_of([&] { load_gguf(dir / "llama.gguf"); }), HasSubstr("tokenizer.ggml.model"));
  export_gguf(lm, dir / "ok.gguf", io::GgmlType::F32);
  io::GgufFile f = io::read_gguf(dir / "ok.gguf");
  // Rewrite with a wrong block count and with a multi-character token.
  auto rewrite = [&](const std::string& key, io::GgufValue v) { return load_error_with(f, key, v, dir / "bad.gguf"); };
  EXPECT_THAT(rewrite("gpt2.block_count", io::GgufValue::u32(3)), HasSubstr("gpt2.block_count is 3"));
  EXPECT_THAT(rewrite("gpt2.context_length", io::GgufValue::u32(1u << 30)), HasSubstr("position_embd.weight"));
  auto tokens = f.get("tokenizer.ggml.tokens").strings;
  tokens[1] = "ab";  // no longer one character a token: read as byte-level BPE, whose checks refuse it
  EXPECT_THAT(rewrite("tokenizer.ggml.tokens", io::GgufValue::string_array(tokens)),
              HasSubstr("the tokenizer: no token for the byte"));
  EXPECT_THAT(rewrite("general.architecture", io::GgufValue::string("mamba")), HasSubstr("architecture is \"mamba\""));
}

}  // namespace
}  // namespace atto
