// The C API's inspection (atto_inspect, include/atto/atto.h "Inspection"): a tiny two-layer run
// trained through the API, its attention and residual stream checked against the library's own
// traced forward pass (GPT::Trace, what atto inspect draws), against the weights, and its errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "atto/atto.h"
#include "autograd/tape.h"
#include "run/gguf_model.h"
#include "run/run_dir.h"
#include "support.h"

namespace {

using ::testing::HasSubstr;

std::string train_run(const atto::test::TempDir& dir, const std::string& name, const std::string& config) {
  atto_train_params p = atto_train_default_params();
  p.config_json = config.c_str();
  const std::string out = dir / name;
  p.out_dir = out.c_str();
  p.n_threads = 1;
  atto_train_result r{};
  EXPECT_EQ(atto_train(&p, &r), ATTO_OK) << atto_last_error();
  return out;
}

// An open model and its context, freed at the end of the scope.
struct Opened {
  explicit Opened(const std::string& run) {
    EXPECT_EQ(atto_model_open(run.c_str(), &m), ATTO_OK) << atto_last_error();
    EXPECT_EQ(atto_context_new(m, nullptr, &c), ATTO_OK) << atto_last_error();
  }
  ~Opened() {
    atto_context_free(c);
    atto_model_free(m);
  }
  atto_model* m = nullptr;
  atto_context* c = nullptr;
};

using Inspection = std::unique_ptr<atto_inspection, void (*)(atto_inspection*)>;

class CApiInspect : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new atto::test::TempDir("inspect");
    std::string names;
    for (int i = 0; i < 40; ++i) names += "mariel\njolisa\nkateon\nanel\nsamari\nelka\njoli\nteon\n";
    data_ = dir_->write("names.txt", names);
    run_ = train_run(*dir_, "run", R"({"data": ")" + data_ + R"(", "steps": 4, "d_model": 16, "n_heads": 2,
        "n_layers": 2, "block_size": 12, "batch_size": 4, "eval_every": 4, "threads": 1})");
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static Inspection inspect(atto_context* c, const std::string& text) {
    atto_inspection* x = nullptr;
    EXPECT_EQ(atto_inspect(c, text.data(), text.size(), &x), ATTO_OK) << atto_last_error();
    return Inspection(x, atto_inspection_free);
  }
  static atto::test::TempDir* dir_;
  static std::string data_, run_;
};
atto::test::TempDir* CApiInspect::dir_ = nullptr;
std::string CApiInspect::data_, CApiInspect::run_;

std::vector<float> values(const atto::Tensor& t) { return t.contiguous().to_vector(); }

