// Activation recomputation (autograd/tape.h's recompute, `atto train --recompute`): the tape keeps
// one node per block instead of the block's ops, and the gradients, the loss and the dropout Rng
// come out with the bits they have without it, sharded or not, at any thread count; the
// gradient-ready callbacks fire only once a parameter's gradient is final.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "autograd/ops.h"
#include "kernels/kernels.h"
#include "models/gpt.h"
#include "models/seq2seq.h"
#include "support.h"
#include "train/data_parallel.h"

using namespace atto;
using atto::test::same_bits;

namespace {

GPTConfig small_recompute_gpt() {
  GPTConfig c;
  c.vocab_size = 13;
  c.block_size = 8;
  c.n_layers = 3;
  c.n_heads = 2;
  c.d_model = 16;
  c.dropout = 0.1f;
  return c;
}

std::vector<int32_t> random_ids(uint64_t seed, int64_t n, int64_t V) {
  Rng rng(seed);
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>(rng.below(static_cast<uint64_t>(V))));
  return ids;
}

// One forward and backward of a batch on a model, its replicas and a dropout Rng: the loss, every
// gradient and the Rng's state afterwards.
struct Step {
  double loss = 0.0;
  std::vector<std::vector<float>> grads;
  Rng rng;
};

template <class Model, class Config, class Run>
Step run_step(const Config& c, int shards, bool recompute, Run&& run) {
  Rng init(5), scratch(0);
  Step s;
  s.rng = Rng(99);
  Model model(c, init);
  model.set_recompute(recompute);
  model.set_rng(&s.rng);
  model.train();
  DataParallel dp(model, shards, [&] {
    auto r = std::make_unique<Model>(c, scratch);
    r->set_recompute(recompute);
    return r;
  });
  s.loss = run(dp);
  for (const auto& p : model.named_parameters()) s.grads.push_back(p.tensor.grad().to_vector());
  return s;
}

}  // namespace

// The forward records one "recompute" node per block and none of the blocks' own ops.
TEST(Recompute, TheTapeKeepsOneNodeABlock) {
  const GPTConfig c = small_recompute_gpt();
  Rng init(5), drop(7);
  GPT model(c, init);
  model.set_rng(&drop);
  model.train();
  const auto x = random_ids(1, 2 * c.block_size, c.vocab_size), y = random_ids(2, 2 * c.block_size, c.vocab_size);
  auto count = [](const std::vector<std::string>& names, const std::string& op) {
    return std::count(names.begin(), names.end(), op);
  };
  tape().clear();
  const Tensor plain = model.loss(x, y, 2, c.block_size);
  const auto without = tape().op_names();
  tape().clear();
  model.set_recompute(true);
  drop = Rng(7);
  const Tensor loss = model.loss(x, y, 2, c.block_size);
  const auto with = tape().op_names();
  EXPECT_EQ(count(with, "recompute"), c.n_layers);
  EXPECT_EQ(count(without, "recompute"), 0);
  EXPECT_LT(with.size() + static_cast<size_t>(c.n_layers) * 5, without.size());
  backward(loss);
  EXPECT_EQ(tape().size(), 0u);
  for (const auto& p : model.named_parameters()) EXPECT_TRUE(p.tensor.grad().defined()) << p.name;
  EXPECT_EQ(loss.item(), plain.item());
  // Under NoGradGuard nothing is recorded and the output is the same.
  NoGradGuard ng;
  drop = Rng(7);
  EXPECT_EQ(model.loss(x, y, 2, c.block_size).item(), loss.item());
  EXPECT_EQ(tape().size(), 0u);
}

