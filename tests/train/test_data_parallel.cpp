// Data-parallel shards (train/data_parallel.h): replicas alias the model's parameters, the
// sharded gradients are the whole batch's (dropout included), the thread count changes no bit,
// and a failing shard leaves nothing behind.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "base/error.h"
#include "data/seq2seq_batches.h"
#include "kernels/kernels.h"
#include "models/gpt.h"
#include "models/seq2seq.h"
#include "support.h"
#include "train/data_parallel.h"

using namespace atto;
using atto::test::same_bits;

namespace {

GPTConfig small_gpt(float dropout) {
  GPTConfig c;
  c.vocab_size = 11;
  c.block_size = 6;
  c.n_layers = 2;
  c.n_heads = 2;
  c.d_model = 16;
  c.dropout = dropout;
  return c;
}

struct Batch {
  std::vector<int32_t> x, y;
};
Batch random_batch(uint64_t seed, int64_t B, int64_t T, int64_t V) {
  Rng rng(seed);
  Batch b;
  for (int64_t i = 0; i < B * T; ++i) {
    b.x.push_back(static_cast<int32_t>(rng.below(static_cast<uint64_t>(V))));
    b.y.push_back(static_cast<int32_t>(rng.below(static_cast<uint64_t>(V))));
  }
  return b;
}

// A model, its replicas and a dropout Rng; gradients of one forward_backward.
template <class Model, class Config>
struct Sharded {
  Rng init_rng{5};
  Model model;
  Rng dropout_rng{99};
  Rng scratch{0};
  DataParallel dp;
  Sharded(const Config& c, int shards)
      : model(c, init_rng), dp(model, shards, [this, c] { return std::make_unique<Model>(c, scratch); }) {
    model.set_rng(&dropout_rng);
    model.train();
  }
  std::vector<std::vector<float>> grads() const {
    std::vector<std::vector<float>> g;
    for (const auto& p : model.named_parameters()) g.push_back(p.tensor.grad().to_vector());
    return g;
  }
};
using ShardedGpt = Sharded<GPT, GPTConfig>;
using ShardedSeq2Seq = Sharded<Seq2Seq, Seq2SeqConfig>;

float max_rel_diff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  float worst = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) {
    float scale = 1e-6f;
    for (float v : b[i]) scale = std::max(scale, std::fabs(v));
    for (size_t j = 0; j < a[i].size(); ++j) worst = std::max(worst, std::fabs(a[i][j] - b[i][j]) / scale);
  }
  return worst;
}

}  // namespace

TEST(DataParallel, ReplicaAliasesValuesKeepsTiesAndOwnGradients) {
  const GPTConfig c = small_gpt(0.0f);
  Rng a(1), b(2);
  GPT model(c, a), replica(c, b);
  replica.alias_parameters(model);
  const auto mp = model.named_parameters(), rp = replica.named_parameters();
  ASSERT_EQ(mp.size(), rp.size());
  for (size_t i = 0; i < mp.size(); ++i) {
    EXPECT_EQ(mp[i].name, rp[i].name);
    EXPECT_TRUE(rp[i].tensor.shares_storage(mp[i].tensor)) << mp[i].name;
    EXPECT_FALSE(rp[i].tensor.same(mp[i].tensor)) << mp[i].name << ": the replica needs its own gradient";
    EXPECT_TRUE(rp[i].tensor.requires_grad());
  }
  EXPECT_TRUE(replica.lm_head.weight.same(replica.transformer.wte.weight)) << "the tie was lost";
  // An update of the model's values is seen by the replica.
  model.transformer.wte.weight.data()[3] = 42.0f;
  EXPECT_EQ(replica.transformer.wte.weight.data()[3], 42.0f);
  // A backward through the replica fills the replica's gradients only.
  const Batch bt = random_batch(3, 2, c.block_size, c.vocab_size);
  backward(cross_entropy(replica.forward(bt.x, 2, c.block_size), bt.y));
  EXPECT_TRUE(replica.transformer.wte.weight.grad().defined());
  EXPECT_FALSE(model.transformer.wte.weight.grad().defined());
  // A model of another shape is refused.
  GPTConfig other = c;
  other.d_model = 8;
  GPT wrong(other, a);
  EXPECT_THROW(wrong.alias_parameters(model), Error);
}

