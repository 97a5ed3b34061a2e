// Generation: the KV-cache loop equals re-running the full forward (block-size policy
// included), batched equals one at a time, stop tokens, prompts from text.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "autograd/tape.h"
#include "base/error.h"
#include "broken_logits.h"
#include "generate/generate.h"

using namespace atto;
using namespace atto::gen;

namespace {

using Ids = std::vector<int32_t>;

// A tiny GPT with larger-than-init random weights, so that logits differ clearly between
// tokens and greedy decoding is not decided by rounding.
std::unique_ptr<GPT> tiny_gpt(int64_t block_size, uint64_t seed = 1, float std = 0.3f, int64_t V = 11) {
  GPTConfig c;
  c.vocab_size = V;
  c.block_size = block_size;
  c.n_layers = 2;
  c.n_heads = 2;
  c.d_model = 16;
  Rng rng(seed);
  auto m = std::make_unique<GPT>(c, rng);
  for (auto& p : m->named_parameters()) p.tensor.copy_from(Tensor::randn(p.tensor.shape(), rng, 0.0f, std));
  return m;
}

// The reference: each sequence on its own, one full forward per token over the window
// [start, L), where start jumps to L - K whenever the window would exceed the block size (the
// documented policy). The sequences advance in lockstep and draw in batch order, as the
// batched decoder does, so even sampled tokens must agree.
std::vector<Sample> reference_batch(GPT& m, const std::vector<Ids>& prompts, const GenerateOptions& opt, Rng& rng) {
  NoGradGuard ng;
  m.eval();
  const int64_t BS = m.config().block_size, V = m.config().vocab_size, K = reencode_length(BS);
  const SamplerChain chain = SamplerChain::from_options(opt.sampler);
  std::vector<Ids> seq = prompts;
  std::vector<Sample> out(prompts.size());
  std::vector<size_t> start(prompts.size(), 0);
  for (int64_t s = 0; s < opt.max_new_tokens; ++s) {
    for (size_t b = 0; b < prompts.size(); ++b) {
      if (out[b].stopped) continue;
      if (static_cast<int64_t>(seq[b].size() - start[b]) > BS) start[b] = seq[b].size() - K;
      const Ids window(seq[b].begin() + start[b], seq[b].end());
      const std::vector<float> logits = m.forward(window, 1, static_cast<int64_t>(window.size())).to_vector();
      std::vector<float> row(logits.end() - V, logits.end());
      const size_t hist = prompts[b][0] == opt.stop_token ? 1 : 0;
      const int32_t tok = chain.sample(row, std::span<const int32_t>(seq[b]).subspan(hist), rng);
      if (tok == opt.stop_token) {
        out[b].stopped = true;
        continue;
      }
      seq[b].push_back(tok);
      out[b].tokens.push_back(tok);
    }
  }
  return out;
}

Sample reference_generate(GPT& m, const Ids& prompt, const GenerateOptions& opt, Rng& rng) {
  return reference_batch(m, {prompt}, opt, rng)[0];
}

// Greedy decoding of a random model soon repeats one token forever; a repetition penalty over
// the last few tokens keeps greedy continuations varied (and exercises the history).
GenerateOptions options(int64_t max_new, bool greedy, int32_t stop = -1) {
  GenerateOptions o;
  o.max_new_tokens = max_new;
  o.stop_token = stop;
  o.sampler.greedy = greedy;
  if (greedy) {
    o.sampler.repetition_penalty = 3.0f;
    o.sampler.repetition_last_n = 3;
  }
  return o;
}

}  // namespace

TEST(Generate, KvCacheEqualsFullForwardAcrossTheBlockSize) {
  // Block sizes 8 (K = 4), 5 (odd: K = 2) and 1 (K = 1); 3 * block new tokens each, so the
  // cache is rebuilt several times.
  for (int64_t BS : {8, 5, 1}) {
    auto m = tiny_gpt(BS);
    const Ids prompt = BS >= 3 ? Ids{3, 1, 4} : Ids{3};
    for (bool greedy : {true, false}) {
      GenerateOptions o = options(3 * BS + 2, greedy);
      o.sampler.temperature = 1.3f;
      Rng r1(11), r2(11);
      const Sample ref = reference_generate(*m, prompt, o, r1);
      const std::vector<Sample> got = generate(*m, prompt, 1, o, r2);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(got[0].tokens, ref.tokens) << "block " << BS << (greedy ? " greedy" : " sampled");
      EXPECT_EQ(static_cast<int64_t>(got[0].tokens.size()), o.max_new_tokens);
      EXPECT_FALSE(got[0].stopped);
      EXPECT_GE(std::set<int32_t>(ref.tokens.begin(), ref.tokens.end()).size(), 3u);  // not a constant run
    }
  }
}