// With dropout, 1 or 2 shards and 1 or 2 threads: the bits of the step without recomputation.
TEST(Recompute, GptGradientsLossAndRngKeepTheirBits) {
  const GPTConfig c = small_recompute_gpt();
  const int64_t B = 4, T = c.block_size;
  const auto x = random_ids(3, B * T, c.vocab_size), y = random_ids(4, B * T, c.vocab_size);
  auto run = [&](DataParallel& dp) { return gpt_forward_backward(dp, x, y, B, T); };
  for (int shards : {1, 2})
    for (int threads : {1, 2}) {
      kernels::set_num_threads(threads);
      const Step a = run_step<GPT>(c, shards, false, run), b = run_step<GPT>(c, shards, true, run);
      EXPECT_EQ(a.loss, b.loss) << shards << " shards, " << threads << " threads";
      EXPECT_TRUE(same_bits(a.grads, b.grads)) << shards << " shards, " << threads << " threads";
      EXPECT_EQ(a.rng.state(), b.rng.state());
    }
  kernels::set_num_threads(0);
}

// The encoder-decoder: each decoder layer keeps x and the encoder's output, and passes the
// memory's gradient on to the encoder.
TEST(Recompute, Seq2SeqGradientsKeepTheirBits) {
  Seq2SeqConfig c;
  c.src_vocab = 13;
  c.tgt_vocab = 11;
  c.max_len = 12;
  c.n_enc_layers = 2;
  c.n_dec_layers = 2;
  c.n_heads = 2;
  c.d_model = 16;
  c.dropout = 0.2f;
  Rng r(23);
  std::vector<EncodedPair> pairs(5);
  std::vector<int64_t> index;
  for (size_t i = 0; i < pairs.size(); ++i) {
    for (uint64_t t = 0, n = 1 + r.below(8); t < n; ++t) pairs[i].src.push_back(3 + static_cast<int32_t>(r.below(10)));
    for (uint64_t t = 0, n = 1 + r.below(8); t < n; ++t) pairs[i].tgt.push_back(3 + static_cast<int32_t>(r.below(8)));
    index.push_back(static_cast<int64_t>(i));
  }
  const Seq2SeqBatch b = make_batch(pairs, index);
  auto run = [&](DataParallel& dp) { return seq2seq_forward_backward(dp, b, 1.0f, {}); };
  for (int shards : {1, 2}) {
    const Step plain = run_step<Seq2Seq>(c, shards, false, run), re = run_step<Seq2Seq>(c, shards, true, run);
    EXPECT_EQ(plain.loss, re.loss) << shards << " shards";
    EXPECT_TRUE(same_bits(plain.grads, re.grads)) << shards << " shards";
    EXPECT_EQ(plain.rng.state(), re.rng.state());
  }
}

// Tape::watch (what overlaps the gradient exchange with the backward): each parameter's callback
// comes once, after every node that adds to its gradient, recomputed blocks included, and as soon
// as its block's node has run: the last block's before the first block's.
TEST(Recompute, ReadyCallbacksSeeFinalGradients) {
  const GPTConfig c = small_recompute_gpt();
  Rng init(5), drop(7);
  GPT model(c, init);
  model.set_rng(&drop);
  model.set_recompute(true);
  model.train();
  std::vector<Tensor> params;
  std::vector<std::string> names, order;
  for (const auto& p : model.named_parameters()) params.push_back(p.tensor), names.push_back(p.name);
  std::vector<std::vector<float>> at_callback(params.size());
  std::vector<int> calls(params.size(), 0);
  tape().clear();
  tape().watch(params, [&](size_t i) {
    ++calls[i];
    order.push_back(names[i]);
    at_callback[i] = params[i].grad().defined() ? params[i].grad().to_vector() : std::vector<float>();
  });
  const auto x = random_ids(5, 2 * c.block_size, c.vocab_size), y = random_ids(6, 2 * c.block_size, c.vocab_size);
  backward(model.loss(x, y, 2, c.block_size));
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(calls[i], 1) << i;
    EXPECT_EQ(at_callback[i], params[i].grad().to_vector()) << i;
  }
  const auto at = [&](const std::string& n) { return std::find(order.begin(), order.end(), n) - order.begin(); };
  EXPECT_LT(at("transformer.h.2.mlp.c_fc.weight"), at("transformer.h.0.mlp.c_fc.weight"));
  EXPECT_LT(at("transformer.h.1.attn.c_attn.weight"), at("transformer.h.0.ln_1.weight"));
}