TEST_F(CApiInspect, AttentionAndResidualStreamAreTheTracedForwardPass) {
  Opened o(run_);
  const Inspection x = inspect(o.c, "mariel");
  const size_t T = atto_inspection_n_tokens(x.get());
  ASSERT_EQ(T, 7u);  // <eos> + 6 characters, as atto inspect feeds a lines-mode model
  const std::vector<int32_t> ids(atto_inspection_tokens(x.get()), atto_inspection_tokens(x.get()) + T);
  atto::LoadedModel lm = atto::load_run(run_);
  std::vector<int32_t> want_ids = {lm.tokenizer->boundary_id()};
  for (int32_t id : lm.tokenizer->encode("mariel")) want_ids.push_back(id);
  EXPECT_EQ(ids, want_ids);

  atto::NoGradGuard no_grad;
  atto::GPT::Trace trace;
  lm.model->forward(ids, 1, static_cast<int64_t>(T), &trace);
  int64_t as[4] = {}, rs[3] = {};
  const float* att = atto_inspection_attention(x.get(), as);
  const float* res = atto_inspection_residual(x.get(), rs);
  const auto t = static_cast<int64_t>(T);
  ASSERT_EQ(std::vector<int64_t>(as, as + 4), (std::vector<int64_t>{2, 2, t, t}));
  ASSERT_EQ(std::vector<int64_t>(rs, rs + 3), (std::vector<int64_t>{3, t, 16}));
  const size_t layer_att = 2 * T * T, row = T * 16;
  for (size_t l = 0; l < 2; ++l)  // the same bits as the trace, layer after layer
    EXPECT_EQ(std::vector<float>(att + l * layer_att, att + (l + 1) * layer_att), values(trace.blocks[l].attn_weights));
  EXPECT_EQ(std::vector<float>(res, res + row), values(trace.embeddings));
  EXPECT_EQ(std::vector<float>(res + row, res + 2 * row), values(trace.blocks[1].input));
  // The last row is the input of ln_f: through it, the final hidden state of the trace.
  const std::vector<float> last(res + 2 * row, res + 3 * row);
  const atto::Tensor normed = lm.model->transformer.ln_f->forward(atto::Tensor::from_vector({1, t, 16}, last));
  EXPECT_EQ(values(normed), values(trace.final_hidden));
  // Each attention row is a distribution over the causal prefix.
  for (size_t r = 0; r < 4 * T; ++r) {
    double sum = 0.0;
    for (size_t j = 0; j < T; ++j) {
      const float w = att[r * T + j];
      if (j > r % T) {
        EXPECT_EQ(w, 0.0f) << "row " << r << " key " << j;
      }
      sum += w;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << r;
  }
}

TEST_F(CApiInspect, EmbeddingRowIsTokenPlusPositionFromTheWeights) {
  Opened o(run_);
  const Inspection x = inspect(o.c, "joli");
  atto_weights* w = nullptr;
  ASSERT_EQ(atto_model_weights(o.m, &w), ATTO_OK);
  const float *wte = nullptr, *wpe = nullptr;
  for (size_t i = 0; i < atto_weights_count(w); ++i) {
    atto_weight e{};
    ASSERT_TRUE(atto_weights_get(w, i, &e));
    if (std::string(e.name) == "transformer.wte.weight") wte = e.data;
    if (std::string(e.name) == "transformer.wpe.weight") wpe = e.data;
  }
  ASSERT_TRUE(wte && wpe);
  const float* res = atto_inspection_residual(x.get(), nullptr);
  for (size_t p = 0; p < atto_inspection_n_tokens(x.get()); ++p)
    for (size_t k = 0; k < 16; ++k)
      EXPECT_FLOAT_EQ(res[p * 16 + k], wte[atto_inspection_tokens(x.get())[p] * 16 + k] + wpe[p * 16 + k]);
  atto_weights_free(w);
}

// A q4_0, q8_0, Q4_K or Q6_K GGUF keeps its matrices quantized when the C API opens it;
// atto_model_weights gives them dequantized, the same values as the file read as floats (and the
// other tensors as they are), instead of failing on rows that hold no floats. (Q4_K, Q6_K: a model
// of d_model 256, so that its matrices' rows fill super-blocks.)
TEST_F(CApiInspect, WeightsOfAQuantizedFileAreItsDequantizedValues) {
  const std::string run = train_run(*dir_, "run32", R"({"data": ")" + data_ + R"(", "steps": 2, "d_model": 32,
      "n_heads": 2, "n_layers": 1, "block_size": 12, "batch_size": 4, "eval_every": 2, "threads": 1})");
  const std::string run256 = train_run(*dir_, "run256", R"({"data": ")" + data_ + R"(", "steps": 1, "d_model": 256,
      "n_heads": 2, "n_layers": 1, "block_size": 12, "batch_size": 2, "eval_every": 1, "threads": 1})");
  using atto::io::GgmlType;
  for (const GgmlType type : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    const std::string gguf = *dir_ / "run32.gguf";
    const bool super = type == GgmlType::Q4_K || type == GgmlType::Q6_K;
    atto::export_gguf(atto::load_run(super ? run256 : run), gguf, type);
    const atto::LoadedModel floats = atto::load_gguf(gguf);
    std::map<std::string, std::vector<float>> want;
    for (const auto& [name, t] : floats.model->state_dict()) want[name] = values(t);
    Opened o(gguf);
    atto_weights* w = nullptr;
    ASSERT_EQ(atto_model_weights(o.m, &w), ATTO_OK) << atto_last_error();
    ASSERT_EQ(atto_weights_count(w), want.size());
    std::map<std::string, const float*> data;
    for (size_t i = 0; i < atto_weights_count(w); ++i) {
      atto_weight e{};
      ASSERT_TRUE(atto_weights_get(w, i, &e));
      ASSERT_TRUE(want.count(e.name)) << e.name;
      EXPECT_EQ(std::vector<float>(e.data, e.data + e.n_elements), want[e.name]) << e.name;
      data[e.name] = e.data;
    }
    // The tied head is the token embedding's memory under both names, as for a run's floats.
    EXPECT_EQ(data.at("lm_head.weight"), data.at("transformer.wte.weight"));
    // The traced forward pass runs on the quantized rows too.
    const Inspection x = inspect(o.c, "joli");
    EXPECT_EQ(atto_inspection_n_tokens(x.get()), 5u);
    atto_weights_free(w);
  }
}

