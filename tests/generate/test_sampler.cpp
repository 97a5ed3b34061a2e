// Sampler steps on hand-made logits, the draw's frequencies, greedy, seeding, validation.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "base/error.h"
#include "generate/sampler.h"

using namespace atto;
using namespace atto::gen;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Logits whose softmax is exactly the given distribution (up to float rounding).
std::vector<float> log_of(const std::vector<double>& p) {
  std::vector<float> l;
  for (double v : p) l.push_back(v > 0 ? static_cast<float>(std::log(v)) : kNegInf);
  return l;
}

// Ids whose logit is still finite.
std::vector<int32_t> kept(const std::vector<float>& logits) {
  std::vector<int32_t> k;
  for (size_t i = 0; i < logits.size(); ++i)
    if (logits[i] != kNegInf) k.push_back(static_cast<int32_t>(i));
  return k;
}

template <typename Step>
std::vector<float> applied(const Step& s, std::vector<float> logits, std::vector<int32_t> history = {}) {
  s.apply(logits, history);
  return logits;
}

using Ids = std::vector<int32_t>;

}  // namespace

TEST(Sampler, TopKKeepsExactlyKWithTiesToLowerIds) {
  const std::vector<float> l{1, 5, 3, 5, 2};
  EXPECT_EQ(kept(applied(TopK{2}, l)), (Ids{1, 3}));
  EXPECT_EQ(kept(applied(TopK{3}, l)), (Ids{1, 2, 3}));
  EXPECT_EQ(kept(applied(TopK{1}, l)), (Ids{1}));  // the tie 1 vs 3 goes to the lower id
  EXPECT_EQ(kept(applied(TopK{2}, std::vector<float>{2, 2, 2, 1})), (Ids{0, 1}));
  EXPECT_EQ(applied(TopK{0}, l), l);        // off
  EXPECT_EQ(applied(TopK{5}, l), l);        // k >= V: nothing to remove
  EXPECT_EQ(applied(TopK{2}, l)[1], 5.0f);  // kept logits are unchanged
}

TEST(Sampler, TopPKeepsTheShortestPrefixReachingP) {
  const auto l = log_of({0.125, 0.5, 0.125, 0.25});          // sorted: 1 (.5), 3 (.25), 0 (.125), 2 (.125)
  EXPECT_EQ(kept(applied(TopP{0.75f}, l)), (Ids{1, 3}));     // boundary: .5 + .25 reaches .75 exactly
  EXPECT_EQ(kept(applied(TopP{0.76f}, l)), (Ids{0, 1, 3}));  // one more, the tie to the lower id
  EXPECT_EQ(kept(applied(TopP{0.5f}, l)), (Ids{1}));
  EXPECT_EQ(kept(applied(TopP{0.49f}, l)), (Ids{1}));
  EXPECT_EQ(kept(applied(TopP{0.01f}, l)), (Ids{1}));  // always at least one token
  EXPECT_EQ(kept(applied(TopP{0.9f}, l)), (Ids{0, 1, 2, 3}));
  EXPECT_EQ(applied(TopP{1.0f}, l), l);
  // Tokens removed earlier stay removed and do not count.
  auto masked = l;
  masked[1] = kNegInf;  // now .25/.5, .125/.5, .125/.5 = .5, .25, .25
  EXPECT_EQ(kept(applied(TopP{0.5f}, masked)), (Ids{3}));
  EXPECT_EQ(kept(applied(TopP{0.6f}, masked)), (Ids{0, 3}));
}

TEST(Sampler, MinPKeepsTokensAboveAFractionOfTheMax) {
  const std::vector<float> l{-1.0f, 0.0f, -1.5f, -3.0f};
  EXPECT_EQ(kept(applied(MinP{std::exp(-1.2f)}, l)), (Ids{0, 1}));  // p >= 0.30 p_max
  EXPECT_EQ(kept(applied(MinP{std::exp(-1.6f)}, l)), (Ids{0, 1, 2}));
  EXPECT_EQ(kept(applied(MinP{0.99f}, l)), (Ids{1}));
  EXPECT_EQ(applied(MinP{0.0f}, l), l);
  EXPECT_EQ(applied(MinP{std::exp(-1.2f)}, l)[0], -1.0f);
}