TEST(DataParallel, ShardRowsCoverTheBatch) {
  ShardedGpt r(small_gpt(0.0f), 3);
  EXPECT_EQ(r.dp.rows(0, 7), (std::pair<int64_t, int64_t>{0, 2}));
  EXPECT_EQ(r.dp.rows(1, 7), (std::pair<int64_t, int64_t>{2, 4}));
  EXPECT_EQ(r.dp.rows(2, 7), (std::pair<int64_t, int64_t>{4, 7}));
  EXPECT_EQ(resolve_shards(0, 64), 2);
  EXPECT_EQ(resolve_shards(0, 1), 1);
  EXPECT_EQ(resolve_shards(4, 3), 3);
  EXPECT_THROW(resolve_shards(-1, 8), Error);
}

// Shards of uneven sizes, ignored targets and dropout: the loss and every gradient are those
// of the whole batch on one model, to rounding. Wrong dropout rows, a wrong share of the mean
// or a lost replica gradient would each be off by far more.
TEST(DataParallel, ShardedGradientsAreTheWholeBatchs) {
  const GPTConfig c = small_gpt(0.2f);
  const int64_t B = 5, T = c.block_size;
  Batch bt = random_batch(7, B, T, c.vocab_size);
  for (int64_t i = 0; i < B * T; i += 3) bt.y[static_cast<size_t>(i)] = -1;  // ignored targets
  ShardedGpt whole(c, 1);
  const double l1 = gpt_forward_backward(whole.dp, bt.x, bt.y, B, T);
  for (int shards : {2, 3, 5}) {
    ShardedGpt sharded(c, shards);
    const double ls = gpt_forward_backward(sharded.dp, bt.x, bt.y, B, T);
    EXPECT_NEAR(ls, l1, 1e-5 * std::fabs(l1)) << shards << " shards";
    EXPECT_LT(max_rel_diff(sharded.grads(), whole.grads()), 2e-5f) << shards << " shards";
    // The model's Rng advanced as the whole batch's did: the next step's masks agree too.
    EXPECT_EQ(sharded.dropout_rng.state(), whole.dropout_rng.state());
    // Replica gradients were handed over, not left behind.
    for (const auto& p : sharded.dp.model(shards - 1).named_parameters())
      EXPECT_FALSE(p.tensor.grad().defined()) << p.name;
  }
}

TEST(DataParallel, LossScaleAndAccumulation) {
  const GPTConfig c = small_gpt(0.0f);
  const int64_t B = 4, T = c.block_size;
  const Batch b1 = random_batch(11, B, T, c.vocab_size), b2 = random_batch(12, B, T, c.vocab_size);
  ShardedGpt whole(c, 1), sharded(c, 2);
  for (ShardedGpt* r : {&whole, &sharded}) {
    gpt_forward_backward(r->dp, b1.x, b1.y, B, T, 0.5f);
    gpt_forward_backward(r->dp, b2.x, b2.y, B, T, 0.5f);
  }
  EXPECT_LT(max_rel_diff(sharded.grads(), whole.grads()), 2e-5f);
}

TEST(DataParallel, ShardWithoutTargetsIsSkipped) {
  const GPTConfig c = small_gpt(0.0f);
  const int64_t B = 2, T = c.block_size;
  Batch bt = random_batch(13, B, T, c.vocab_size);
  for (int64_t i = T; i < 2 * T; ++i) bt.y[static_cast<size_t>(i)] = -1;  // row 1: nothing counts
  ShardedGpt whole(c, 1), sharded(c, 2);
  const double l1 = gpt_forward_backward(whole.dp, bt.x, bt.y, B, T);
  const double l2 = gpt_forward_backward(sharded.dp, bt.x, bt.y, B, T);
  EXPECT_NEAR(l2, l1, 1e-6 * std::fabs(l1));
  EXPECT_LT(max_rel_diff(sharded.grads(), whole.grads()), 2e-5f);
}

// 1 thread (shards one after the other), fewer threads than shards, as many, and more (4
// threads for 2 shards: each shard's kernels run nested regions of 2 threads).
TEST(DataParallel, ThreadCountChangesNoBit) {
  const GPTConfig c = small_gpt(0.1f);
  const int64_t B = 6, T = c.block_size;
  const Batch bt = random_batch(17, B, T, c.vocab_size);
  for (int shards : {2, 3}) {
    std::vector<std::vector<std::vector<float>>> grads;
    std::vector<double> losses;
    for (int threads : {1, 2, 3, 4}) {
      kernels::set_num_threads(threads);
      ShardedGpt r(c, shards);
      losses.push_back(gpt_forward_backward(r.dp, bt.x, bt.y, B, T));
      grads.push_back(r.grads());
    }
    kernels::set_num_threads(0);
    for (size_t i = 1; i < grads.size(); ++i) {
      EXPECT_EQ(losses[i], losses[0]) << shards << " shards, thread setting " << i;
      EXPECT_TRUE(same_bits(grads[i], grads[0])) << shards << " shards, thread setting " << i;
    }
  }
}