TEST(Generate, PromptOfAFullBlockAndPenaltyMatchTheReference) {
  auto m = tiny_gpt(6, 4);
  const Ids prompt{0, 5, 2, 7, 7, 1};  // fills the cache: the first feed re-encodes
  GenerateOptions o = options(15, false, 0);
  o.sampler.repetition_penalty = 1.5f;
  o.sampler.repetition_last_n = 0;  // the whole sample: the leading <eos> must stay exempt
  o.sampler.top_k = 5;
  // The first seed whose sample runs long enough to rebuild the cache a few times.
  for (uint64_t seed = 0; seed < 50; ++seed) {
    Rng r1(seed), r2(seed);
    const Sample ref = reference_generate(*m, prompt, o, r1);
    if (ref.tokens.size() < 8) continue;
    const std::vector<Sample> got = generate(*m, prompt, 1, o, r2);
    EXPECT_EQ(got[0].tokens, ref.tokens) << "seed " << seed;
    EXPECT_EQ(got[0].stopped, ref.stopped);
    return;
  }
  FAIL() << "no seed gave a sample of 8 tokens";
}

TEST(Generate, BatchedEqualsOneAtATimeAndStopTokensEndSequences) {
  auto m = tiny_gpt(24, 2, 1.0f);
  const std::vector<Ids> prompts{{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}, {2, 9}};
  // Without a stop token: find a token that some greedy continuations contain and some don't.
  Rng unused(0);
  const std::vector<Sample> free = generate_batch(*m, prompts, options(20, true), unused);
  int32_t stop = -1;
  for (int32_t t = 0; t < 11 && stop < 0; ++t) {
    const auto n = std::count_if(free.begin(), free.end(), [&](const Sample& s) {
      return std::find(s.tokens.begin(), s.tokens.end(), t) != s.tokens.end();
    });
    if (n > 0 && n < static_cast<long>(free.size())) stop = t;
  }
  ASSERT_GE(stop, 0) << "no token separates the continuations; change the seed";
  const GenerateOptions o = options(20, true, stop);
  Rng rng(0);
  const std::vector<Sample> batched = generate_batch(*m, prompts, o, rng);
  int stopped = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Rng r(0);
    const Sample one = generate(*m, prompts[i], 1, o, r)[0];
    EXPECT_EQ(batched[i].tokens, one.tokens) << i;
    EXPECT_EQ(batched[i].stopped, one.stopped) << i;
    // A stopped sequence is the free run cut before the first stop token.
    const auto cut = std::find(free[i].tokens.begin(), free[i].tokens.end(), stop);
    EXPECT_EQ(batched[i].tokens, Ids(free[i].tokens.begin(), cut)) << i;
    EXPECT_EQ(batched[i].stopped, cut != free[i].tokens.end()) << i;
    EXPECT_EQ(std::count(batched[i].tokens.begin(), batched[i].tokens.end(), stop), 0);
    stopped += batched[i].stopped;
  }
  EXPECT_GT(stopped, 0);
  EXPECT_LT(stopped, static_cast<int>(prompts.size()));
  // Chunks of 4 sequences give the same greedy result.
  GenerateOptions chunked = o;
  chunked.max_batch = 4;
  Rng r3(0);
  const std::vector<Sample> again = generate_batch(*m, prompts, chunked, r3);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(again[i].tokens, batched[i].tokens);
}