TEST(Sampler, TemperatureScalesTheLogits) {
  const std::vector<float> l{1, 2, 3, -4};
  for (float t : {0.5f, 2.0f, 1e-3f}) {
    const auto p = probabilities(applied(Temperature{t}, l));
    std::vector<float> scaled;
    for (float v : l) scaled.push_back(v / t);
    const auto q = probabilities(scaled);
    for (size_t i = 0; i < l.size(); ++i) EXPECT_NEAR(p[i], q[i], 1e-9) << t;
  }
  // A tiny temperature does not overflow: the result is (nearly) one-hot on the max.
  const auto p = probabilities(applied(Temperature{1e-30f}, l));
  EXPECT_NEAR(p[2], 1.0, 1e-12);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  const std::vector<float> l{2, -2, 1, 3};
  EXPECT_EQ(applied(RepetitionPenalty{2.0f, 0}, l, {0, 1, 0}), (std::vector<float>{1, -4, 1, 3}));
  EXPECT_EQ(applied(RepetitionPenalty{2.0f, 1}, l, {0, 1, 0}), (std::vector<float>{1, -2, 1, 3}));  // last 1
  EXPECT_EQ(applied(RepetitionPenalty{2.0f, 2}, l, {3, 1, 0}), (std::vector<float>{1, -4, 1, 3}));
  EXPECT_EQ(applied(RepetitionPenalty{0.5f, 0}, l, {3}), (std::vector<float>{2, -2, 1, 6}));  // < 1 rewards
  EXPECT_THROW(applied(RepetitionPenalty{2.0f, 0}, l, {4}), Error);
}

TEST(Sampler, FrequencyAndPresencePenaltiesSubtractPerCountAndOnce) {
  const std::vector<float> l{2, -2, 1, 3};
  // History {0, 1, 0}: token 0 seen twice, token 1 once (OpenAI: l -= c * frequency + presence).
  EXPECT_EQ(applied(RepetitionPenalty{1.0f, 0, 0.5f, 0.0f}, l, {0, 1, 0}), (std::vector<float>{1, -2.5f, 1, 3}));
  EXPECT_EQ(applied(RepetitionPenalty{1.0f, 0, 0.0f, 0.25f}, l, {0, 1, 0}),
            (std::vector<float>{1.75f, -2.25f, 1, 3}));
  EXPECT_EQ(applied(RepetitionPenalty{1.0f, 2, 1.0f, 0.0f}, l, {0, 1, 0}), (std::vector<float>{1, -3, 1, 3}));  // last 2
  // CTRL's division first, then the subtraction (llama.cpp's order); negative values reward.
  EXPECT_EQ(applied(RepetitionPenalty{2.0f, 0, 1.0f, 1.0f}, l, {0, 0, 3}), (std::vector<float>{-2, -2, 1, -0.5f}));
  EXPECT_EQ(applied(RepetitionPenalty{1.0f, 0, -1.0f, 0.0f}, l, {2}), (std::vector<float>{2, -2, 2, 3}));
  std::vector<float> banned{kNegInf, 1.0f};
  EXPECT_EQ(applied(RepetitionPenalty{1.0f, 0, 2.0f, 2.0f}, banned, {0, 0})[0], kNegInf);  // stays removed
}

TEST(Sampler, LogitBiasAddsToItsTokensBeforeEveryOtherStep) {
  const std::vector<float> l{2, -2, 1, 3};
  EXPECT_EQ(applied(LogitBias{{{1, 5.0f}, {3, -100.0f}}}, l), (std::vector<float>{2, 3, 1, -97}));
  std::vector<float> banned{kNegInf, 1.0f};
  EXPECT_EQ(applied(LogitBias{{{0, 100.0f}}}, banned)[0], kNegInf);
  EXPECT_THROW(applied(LogitBias{{{4, 1.0f}}}, l), Error);
  SamplerOptions o;
  o.greedy = true;
  o.logit_bias = {{0, 1.5f}};
  o.frequency_penalty = 0.5f;
  const SamplerChain chain = SamplerChain::from_options(o);  // greedy keeps the bias and penalties
  ASSERT_EQ(chain.steps().size(), 2u);
  EXPECT_TRUE(std::holds_alternative<LogitBias>(chain.steps()[0]));
  EXPECT_TRUE(std::holds_alternative<RepetitionPenalty>(chain.steps()[1]));
  Rng rng(1);
  std::vector<float> row{2, -2, 1, 3};  // 3.5 - 0.5 (token 0 seen once) against 3
  EXPECT_EQ(chain.sample(row, Ids{0}, rng), 0);
  std::vector<float> row2{2, -2, 1, 3};  // 3.5 - 1.0 (seen twice) loses to 3
  EXPECT_EQ(chain.sample(row2, Ids{0, 0}, rng), 3);
  // A -100 bias keeps a likely token out of 2,000 draws; +100 makes it the only one drawn.
  o.greedy = false;
  o.frequency_penalty = 0;
  o.logit_bias = {{3, -100.0f}};
  const SamplerChain ban = SamplerChain::from_options(o);
  o.logit_bias = {{1, 100.0f}};
  const SamplerChain force = SamplerChain::from_options(o);
  for (int i = 0; i < 2000; ++i) {
    std::vector<float> a{2, -2, 1, 3}, b{2, -2, 1, 3};
    ASSERT_NE(ban.sample(a, {}, rng), 3);
    ASSERT_EQ(force.sample(b, {}, rng), 1);
  }
}