TEST_F(CApiInspect, ErrorsNameWhatIsWrong) {
  Opened o(run_);
  atto_inspection* x = nullptr;
  EXPECT_EQ(atto_inspect(nullptr, "ma", 2, &x), ATTO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(atto_inspect(o.c, "ma", 2, nullptr), ATTO_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(atto_last_error(), HasSubstr("out"));
  EXPECT_EQ(atto_inspect(o.c, nullptr, 2, &x), ATTO_ERR_INVALID_ARGUMENT);
  const std::string fits(11, 'a'), too_long(12, 'a');  // + <eos>: 12 and 13 tokens, block size 12
  EXPECT_EQ(atto_inspect(o.c, too_long.data(), too_long.size(), &x), ATTO_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(atto_last_error(),
              HasSubstr("13 tokens with the <eos> that starts it, more than the model's block size of 12"));
  EXPECT_EQ(x, nullptr);
  EXPECT_EQ(atto_inspection_n_tokens(inspect(o.c, fits).get()), 12u);
  EXPECT_EQ(atto_inspect(o.c, "maz", 3, &x), ATTO_ERR_BAD_INPUT);
  EXPECT_THAT(atto_last_error(), HasSubstr("'z'"));
  EXPECT_EQ(atto_inspection_n_tokens(inspect(o.c, "").get()), 1u);  // lines mode: <eos> alone
  // NULL handles read as empty.
  int64_t shape[4] = {7, 7, 7, 7};
  EXPECT_EQ(atto_inspection_n_tokens(nullptr), 0u);
  EXPECT_EQ(atto_inspection_tokens(nullptr), nullptr);
  EXPECT_EQ(atto_inspection_attention(nullptr, shape), nullptr);
  EXPECT_EQ(atto_inspection_residual(nullptr, shape), nullptr);
  atto_inspection_free(nullptr);

  // A stream-mode model needs a token; a seq2seq model is refused by name.
  const std::string stream = train_run(*dir_, "stream", R"({"data": ")" + data_ + R"(", "mode": "stream",
      "steps": 1, "d_model": 16, "n_heads": 2, "n_layers": 1, "block_size": 8, "batch_size": 2, "threads": 1})");
  Opened s(stream);
  EXPECT_EQ(atto_inspect(s.c, "", 0, &x), ATTO_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(atto_last_error(), HasSubstr("the text is empty"));
  const std::string src = dir_->write("toy.src", "hello my name\nhello messi\nmy name is messi\n");
  const std::string tgt = dir_->write("toy.tgt", "hola mi nombre\nhola messi\nmi nombre es messi\n");
  const std::string s2s = train_run(
      *dir_, "s2s",
      R"({"task": "seq2seq", "src": ")" + src + R"(", "tgt": ")" + tgt +
          R"(", "tokenizer": "word", "d_model": 16, "n_heads": 2, "n_enc_layers": 1, "n_dec_layers": 1, "d_ff": 32,
          "steps": 1, "eval_bleu": 0, "threads": 1})");
  Opened q(s2s);
  EXPECT_EQ(atto_inspect(q.c, "hello", 5, &x), ATTO_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(atto_last_error(), HasSubstr("encoder-decoder"));
  EXPECT_EQ(x, nullptr);
}

}  // namespace