// Without ranks a parameter's gradients are summed as soon as every shard's is final, so a
// replica never holds a whole model's gradients. With 1 thread the shards run in order: when
// the last one's backward returns, inside run(), its replica already holds none, and the sum is
// the one run() gives with the sum at its end (the whole batch's, 2 threads: the same bits).
TEST(DataParallel, ReplicaGradientsAreSummedDuringTheBackward) {
  const GPTConfig c = small_gpt(0.1f);
  const int64_t B = 4, T = c.block_size;
  const Batch bt = random_batch(31, B, T, c.vocab_size);
  kernels::set_num_threads(2);
  ShardedGpt ref(c, 2);
  gpt_forward_backward(ref.dp, bt.x, bt.y, B, T);
  kernels::set_num_threads(1);
  ShardedGpt r(c, 2);
  int replica_grads_left = -1, model_grads = 0;
  r.dp.run(B, [&](int s, nn::Module& m, int64_t r0, int64_t r1) {
    auto& gpt = dynamic_cast<GPT&>(m);
    const std::vector<int32_t> x(bt.x.begin() + r0 * T, bt.x.begin() + r1 * T);
    const std::vector<int32_t> y(bt.y.begin() + r0 * T, bt.y.begin() + r1 * T);
    backward(gpt.loss(x, y, r1 - r0, T), Tensor::scalar(0.5f));  // each shard's share: 2 of 4 rows
    if (s != 1) return;
    replica_grads_left = 0;
    for (const auto& p : m.named_parameters()) replica_grads_left += p.tensor.grad().defined() ? 1 : 0;
    for (const auto& p : r.model.named_parameters()) model_grads += p.tensor.grad().defined() ? 1 : 0;
  });
  kernels::set_num_threads(0);
  EXPECT_EQ(replica_grads_left, 0);
  EXPECT_EQ(model_grads, static_cast<int>(r.model.named_parameters().size()));
  EXPECT_TRUE(same_bits(r.grads(), ref.grads()));
}

// A bad token id in the last shard's rows: the error reaches the caller, every shard's tape is
// cleared, and the next step is as if the failed one never ran.
TEST(DataParallel, FailingShardThrowsAndLeavesNoTape) {
  const GPTConfig c = small_gpt(0.0f);
  const int64_t B = 4, T = c.block_size;
  const Batch good = random_batch(19, B, T, c.vocab_size);
  Batch bad = good;
  bad.x.back() = static_cast<int32_t>(c.vocab_size + 5);
  kernels::set_num_threads(2);
  ShardedGpt r(c, 2), fresh(c, 2);
  EXPECT_THROW(gpt_forward_backward(r.dp, bad.x, bad.y, B, T), Error);
  r.model.zero_grad();
  for (const auto& p : r.model.named_parameters()) {
    Tensor t = p.tensor;
    t.clear_grad();
  }
  gpt_forward_backward(r.dp, good.x, good.y, B, T);
  gpt_forward_backward(fresh.dp, good.x, good.y, B, T);
  EXPECT_TRUE(same_bits(r.grads(), fresh.grads()));
  kernels::set_num_threads(0);
}

TEST(DataParallel, RejectsMismatchedBatches) {
  const GPTConfig c = small_gpt(0.0f);
  ShardedGpt r(c, 2);
  const Batch bt = random_batch(23, 2, c.block_size, c.vocab_size);
  EXPECT_THROW(gpt_forward_backward(r.dp, bt.x, bt.y, 3, c.block_size), Error);
  CrossEntropyOptions sum;
  sum.reduction = CrossEntropyOptions::Reduction::Sum;
  EXPECT_THROW(gpt_forward_backward(r.dp, bt.x, bt.y, 2, c.block_size, 1.0f, sum), Error);
}