TEST(Sampler, GreedyIsArgmaxWithTiesToTheLowestId) {
  EXPECT_EQ(argmax(std::vector<float>{1, 3, 3, 0}), 1);
  EXPECT_EQ(argmax(std::vector<float>{kNegInf, -5, -7}), 1);
  SamplerOptions o;
  o.greedy = true;
  o.temperature = 0;  // ignored by greedy
  const SamplerChain chain = SamplerChain::from_options(o);
  EXPECT_EQ(chain.strategy(), Strategy::Greedy);
  Rng rng(1), untouched(1);
  std::vector<float> l{0.1f, 0.3f, 0.2f};
  EXPECT_EQ(chain.sample(l, {}, rng), 1);
  EXPECT_EQ(rng.state(), untouched.state());  // greedy draws nothing
  // With a repetition penalty the penalised token can lose the argmax.
  o.repetition_penalty = 2.0f;
  std::vector<float> l2{0.1f, 0.3f, 0.2f};
  EXPECT_EQ(SamplerChain::from_options(o).sample(l2, Ids{1}, rng), 2);
}

TEST(Sampler, DrawMatchesTheDistribution) {
  const std::vector<double> p{0.1, 0.0, 0.2, 0.3, 0.4};
  const auto l = log_of(p);
  Rng rng(7);
  const int N = 20000;
  std::vector<int> count(p.size(), 0);
  for (int i = 0; i < N; ++i) ++count[draw(l, rng)];
  EXPECT_EQ(count[1], 0);  // zero probability is never drawn
  for (size_t i = 0; i < p.size(); ++i) {
    const double sigma = std::sqrt(p[i] * (1 - p[i]) / N);
    EXPECT_NEAR(count[i] / double(N), p[i], 5 * sigma + 1e-12) << "token " << i;
  }
}

TEST(Sampler, ChainOrderAppliesTemperatureBeforeTopP) {
  // At temperature 1, top-p 0.7 keeps {1, 3}; at temperature 100 the distribution is nearly
  // uniform and the same top-p keeps three tokens (the tie 0 vs 2 goes to 0).
  const auto l = log_of({0.125, 0.5, 0.125, 0.25});
  SamplerOptions o;
  o.top_p = 0.7f;
  o.temperature = 100.0f;
  const SamplerChain hot = SamplerChain::from_options(o);
  ASSERT_EQ(hot.steps().size(), 2u);
  EXPECT_TRUE(std::holds_alternative<Temperature>(hot.steps()[0]));
  EXPECT_TRUE(std::holds_alternative<TopP>(hot.steps()[1]));
  Rng rng(3);
  std::vector<int> seen(4, 0);
  for (int i = 0; i < 3000; ++i) {
    auto row = l;
    ++seen[hot.sample(row, {}, rng)];
  }
  EXPECT_EQ(seen[2], 0);
  EXPECT_GT(seen[0], 700);
  EXPECT_GT(seen[1], 700);
  EXPECT_GT(seen[3], 700);
  // Full chain order as in llama.cpp.
  o.repetition_penalty = 1.1f;
  o.top_k = 3;
  o.min_p = 0.05f;
  o.logit_bias = {{2, 1.0f}};
  const SamplerChain all = SamplerChain::from_options(o);
  ASSERT_EQ(all.steps().size(), 6u);
  EXPECT_TRUE(std::holds_alternative<LogitBias>(all.steps()[0]));
  EXPECT_TRUE(std::holds_alternative<RepetitionPenalty>(all.steps()[1]));
  EXPECT_TRUE(std::holds_alternative<Temperature>(all.steps()[2]));
  EXPECT_TRUE(std::holds_alternative<TopK>(all.steps()[3]));
  EXPECT_TRUE(std::holds_alternative<TopP>(all.steps()[4]));
  EXPECT_TRUE(std::holds_alternative<MinP>(all.steps()[5]));
  EXPECT_TRUE(SamplerChain::from_options(SamplerOptions{}).steps().empty());
}

