// The C API (include/atto/atto.h) and its C++ wrapper (atto.hpp): a tiny run trained through the
// API, then every call checked against the library's own functions and against itself.
#include "atto/atto.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "atto/atto.hpp"
#include "generate/score.h"
#include "run/run_dir.h"
#include "support.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// A names-like corpus: syllables joined, deterministic.
std::string names_text(int n) {
  const char* syl[] = {"ma", "ri", "an", "el", "jo", "li", "sa", "on", "ka", "te"};
  uint64_t x = 7;
  std::string out;
  for (int i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const int parts = 1 + static_cast<int>((x >> 33) % 3);
    for (int j = 0; j < parts; ++j) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      out += syl[(x >> 33) % 10];
    }
    out += '\n';
  }
  return out;
}

class CApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new atto::test::TempDir();
    const std::string data = dir_->write("names.txt", names_text(300));
    config_ = R"({"data": ")" + data +
              R"(", "steps": 40, "d_model": 16, "n_heads": 2, "n_layers": 1, "batch_size": 16,
                 "eval_every": 20, "threads": 1, "lr": 0.01, "warmup": 5})";
    atto_train_params p = atto_train_default_params();
    p.config_json = config_.c_str();
    const std::string out = run_dir();
    p.out_dir = out.c_str();
    p.n_threads = 1;
    atto_train_result r{};
    ASSERT_EQ(atto_train(&p, &r), ATTO_OK) << atto_last_error();
    ASSERT_EQ(r.steps, 40);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string run_dir() { return *dir_ / "run"; }

  static atto::test::TempDir* dir_;
  static std::string config_;
};
atto::test::TempDir* CApi::dir_ = nullptr;
std::string CApi::config_;