// The dropout op's `first`: a range of rows gets exactly its part of the whole tensor's mask.
TEST(DataParallel, DropoutRowsAreTheWholeTensorsRows) {
  Rng data(29);
  const Tensor x = Tensor::randn({6, 10}, data);
  Rng r1(31), r2(31);
  const Tensor whole = dropout(x, 0.5f, true, r1);
  const Tensor part = dropout(slice(x, 0, 2, 5).contiguous(), 0.5f, true, r2, 2 * 10);
  const auto w = whole.to_vector(), p = part.to_vector();
  for (size_t i = 0; i < p.size(); ++i) ASSERT_EQ(p[i], w[20 + i]) << i;
  int zeros = 0;
  for (float v : p) zeros += v == 0.0f;
  EXPECT_GT(zeros, 0);
  EXPECT_LT(zeros, 30);
}

// ---- The encoder-decoder ----------------------------------------------------------------------

namespace {

Seq2SeqConfig small_seq2seq(float dropout) {
  Seq2SeqConfig c;
  c.src_vocab = 13;
  c.tgt_vocab = 11;
  c.max_len = 12;
  c.n_enc_layers = 2;
  c.n_dec_layers = 2;
  c.n_heads = 2;
  c.d_model = 16;
  c.dropout = dropout;
  return c;
}

// A padded batch of pairs of different lengths (ids past the specials 0, 1, 2).
Seq2SeqBatch random_pairs_batch(uint64_t seed, int64_t B, const Seq2SeqConfig& c) {
  Rng rng(seed);
  std::vector<EncodedPair> pairs(static_cast<size_t>(B));
  std::vector<int64_t> index;
  for (int64_t i = 0; i < B; ++i) {
    auto& p = pairs[static_cast<size_t>(i)];
    for (uint64_t t = 0, n = 1 + rng.below(8); t < n; ++t)
      p.src.push_back(3 + static_cast<int32_t>(rng.below(static_cast<uint64_t>(c.src_vocab - 3))));
    for (uint64_t t = 0, n = 1 + rng.below(8); t < n; ++t)
      p.tgt.push_back(3 + static_cast<int32_t>(rng.below(static_cast<uint64_t>(c.tgt_vocab - 3))));
    index.push_back(i);
  }
  return make_batch(pairs, index);
}

}  // namespace

// Rows of a padded batch keep its S and T, so a shard's dropout masks are its rows of the whole
// batch's: with dropout and label smoothing, the sharded loss and gradients are the whole
// batch's to rounding, and the thread count changes no bit.
TEST(DataParallel, Seq2SeqShardsAreTheWholeBatch) {
  const Seq2SeqConfig c = small_seq2seq(0.2f);
  const Seq2SeqBatch b = random_pairs_batch(23, 5, c);
  const Seq2SeqBatch rows = slice_rows(b, 1, 3);
  EXPECT_EQ(rows.B, 2);
  EXPECT_EQ(rows.S, b.S);
  EXPECT_EQ(rows.T, b.T);
  EXPECT_EQ(rows.tgt_out, std::vector<int32_t>(b.tgt_out.begin() + b.T, b.tgt_out.begin() + 3 * b.T));
  EXPECT_EQ(rows.src_mask, std::vector<uint8_t>(b.src_mask.begin() + b.S, b.src_mask.begin() + 3 * b.S));
  EXPECT_THROW(slice_rows(b, 3, 3), Error);
  EXPECT_THROW(slice_rows(b, 0, 6), Error);

  CrossEntropyOptions ce;
  ce.label_smoothing = 0.1f;
  ShardedSeq2Seq whole(c, 1);
  const double l1 = seq2seq_forward_backward(whole.dp, b, 1.0f, ce);
  for (int shards : {2, 3}) {
    ShardedSeq2Seq sharded(c, shards);
    const double ls = seq2seq_forward_backward(sharded.dp, b, 1.0f, ce);
    EXPECT_NEAR(ls, l1, 1e-5 * std::fabs(l1)) << shards << " shards";
    EXPECT_LT(max_rel_diff(sharded.grads(), whole.grads()), 2e-5f) << shards << " shards";
    EXPECT_EQ(sharded.dropout_rng.state(), whole.dropout_rng.state());
  }
  std::vector<std::vector<std::vector<float>>> grads;
  for (int threads : {1, 2}) {
    kernels::set_num_threads(threads);
    ShardedSeq2Seq r(c, 2);
    seq2seq_forward_backward(r.dp, b, 1.0f, ce);
    grads.push_back(r.grads());
  }
  kernels::set_num_threads(0);
  EXPECT_TRUE(same_bits(grads[1], grads[0]));
}
