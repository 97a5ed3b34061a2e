// Continuous batching: decoders of different requests (prompt lengths, sample counts, seeds,
// stop tokens, start times) fed together through one forward per step give every request
// exactly the tokens and logits it gets alone, for each kind of positions.
#include <gtest/gtest.h>

#include <map>

#include "autograd/tape.h"
#include "generate/decoder.h"

using namespace atto;
using namespace atto::gen;

namespace {

using Ids = std::vector<int32_t>;

std::unique_ptr<GPT> random_gpt(PosKind pos) {
  GPTConfig c;
  c.vocab_size = 13;
  c.block_size = 12;  // long requests re-encode their cache
  c.n_layers = 2;
  c.n_heads = 2;
  c.d_model = 40;  // not a multiple of 16: the kernels' tails
  c.pos = pos;
  Rng rng(3);
  auto m = std::make_unique<GPT>(c, rng);
  for (auto& p : m->named_parameters()) p.tensor.copy_from(Tensor::randn(p.tensor.shape(), rng, 0.0f, 0.5f));
  return m;
}

struct Request {
  Ids prompt;
  int64_t n = 1;
  uint64_t seed = 0;
  int64_t max_new = 10;
  int32_t stop = -1;
  int64_t joins_at = 0;  // the step of the shared loop at which it starts
};

struct Result {
  std::vector<Sample> samples;
  std::map<int64_t, std::vector<std::vector<float>>> logits;  // per sample, each step's row
};

GenerateOptions options_for(const Request& q, Result& r) {
  GenerateOptions o;
  o.max_new_tokens = q.max_new;
  o.stop_token = q.stop;
  o.sampler.temperature = 1.2f;
  o.sampler.top_k = 9;
  o.sampler.repetition_penalty = 1.3f;
  o.on_logits = [&r](int64_t i, std::span<const float> l) { r.logits[i].emplace_back(l.begin(), l.end()); };
  return o;
}

// Each request on its own: generate_batch of n copies of its prompt (atto sample's path).
Result alone(GPT& m, const Request& q) {
  Result r;
  Rng rng(q.seed);
  r.samples = generate_batch(m, std::vector<Ids>(static_cast<size_t>(q.n), q.prompt), options_for(q, r), rng);
  return r;
}

// All requests in one loop: a request joins at its step, every running decoder steps, finished
// ones leave, the rest are fed together.
std::vector<Result> together(GPT& m, const std::vector<Request>& qs, int64_t* widest) {
  NoGradGuard ng;
  m.eval();
  std::vector<Result> res(qs.size());
  std::vector<std::unique_ptr<Decoder>> dec(qs.size());
  std::vector<Rng> rngs;
  for (const Request& q : qs) rngs.emplace_back(q.seed);
  std::vector<size_t> running;
  *widest = 0;
  for (int64_t t = 0; t < 200; ++t) {
    for (size_t i = 0; i < qs.size(); ++i)
      if (qs[i].joins_at == t) {
        dec[i] = std::make_unique<Decoder>(m, options_for(qs[i], res[i]));
        dec[i]->start(std::vector<Ids>(static_cast<size_t>(qs[i].n), qs[i].prompt));
        running.push_back(i);
      }
    std::vector<size_t> go_on;
    for (size_t i : running) {
      dec[i]->step(rngs[i]);
      if (dec[i]->done()) {
        res[i].samples = dec[i]->take_samples();
      } else {
        go_on.push_back(i);
      }
    }
    running = go_on;
    std::vector<Decoder*> batch;
    int64_t rows = 0;
    for (size_t i : running) {
      batch.push_back(dec[i].get());
      rows += dec[i]->live();
    }
    *widest = std::max(*widest, rows);
    if (!batch.empty()) feed(m, batch);
  }
  return res;
}

}  // namespace

TEST(Decoder, RequestsFedTogetherGetTheirOwnTokensAndLogitsBitForBit) {
  const std::vector<Request> qs = {
      {{1, 2, 3}, 1, 11, 30, -1, 0},                              // re-encodes twice (block 12)
      {{4}, 3, 12, 9, 0, 0},                                      // a stop token ends some samples early
      {{5, 6, 7, 8, 9}, 10, 13, 14, -1, 2},                       // more than 8 rows on its own
      {{2, 2}, 2, 14, 6, -1, 3},                                  // joins late, leaves early
      {{0, 7, 7, 1, 2, 3, 4, 5, 6, 9, 10, 11}, 4, 15, 8, -1, 5},  // a full block: re-encodes at once
      {{12, 3}, 1, 16, 20, 3, 9},
  };
  for (PosKind pos : {PosKind::Learned, PosKind::Sinusoidal, PosKind::Rope}) {
    auto m = random_gpt(pos);
    int64_t widest = 0;
    const std::vector<Result> got = together(*m, qs, &widest);
    EXPECT_GT(widest, 16) << "the shared batch never held more than 16 rows";
    for (size_t i = 0; i < qs.size(); ++i) {
      const Result want = alone(*m, qs[i]);
      ASSERT_EQ(got[i].samples.size(), want.samples.size());
      for (size_t s = 0; s < want.samples.size(); ++s) {
        const std::string what = "request " + std::to_string(i) + " sample " + std::to_string(s) + " pos " +
                                 std::to_string(static_cast<int>(pos));
        EXPECT_EQ(got[i].samples[s].tokens, want.samples[s].tokens) << what;
        EXPECT_EQ(got[i].samples[s].stopped, want.samples[s].stopped) << what;
        const auto& gl = got[i].logits.at(static_cast<int64_t>(s));
        const auto& wl = want.logits.at(static_cast<int64_t>(s));
        ASSERT_EQ(gl.size(), wl.size()) << what;
        for (size_t k = 0; k < wl.size(); ++k)
          EXPECT_EQ(0, std::memcmp(gl[k].data(), wl[k].data(), wl[k].size() * sizeof(float)))
              << what << " step " << k << ": logits differ in their bits";
      }
    }
  }
}

TEST(Decoder, FeedRefusesADecoderThatIsDone) {
  auto m = random_gpt(PosKind::Learned);
  NoGradGuard ng;
  m->eval();
  GenerateOptions o;
  o.max_new_tokens = 1;
  Decoder d(*m, o);
  d.start({{1, 2}});
  Rng rng(1);
  d.step(rng);
  ASSERT_TRUE(d.done());
  Decoder* one[] = {&d};
  EXPECT_THROW(feed(*m, one), Error);
}