TEST(Generate, SampledBatchEqualsIndependentSequencesDrawnInBatchOrder) {
  // Sequences stop at different steps (stop token 0), so finished rows leave the batch and
  // its cache mid-way; any mix-up of cache rows changes the distributions and the draws.
  auto m = tiny_gpt(16, 5, 0.6f);
  std::vector<Ids> prompts;
  for (int32_t i = 0; i < 8; ++i) prompts.push_back({0, static_cast<int32_t>(1 + i), static_cast<int32_t>(10 - i)});
  GenerateOptions o = options(40, false);
  o.sampler.temperature = 1.5f;
  // The stop token: the one whose first occurrence varies most between the sequences.
  Rng r0(8);
  const std::vector<Sample> free = reference_batch(*m, prompts, o, r0);
  size_t best = 0;
  for (int32_t t = 0; t < 11; ++t) {
    std::set<long> firsts;
    for (const Sample& s : free) firsts.insert(std::find(s.tokens.begin(), s.tokens.end(), t) - s.tokens.begin());
    if (firsts.size() > best) best = firsts.size(), o.stop_token = t;
  }
  Rng r1(8), r2(8);
  const std::vector<Sample> ref = reference_batch(*m, prompts, o, r1);
  const std::vector<Sample> got = generate_batch(*m, prompts, o, r2);
  std::set<size_t> lengths;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got[i].tokens, ref[i].tokens) << i;
    EXPECT_EQ(got[i].stopped, ref[i].stopped) << i;
    lengths.insert(ref[i].tokens.size());
  }
  EXPECT_GE(lengths.size(), 4u) << "stop token " << o.stop_token;  // sequences end at several steps
}

TEST(Generate, SampledBatchIsSeededAndRestoresTrainingMode) {
  auto m = tiny_gpt(8, 3);
  m->train(true);
  GenerateOptions o = options(10, false, 0);
  o.sampler.top_p = 0.9f;
  Rng a(5), b(5), c(6);
  const auto x = generate(*m, {0}, 8, o, a), y = generate(*m, {0}, 8, o, b), z = generate(*m, {0}, 8, o, c);
  bool all_same = true, any_diff_seed = false;
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(x[i].tokens, y[i].tokens);
    all_same = all_same && x[i].tokens == x[0].tokens;
    any_diff_seed = any_diff_seed || x[i].tokens != z[i].tokens;
  }
  EXPECT_FALSE(all_same);  // the samples of one batch differ from each other
  EXPECT_TRUE(any_diff_seed);
  EXPECT_TRUE(m->training());
}

TEST(Generate, RejectsBadInputs) {
  auto m = tiny_gpt(4);
  Rng rng(0);
  EXPECT_THROW(generate_batch(*m, {{1, 2}, {3}}, options(3, true), rng), Error);  // two lengths
  EXPECT_THROW(generate(*m, {1, 2, 3, 4, 5}, 1, options(3, true), rng), Error);   // > block size
  EXPECT_THROW(generate(*m, {}, 1, options(3, true), rng), Error);                // empty prompt
  EXPECT_THROW(generate(*m, {11}, 1, options(3, true), rng), Error);              // id >= V
  EXPECT_THROW(generate(*m, {1}, 0, options(3, true), rng), Error);               // n < 1
  EXPECT_THROW(generate(*m, {1}, 1, options(3, true, 11), rng), Error);           // stop id >= V
  GenerateOptions bad = options(3, false);
  bad.sampler.temperature = 0;
  EXPECT_THROW(generate(*m, {1}, 1, bad, rng), UsageError);
  EXPECT_EQ(generate(*m, {1}, 2, options(0, true), rng)[1].tokens.size(), 0u);
}