TEST_F(CApi, OpenInfoAndErrors) {
  atto_model* m = nullptr;
  ASSERT_EQ(atto_model_open(run_dir().c_str(), &m), ATTO_OK) << atto_last_error();
  atto_model_info info{};
  ASSERT_EQ(atto_model_info_get(m, &info), ATTO_OK);
  EXPECT_EQ(info.task, ATTO_TASK_GPT);
  EXPECT_TRUE(info.lines_mode);
  EXPECT_EQ(info.eos_token, 0);
  EXPECT_EQ(info.d_model, 16);
  EXPECT_EQ(info.n_layers, 1);
  EXPECT_EQ(info.n_kv_heads, info.n_heads);  // multi-head
  EXPECT_EQ(info.rope_base, 0.0f);           // learned positions
  const atto::LoadedModel lm = atto::load_run(run_dir());
  EXPECT_EQ(info.vocab_size, lm.config.gpt.vocab_size);
  EXPECT_EQ(info.context, lm.config.gpt.block_size);
  EXPECT_EQ(info.n_params, lm.model->num_parameters());
  // A context on it; bad contexts.
  atto_context* c = reinterpret_cast<atto_context*>(0x1);
  EXPECT_EQ(atto_context_new(nullptr, nullptr, &c), ATTO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(c, nullptr);
  atto_context_params cp = atto_context_default_params();
  EXPECT_EQ(cp.n_threads, 0);
  cp.n_threads = -1;
  EXPECT_EQ(atto_context_new(m, &cp, &c), ATTO_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(atto_last_error(), HasSubstr("n_threads"));
  ASSERT_EQ(atto_context_new(m, nullptr, &c), ATTO_OK) << atto_last_error();
  EXPECT_EQ(atto_context_model(c), m);
  EXPECT_EQ(atto_context_model(nullptr), nullptr);
  EXPECT_EQ(atto_context_set_threads(c, -3), ATTO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(atto_context_set_threads(c, 1), ATTO_OK);
  // Wrong task, NULL arguments.
  atto_strings* out = nullptr;
  EXPECT_EQ(atto_translate(c, nullptr, 0, nullptr, &out), ATTO_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(atto_last_error(), HasSubstr("this model is a GPT"));
  EXPECT_EQ(atto_generate(nullptr, "", 1, nullptr, nullptr, nullptr, &out), ATTO_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(atto_last_error(), HasSubstr("the context is NULL"));
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(atto_generate(c, "", 0, nullptr, nullptr, nullptr, &out), ATTO_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(atto_last_error(), HasSubstr("n_samples must be at least 1"));
  EXPECT_EQ(atto_generate(c, "", int64_t{1} << 40, nullptr, nullptr, nullptr, &out), ATTO_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(atto_last_error(), HasSubstr("n_samples must be at most 1048576"));
  EXPECT_EQ(out, nullptr);
  atto_sample_params bad = atto_sample_default_params();
  bad.temperature = -1.0f;
  EXPECT_EQ(atto_generate(c, "", 1, &bad, nullptr, nullptr, &out), ATTO_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(atto_last_error(), HasSubstr("temperature must be > 0"));
  EXPECT_THAT(atto_last_error(), Not(HasSubstr("--")));  // the field's name, not the CLI's flag
  bad = atto_sample_default_params();
  bad.n_logit_bias = 1;  // no arrays
  EXPECT_EQ(atto_generate(c, "", 1, &bad, nullptr, nullptr, &out), ATTO_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(atto_last_error(), HasSubstr("n_logit_bias"));
  const int32_t past[] = {1 << 20};
  const float bias[] = {1.0f};
  bad.logit_bias_tokens = past;
  bad.logit_bias_values = bias;
  EXPECT_EQ(atto_generate(c, "", 1, &bad, nullptr, nullptr, &out), ATTO_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(atto_last_error(), HasSubstr("logit_bias: token id 1048576 is outside this model's vocabulary"));
  EXPECT_EQ(out, nullptr);
  atto_context_free(c);
  atto_context_free(nullptr);
  atto_model_free(m);
  atto_model_free(nullptr);
  EXPECT_STREQ(atto_status_name(ATTO_ERR_BAD_INPUT), "ATTO_ERR_BAD_INPUT");
  EXPECT_EQ(atto::version(), std::to_string(ATTO_VERSION_MAJOR) + "." + std::to_string(ATTO_VERSION_MINOR) + "." +
                                 std::to_string(ATTO_VERSION_PATCH));
}

// The C++ parameter structs start from the C API's defaults, which are atto sample's.
TEST(CppApi, ParameterDefaultsAreTheCApis) {
  const atto_sample_params c = atto_sample_default_params();
  const atto::SampleParams p;
  EXPECT_EQ(std::tie(p.temperature, p.top_k, p.top_p, p.min_p, p.repetition_penalty, p.repetition_last_n, p.greedy,
                     p.seed, p.max_tokens, p.frequency_penalty, p.presence_penalty),
            std::tie(c.temperature, c.top_k, c.top_p, c.min_p, c.repetition_penalty, c.repetition_last_n, c.greedy,
                     c.seed, c.max_tokens, c.frequency_penalty, c.presence_penalty));
  EXPECT_EQ(c.n_logit_bias, 0u);
  EXPECT_TRUE(p.logit_bias.empty());
  EXPECT_EQ(p.seed, 1337u);  // atto sample --seed's default (its --help says so)
  const atto_translate_params ct = atto_translate_default_params();
  const atto::TranslateParams t;
  EXPECT_EQ(std::tie(t.beam, t.n_best, t.length_penalty, t.max_len_a, t.max_len_b),
            std::tie(ct.beam, ct.n_best, ct.length_penalty, ct.max_len_a, ct.max_len_b));
  const atto_train_params cr = atto_train_default_params();
  const atto::TrainParams r;
  EXPECT_EQ(std::tie(r.resume, r.force, r.n_threads), std::tie(cr.resume, cr.force, cr.n_threads));
}

TEST_F(CApi, BrokenRunDirectoriesAreErrorsNamingTheFile) {
  atto_model* m = reinterpret_cast<atto_model*>(0x1);
  EXPECT_EQ(atto_model_open((*dir_ / "nowhere").c_str(), &m), ATTO_ERR_BAD_INPUT);
  EXPECT_EQ(m, nullptr);
  EXPECT_THAT(atto_last_error(), HasSubstr("nowhere"));
  // A copy of the run with a damaged config.json, then with truncated weights.
  const std::string broken = *dir_ / "broken";
  std::filesystem::copy(run_dir(), broken, std::filesystem::copy_options::recursive);
  std::ofstream(broken + "/config.json") << "{\"format_version\": 1, \"model\": ";
  EXPECT_EQ(atto_model_open(broken.c_str(), &m), ATTO_ERR_BAD_INPUT);
  EXPECT_THAT(atto_last_error(), HasSubstr("config.json"));
  std::filesystem::copy_file(run_dir() + "/config.json", broken + "/config.json",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(broken + "/model.safetensors", 100);
  EXPECT_EQ(atto_model_open(broken.c_str(), &m), ATTO_ERR_BAD_INPUT);
  EXPECT_THAT(atto_last_error(), HasSubstr("model.safetensors"));
  EXPECT_THROW(atto::Model{broken}, atto::Exception);
}

TEST_F(CApi, TokenizeRoundTripsAndReportsTheBufferSize) {
  atto::Model m(run_dir());
  const std::vector<int32_t> ids = m.tokenize("mariel");
  EXPECT_EQ(ids.size(), 6u);
  EXPECT_EQ(m.detokenize(ids), "mariel");
  int32_t small[2];
  size_t n = 0;
  EXPECT_EQ(atto_tokenize(m.handle(), ATTO_VOCAB_GPT, "mariel", 6, small, 2, &n), ATTO_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, 6u);
  char text[4];
  size_t len = 0;
  EXPECT_EQ(atto_detokenize(m.handle(), ATTO_VOCAB_GPT, ids.data(), ids.size(), text, sizeof text, &len),
            ATTO_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(len, 6u);
  EXPECT_EQ(atto_tokenize(m.handle(), ATTO_VOCAB_GPT, "maxz", 4, nullptr, 0, &n), ATTO_ERR_BAD_INPUT);
  EXPECT_THAT(atto_last_error(), HasSubstr("'x'"));
  const int32_t out_of_range[] = {1000};
  EXPECT_EQ(atto_detokenize(m.handle(), ATTO_VOCAB_GPT, out_of_range, 1, text, sizeof text, &len),
            ATTO_ERR_INVALID_ARGUMENT);
}

TEST_F(CApi, ScoresMatchTheLibraryAndTheLogits) {
  atto::Model m(run_dir());
  const atto::Scores s = m.score("mariel");
  atto::LoadedModel lm = atto::load_run(run_dir());
  const atto::gen::ScoreResult ref = atto::gen::score_text(*lm.model, *lm.tokenizer, "mariel");
  ASSERT_EQ(s.tokens, ref.targets);
  ASSERT_EQ(s.logprobs, ref.logprobs);
  EXPECT_DOUBLE_EQ(s.total_nll, ref.total_nll());
  // The first target is predicted from <eos> alone: log_softmax of atto_logits([<eos>]).
  const std::vector<float> logits = m.logits(std::vector<int32_t>{0});
  double z = 0.0;
  for (float v : logits) z += std::exp(static_cast<double>(v));
  EXPECT_NEAR(std::log(std::exp(static_cast<double>(logits[s.tokens[0]])) / z), s.logprobs[0], 1e-4);
  float few[2];
  const int32_t ctx[] = {0};
  EXPECT_EQ(atto_logits(m.context().handle(), ctx, 1, few, 2), ATTO_ERR_BUFFER_TOO_SMALL);
}

TEST_F(CApi, GenerateIsReproducibleAndStreams) {
  atto::Model m(run_dir());
  atto::SampleParams p;
  p.seed = 42;
  const std::vector<std::string> a = m.generate("", 12, p);
  ASSERT_EQ(a.size(), 12u);
  EXPECT_EQ(m.generate("", 12, p), a);  // same seed, same samples
  p.seed = 43;
  EXPECT_NE(m.generate("", 12, p), a);
  // The pieces streamed for each sample add up to its text.
  p.seed = 42;
  std::vector<std::string> streamed(12);
  const auto b = m.generate("", 12, p, [&](int64_t i, std::string_view piece, int32_t) {
    streamed[static_cast<size_t>(i)] += piece;
    return true;
  });
  EXPECT_EQ(b, a);
  EXPECT_EQ(streamed, a);
  // With a prompt every sample starts with it.
  for (const std::string& s : m.generate("ma", 5, p)) EXPECT_THAT(s, StartsWith("ma"));
}

TEST_F(CApi, StopStringsAndCallbacksEndASample) {
  atto::Model m(run_dir());
  atto::SampleParams p;
  p.seed = 5;
  p.max_tokens = 40;
  // One sample: its draws do not depend on when it ends, so the stopped text is a prefix.
  const std::string full = m.generate("", 1, p)[0];
  ASSERT_GE(full.size(), 2u);
  const std::string stop(1, full[1]);
  p.stop = {stop};
  const std::string cut = m.generate("", 1, p)[0];
  EXPECT_EQ(cut, full.substr(0, full.find(stop)));
  // A callback that returns false after the second piece ends the sample there.
  p.stop.clear();
  int calls = 0;
  const std::string two = m.generate("", 1, p, [&](int64_t, std::string_view, int32_t) { return ++calls < 2; })[0];
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(two, full.substr(0, 2));
}

// One model (weights loaded once), three contexts with 1, 2 and 1 kernel threads, used from three
// threads at once while a fourth tokenizes through the model: the same results as one at a time.
TEST_F(CApi, ContextsOnOneModelRunOnThreadsAtOnceWithTheResultsOfOneAtATime) {
  atto::SampleParams p;
  p.seed = 9;
  const atto::Model m(run_dir());
  atto::Context c1 = m.new_context(1), c2 = m.new_context(2), c3 = m.new_context(1);
  const auto ref_a = c1.generate("", 16, p);
  const auto ref_s = c2.score("jolie").logprobs;
  atto::SampleParams q = p;
  q.seed = 10;
  q.temperature = 0.7f;
  const auto ref_b = c3.generate("ma", 8, q);
  const auto ref_ids = m.tokenize("mariel");
  std::vector<std::string> got_a, got_b;
  std::vector<double> got_s;
  std::vector<int32_t> got_ids;
  for (int round = 0; round < 3; ++round) {
    std::thread t1([&] { got_a = c1.generate("", 16, p); });
    std::thread t2([&] { got_s = c2.score("jolie").logprobs; });
    std::thread t3([&] { got_b = c3.generate("ma", 8, q); });
    std::thread t4([&] { got_ids = m.tokenize("mariel"); });
    t1.join();
    t2.join();
    t3.join();
    t4.join();
    EXPECT_EQ(got_a, ref_a);
    EXPECT_EQ(got_s, ref_s);
    EXPECT_EQ(got_b, ref_b);
    EXPECT_EQ(got_ids, ref_ids);
  }
  // A second model of the same run gives the same samples (nothing of the first leaks into it).
  atto::Model m2(run_dir());
  m2.set_threads(2);
  EXPECT_EQ(m2.generate("", 16, p), ref_a);
}

TEST_F(CApi, TrainingStopsFromTheCallbackAndResumes) {
  const std::string out = *dir_ / "stopped";
  atto_train_params p = atto_train_default_params();
  p.config_json = config_.c_str();
  p.out_dir = out.c_str();
  p.n_threads = 1;
  int64_t last_step = 0;
  std::vector<double> vals;
  auto cb = [](const atto_train_progress* pr, void* user) {
    auto* seen = static_cast<std::pair<int64_t*, std::vector<double>*>*>(user);
    *seen->first = pr->step;
    if (!std::isnan(pr->val_loss)) seen->second->push_back(pr->val_loss);
    return pr->step < 10;
  };
  std::pair<int64_t*, std::vector<double>*> seen{&last_step, &vals};
  p.on_progress = cb;
  p.user = &seen;
  atto_train_result r{};
  EXPECT_EQ(atto_train(&p, &r), ATTO_ERR_STOPPED);
  EXPECT_THAT(atto_last_error(), HasSubstr("resume"));
  EXPECT_TRUE(r.interrupted);
  EXPECT_LE(r.steps, 12);
  EXPECT_FALSE(vals.empty());  // the stop evaluates and saves
  // Resume to the end; only resumable keys may change.
  p.resume = true;
  p.on_progress = nullptr;
  p.config_json = R"({"lr": 0.5})";
  EXPECT_EQ(atto_train(&p, &r), ATTO_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(atto_last_error(), HasSubstr("'lr' cannot be changed when resuming"));
  p.config_json = R"({"steps": 40})";
  ASSERT_EQ(atto_train(&p, &r), ATTO_OK) << atto_last_error();
  EXPECT_EQ(r.steps, 40);
  // Bit-exact resume: the same weights as the uninterrupted run.
  atto::Model a(run_dir()), b(out);
  EXPECT_EQ(a.score("mariel").logprobs, b.score("mariel").logprobs);
  // Bad configurations are errors naming the key.
  atto_train_params q = atto_train_default_params();
  q.config_json = R"({"steps": "many"})";
  const std::string out2 = *dir_ / "bad";
  q.out_dir = out2.c_str();
  EXPECT_EQ(atto_train(&q, &r), ATTO_ERR_BAD_INPUT);
  EXPECT_THAT(atto_last_error(), HasSubstr("'steps'"));
  q.config_json = "{";
  EXPECT_EQ(atto_train(&q, &r), ATTO_ERR_INVALID_ARGUMENT);
  q.config_json = "{}";
  EXPECT_EQ(atto_train(&q, &r), ATTO_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(atto_last_error(), HasSubstr("\"data\""));
}

// Hostile training parameters are errors naming the field or the file (issue 41, class 5):
// n_threads -5 used to pass, a 1-byte data file ended in SIGFPE inside the automatic sizing.
TEST_F(CApi, TrainingRefusesBadThreadsAndTooLittleData) {
  const std::string out = *dir_ / "hostile";
  atto_train_params p = atto_train_default_params();
  p.config_json = config_.c_str();
  p.out_dir = out.c_str();
  atto_train_result r{};
  p.n_threads = -5;
  EXPECT_EQ(atto_train(&p, &r), ATTO_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(atto_last_error(), HasSubstr("n_threads"));
  p.n_threads = 100000;
  EXPECT_NE(atto_train(&p, &r), ATTO_OK);
  EXPECT_THAT(atto_last_error(), HasSubstr("n_threads must be in [0, 256]"));
  const std::string one = dir_->write("one.txt", "a");
  const std::string tiny = R"({"data": ")" + one + R"("})";
  p.config_json = tiny.c_str();
  p.n_threads = 1;
  EXPECT_EQ(atto_train(&p, &r), ATTO_ERR_BAD_INPUT);
  EXPECT_THAT(atto_last_error(), HasSubstr(one));
}

// A seq2seq run on the tutorial's three sentence pairs (word tokenizer).
TEST(CApiSeq2Seq, TranslateAndLogits) {
  atto::test::TempDir dir;
  const std::string src = dir.write("toy.src", "hello my name\nhello messi\nmy name is messi\n");
  const std::string tgt = dir.write("toy.tgt", "hola mi nombre\nhola messi\nmi nombre es messi\n");
  const std::string cfg = R"({"task": "seq2seq", "src": ")" + src + R"(", "tgt": ")" + tgt +
                          R"(", "tokenizer": "word", "d_model": 16, "n_heads": 2, "n_enc_layers": 1,
                              "n_dec_layers": 1, "d_ff": 32, "steps": 150, "lr": 0.01, "warmup": 0,
                              "schedule": "constant", "dropout": 0, "label_smoothing": 0, "eval_bleu": 0,
                              "best_by": "loss", "threads": 1})";
  atto::TrainParams tp;
  tp.config_json = cfg;
  tp.out_dir = dir / "run";
  tp.n_threads = 1;
  const atto_train_result tr = atto::train(tp);
  EXPECT_EQ(tr.metric, ATTO_METRIC_VAL_LOSS);  // best_by loss: the best is a loss
  EXPECT_GT(tr.best_score, 0.0);
  EXPECT_LT(tr.best_score, std::log(12.0));
  {  // best_by bleu: the best is BLEU itself (0-100, higher is better), in progress and result
    atto::TrainParams bp = tp;
    std::string c2 = cfg;
    c2.replace(c2.find(R"("steps": 150)"), 12, R"("steps": 40, "eval_every": 20)");
    c2.replace(c2.find(R"("eval_bleu": 0)"), 14, R"("eval_bleu": 3)");
    c2.replace(c2.find(R"("best_by": "loss")"), 17, R"("best_by": "bleu")");
    bp.config_json = c2;
    bp.out_dir = dir / "run_bleu";
    std::vector<std::pair<atto_metric, double>> seen;
    const atto_train_result br = atto::train(bp, [&](const atto_train_progress& pr) {
      if (!std::isnan(pr.val_loss)) seen.emplace_back(pr.metric, pr.best_score);
      return true;
    });
    EXPECT_EQ(br.metric, ATTO_METRIC_BLEU);
    EXPECT_GE(br.best_score, 0.0);
    EXPECT_LE(br.best_score, 100.0 + 1e-9);  // (100 computed through exp and log)
    ASSERT_FALSE(seen.empty());
    for (const auto& [metric, score] : seen) {
      EXPECT_EQ(metric, ATTO_METRIC_BLEU);
      EXPECT_LE(score, br.best_score);  // the best so far never exceeds the final best
    }
  }
  atto::Model m(dir / "run");
  const atto_model_info info = m.info();
  EXPECT_EQ(info.task, ATTO_TASK_SEQ2SEQ);
  const std::vector<std::string> sources = {"hello messi", "my name is messi", ""};
  atto::TranslateParams p;
  p.beam = 3;
  p.n_best = 2;
  const auto t = m.translate(sources, p);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0][0].text, "hola messi");
  EXPECT_EQ(t[1][0].text, "mi nombre es messi");
  EXPECT_GE(t[0][0].score, t[0][1].score);
  EXPECT_EQ(t[2][0].text, "");
  // Greedy's first token is the argmax of the decoder's logits after <bos>.
  std::vector<float> logits(static_cast<size_t>(info.tgt_vocab_size));
  ASSERT_EQ(atto_translate_logits(m.context().handle(), "hello messi", nullptr, 0, logits.data(), logits.size()), ATTO_OK)
      << atto_last_error();
  const auto best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  EXPECT_EQ(m.detokenize(std::vector<int32_t>{best}, ATTO_VOCAB_TARGET), "hola");
  EXPECT_EQ(m.tokenize("hola", ATTO_VOCAB_TARGET), std::vector<int32_t>{best});
  atto_strings* out = nullptr;
  EXPECT_EQ(atto_generate(m.context().handle(), "", 1, nullptr, nullptr, nullptr, &out), ATTO_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(atto_last_error(), HasSubstr("encoder-decoder"));
}

}  // namespace