TEST(Sampler, SameSeedSameTokens) {
  SamplerOptions o;
  o.temperature = 0.9f;
  o.top_k = 6;
  o.top_p = 0.95f;
  const SamplerChain chain = SamplerChain::from_options(o);
  auto run = [&](uint64_t seed) {
    Rng rng(seed), lrng(99);
    Ids out;
    for (int i = 0; i < 200; ++i) {
      std::vector<float> l(10);
      for (float& v : l) v = lrng.normal();
      out.push_back(chain.sample(l, out, rng));
    }
    return out;
  };
  EXPECT_EQ(run(5), run(5));
  EXPECT_NE(run(5), run(6));
}

TEST(Sampler, NonFiniteLogitsAreAnError) {
  Rng rng(0);
  std::vector<float> nan{0.0f, std::nanf("")};
  EXPECT_THROW(SamplerChain().sample(nan, {}, rng), Error);
  std::vector<float> none{kNegInf, kNegInf};
  EXPECT_THROW(draw(none, rng), Error);
}

TEST(Sampler, ValidationNamesTheFlagAndValue) {
  auto message = [](auto edit) {
    SamplerOptions o;
    edit(o);
    try {
      o.validate();
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([](SamplerOptions& o) { o.temperature = 0; }).find("--temperature"), std::string::npos);
  EXPECT_NE(message([](SamplerOptions& o) { o.temperature = -1; }).find("-1"), std::string::npos);
  EXPECT_NE(message([](SamplerOptions& o) { o.temperature = std::nanf(""); }).find("--temperature"), std::string::npos);
  EXPECT_NE(message([](SamplerOptions& o) { o.top_p = 0; }).find("--top-p"), std::string::npos);
  EXPECT_NE(message([](SamplerOptions& o) { o.top_p = 1.5f; }).find("1.5"), std::string::npos);
  EXPECT_NE(message([](SamplerOptions& o) { o.top_k = -2; }).find("--top-k"), std::string::npos);
  EXPECT_NE(message([](SamplerOptions& o) { o.min_p = 1; }).find("--min-p"), std::string::npos);
  EXPECT_NE(message([](SamplerOptions& o) { o.min_p = -0.1f; }).find("--min-p"), std::string::npos);
  EXPECT_NE(message([](SamplerOptions& o) { o.repetition_penalty = 0; }).find("--repetition-penalty"),
            std::string::npos);
  EXPECT_NE(message([](SamplerOptions& o) { o.repetition_last_n = -1; }).find("--repetition-last-n"),
            std::string::npos);
  EXPECT_NE(message([](SamplerOptions& o) { o.frequency_penalty = 2.5f; }).find("--frequency-penalty"),
            std::string::npos);
  EXPECT_NE(message([](SamplerOptions& o) { o.presence_penalty = std::nanf(""); }).find("--presence-penalty"),
            std::string::npos);
  EXPECT_NE(message([](SamplerOptions& o) { o.logit_bias = {{3, 101.0f}}; }).find("--logit-bias"), std::string::npos);
  EXPECT_NE(message([](SamplerOptions& o) { o.logit_bias = {{-1, 1.0f}}; }).find("--logit-bias"), std::string::npos);
  EXPECT_EQ(message([](SamplerOptions& o) { o.temperature = 0, o.greedy = true; }), "no error");
  EXPECT_EQ(message([](SamplerOptions& o) { o.top_p = 1, o.min_p = 0.5f, o.top_k = 3; }), "no error");
  // The C API, Python and the server name the fields, not the CLI's flags.
  SamplerOptions o;
  o.top_p = 2;
  try {
    o.validate(SamplerOptions::Names::Fields);
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("top_p must be in (0, 1]", 0), 0u) << e.what();
  }
  o.top_p = 1;
  o.logit_bias = {{0, 1.0f}, {7, 1.0f}};
  EXPECT_NO_THROW(o.check_vocab(8));
  try {
    o.check_vocab(7, SamplerOptions::Names::Fields);
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("logit_bias: token id 7 is outside this model's vocabulary [0, 7)"),
              std::string::npos)
        << e.what();
  }
}
