// The gradient-ready callbacks that let GradExchange (train/grad_exchange.h) send a bucket while
// the backward pass goes on (Tape::watch): each watched parameter is reported exactly once, and
// only after every node that adds to its gradient has run, so what a rank sends early is the
// final gradient. Checked on a GPT with tied embeddings and dropout, on an encoder-decoder, and
// with gradients already accumulated from an earlier micro-batch.
#include <gtest/gtest.h>

#include <cstring>

#include "autograd/tape.h"
#include "models/gpt.h"
#include "models/seq2seq.h"
#include "train/grad_exchange.h"

using namespace atto;

namespace {

// Watches every parameter of `model` during forward_and_backward(); at each report, copies the
// parameter's gradient. Then checks: every parameter reported once, the copy equal bit for bit
// to the gradient after backward, and reports coming before the backward's end for most.
template <class RunStep>
void expect_reports_final(nn::Module& model, const RunStep& forward_and_backward) {
  std::vector<Tensor> params;
  for (const NamedParameter& p : model.named_parameters()) params.push_back(p.tensor);
  std::vector<int> reports(params.size(), 0);
  std::vector<std::vector<float>> seen(params.size());
  std::vector<size_t> order;
  tape().watch(params, [&](size_t i) {
    reports[i]++;
    order.push_back(i);
    const Tensor g = params[i].grad();
    if (g.defined()) seen[i] = g.to_vector();
  });
  EXPECT_TRUE(tape().watching());
  forward_and_backward();
  EXPECT_FALSE(tape().watching()) << "backward() ends the watch";
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(reports[i], 1) << model.named_parameters()[i].name;
    const Tensor g = params[i].grad();
    ASSERT_TRUE(g.defined()) << model.named_parameters()[i].name;
    const std::vector<float> final_grad = g.to_vector();
    ASSERT_EQ(seen[i].size(), final_grad.size()) << model.named_parameters()[i].name;
    EXPECT_EQ(std::memcmp(seen[i].data(), final_grad.data(), final_grad.size() * sizeof(float)), 0)
        << model.named_parameters()[i].name << " was reported before its last gradient arrived";
  }
  // The last layers' parameters are reported first (backward order): the head's or final norm's
  // before the first block's.
  ASSERT_EQ(order.size(), params.size());
  EXPECT_GT(order.front(), order.back());
}

GPTConfig gpt_config() {
  GPTConfig c;
  c.vocab_size = 13;
  c.block_size = 8;
  c.n_layers = 2;
  c.n_heads = 2;
  c.d_model = 16;
  c.dropout = 0.1f;
  return c;
}

}  // namespace

TEST(TapeWatch, GptReportsEachParameterOnceWithItsFinalGradient) {
  Rng init(3), drop(4);
  GPT gpt(gpt_config(), init);  // tied embeddings: wte is used first and last
  gpt.set_rng(&drop);
  gpt.train();
  std::vector<int32_t> x(16), y(16);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int32_t>(i % 13), y[i] = static_cast<int32_t>((i * 5) % 13);
  expect_reports_final(gpt, [&] { backward(cross_entropy(gpt.forward(x, 2, 8), y)); });
  // A second micro-batch adds to the gradients already there: reported once each, final again.
  expect_reports_final(gpt, [&] { backward(cross_entropy(gpt.forward(y, 2, 8), x)); });
}

TEST(TapeWatch, Seq2SeqReportsEachParameterOnceWithItsFinalGradient) {
  Seq2SeqConfig c;
  c.src_vocab = 11;
  c.tgt_vocab = 12;
  c.max_len = 10;
  c.n_enc_layers = 2;
  c.n_dec_layers = 2;
  c.n_heads = 2;
  c.d_model = 16;
  c.dropout = 0.1f;
  Rng init(7), drop(8);
  Seq2Seq model(c, init);
  model.set_rng(&drop);
  model.train();
  const std::vector<int32_t> src = {3, 4, 5, 6, 7, 8, 9, 10}, tgt_in = {1, 4, 5, 6, 7, 8}, tgt_out = {4, 5, 6, 7, 8, 2};
  const std::vector<uint8_t> src_mask(8, 1), tgt_mask(6, 1);
  expect_reports_final(model, [&] {
    const Tensor memory = model.encode(src, 2, 4, src_mask);
    backward(cross_entropy(model.decode(tgt_in, 2, 3, memory, src_mask, tgt_mask), tgt_out));
  });
}

TEST(TapeWatch, RejectsAWatchAfterTheForward) {
  Rng init(3);
  GPTConfig c = gpt_config();
  c.dropout = 0.0f;
  GPT gpt(c, init);
  const Tensor logits = gpt.forward({1, 2, 3, 4}, 1, 4);
  std::vector<Tensor> params;
  for (const NamedParameter& p : gpt.named_parameters()) params.push_back(p.tensor);
  EXPECT_THROW(tape().watch(params, [](size_t) {}), Error);
  tape().clear();
}