TEST(Prompts, LinesStartWithEosAndStreamWithNewline) {
  Rng rng(0);
  const auto lines = CharTokenizer::from_chars({U'a', U'b', U'm'}, true);  // <eos> a b m
  PromptSet p = make_prompts(lines, "ma", 3, 8, rng);
  ASSERT_EQ(p.prompts.size(), 3u);
  EXPECT_EQ(p.prompts[2], (Ids{0, 3, 1}));
  EXPECT_EQ(p.text, "ma");
  EXPECT_EQ(make_prompts(lines, "", 1, 8, rng).prompts[0], (Ids{0}));
  p = make_prompts(lines, "abmab", 1, 4, rng);  // [<eos> a b m a b] -> last 4
  EXPECT_EQ(p.prompts[0], (Ids{2, 3, 1, 2}));
  EXPECT_EQ(p.cropped, 2);
  try {
    make_prompts(lines, "maz", 1, 8, rng);
    FAIL() << "no error for an unknown character";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("position 2"), std::string::npos) << e.what();
  }

  const auto stream = CharTokenizer::from_chars({U'\n', U'a', U'b'}, false);
  EXPECT_EQ(make_prompts(stream, "", 2, 8, rng).prompts, (std::vector<Ids>{{0}, {0}}));
  EXPECT_EQ(make_prompts(stream, "ba", 1, 8, rng).prompts[0], (Ids{2, 1}));
  // No newline in the vocabulary: one random start token per sample, from the Rng.
  const auto no_newline = CharTokenizer::from_chars({U'a', U'b', U'c', U'd'}, false);
  Rng r1(9), r2(9);
  const PromptSet a = make_prompts(no_newline, "", 50, 8, r1), b = make_prompts(no_newline, "", 50, 8, r2);
  EXPECT_EQ(a.prompts, b.prompts);
  std::set<int32_t> starts;
  for (const Ids& s : a.prompts) {
    ASSERT_EQ(s.size(), 1u);
    starts.insert(s[0]);
  }
  EXPECT_EQ(starts, (std::set<int32_t>{0, 1, 2, 3}));
}

// Non-finite logits are refused with the one message every command gives. The old decoder
// passed the logits to the sampler, which took -inf for a token a filter had removed and
// sampled on (atto sample printed text from such a model and exited 0).
TEST(Generate, NonFiniteLogitsAreRefused) {
  for (float row : {-3e38f, 3e38f, std::nanf("")}) {
    auto m = tiny_gpt(8, 3);
    atto::testing::break_logit(*m, 5, row);
    for (bool greedy : {false, true}) {
      Rng rng(1);
      try {
        generate(*m, {0}, 2, options(4, greedy), rng);
        ADD_FAILURE() << "logit " << row << " of token 5 accepted";
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()),
                  "the model produced non-finite logits while sampling; the weights may be damaged");
      }
    }
  }
}

// generate_chunks hands out opt.max_batch samples at a time, in order, and they are exactly
// the samples of one generate_batch call (its chunks are the same), which match the full-forward
// reference: the KV cache sized to prompt + max_new_tokens (< block size here) changes nothing.
TEST(Generate, ChunksStreamTheSamplesOfOneBatch) {
  auto m = tiny_gpt(16, 4);
  GenerateOptions o = options(6, false, 0);
  o.max_batch = 4;
  PromptSet ps;
  ps.base = {0, 3};
  std::vector<int64_t> firsts;
  std::vector<Sample> got;
  Rng r1(7);
  generate_chunks(*m, ps, 10, o, r1, [&](const SampleChunk& c) {
    firsts.push_back(c.first);
    ASSERT_EQ(c.prompts.size(), c.samples.size());
    for (size_t i = 0; i < c.samples.size(); ++i) {
      EXPECT_EQ(c.prompts[i], ps.base);
      got.push_back(c.samples[i]);
    }
  });
  EXPECT_EQ(firsts, (std::vector<int64_t>{0, 4, 8}));
  Rng r2(7);
  const std::vector<Sample> want = generate(*m, ps.base, 10, o, r2);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].tokens, want[i].tokens) << i;
  // Per chunk, the reference (one full forward per token, no cache) draws the same tokens.
  Rng r3(7);
  for (size_t first = 0; first < got.size(); first += 4) {
    const size_t n = std::min<size_t>(4, got.size() - first);
    const std::vector<Sample> ref = reference_batch(*m, std::vector<Ids>(n, ps.base), o, r3);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(got[first + i].tokens, ref[i].tokens) << first + i;
  }
  // Random start tokens are drawn per chunk: reproducible from the seed.
  ps.base.clear();
  ps.random_start_vocab = 11;
  std::vector<Ids> a, b;
  Rng r4(9), r5(9);
  const auto into = [](std::vector<Ids>& v) {
    return [&v](const SampleChunk& c) { v.insert(v.end(), c.prompts.begin(), c.prompts.end()); };
  };
  generate_chunks(*m, ps, 9, o, r4, into(a));
  generate_chunks(*m, ps, 9, o, r5, into(b));
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 9u);
}
