// GPT: nanoGPT parameter names, initialisation, KV-cache decoding equals the full forward,
// overfitting one batch, configuration errors, the chunked loss.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "models/gpt.h"

using namespace atto;

namespace {
GPTConfig small_config() {
  GPTConfig c;
  c.vocab_size = 11;
  c.block_size = 8;
  c.n_layers = 2;
  c.n_heads = 2;
  c.d_model = 8;
  return c;
}
std::vector<int32_t> tokens(int64_t n, uint64_t seed, int32_t V) {
  Rng r(seed);
  std::vector<int32_t> v(n);
  for (auto& t : v) t = static_cast<int32_t>(r.below(V));
  return v;
}
}  // namespace

TEST(GPT, NanoGptNamesShapesAndTying) {
  Rng rng(0);
  GPT m(small_config(), rng);
  auto sd = m.state_dict();
  std::vector<std::string> names;
  for (auto& [n, t] : sd) names.push_back(n);
  EXPECT_EQ(names.front(), "transformer.wte.weight");
  EXPECT_EQ(names[1], "transformer.wpe.weight");
  EXPECT_EQ(names[2], "transformer.h.0.ln_1.weight");
  EXPECT_EQ(names.back(), "lm_head.weight");
  EXPECT_NE(std::find(names.begin(), names.end(), "transformer.h.1.attn.c_attn.weight"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "transformer.ln_f.bias"), names.end());
  EXPECT_TRUE(m.lm_head.weight.same(m.transformer.wte.weight));
  // named_parameters lists the tied tensor once; state_dict under both names.
  EXPECT_EQ(m.named_parameters().size() + 1, sd.size());
  // GPT-2 init: std 0.02, residual projections 0.02/sqrt(2 n_layers), zero biases.
  auto stdev = [](const Tensor& t) {
    double s = 0, s2 = 0;
    for (float v : t.to_vector()) s += v, s2 += double(v) * v;
    const double n = t.numel();
    return std::sqrt(s2 / n - (s / n) * (s / n));
  };
  GPTConfig big = small_config();
  big.d_model = 64;
  big.vocab_size = 500;
  GPT g(big, rng);
  EXPECT_NEAR(stdev(g.transformer.wte.weight), 0.02, 0.002);
  EXPECT_NEAR(stdev(g.transformer.h[0]->mlp.c_proj.weight), 0.02 / std::sqrt(4.0), 0.002);
  EXPECT_EQ(g.transformer.h[0]->attn.c_attn.bias.to_vector(), std::vector<float>(192, 0.0f));
}

TEST(GPT, KvCacheDecodingEqualsFullForward) {
  for (PosKind pos : {PosKind::Learned, PosKind::Sinusoidal, PosKind::Rope})
    for (int pre_kv = 0; pre_kv < 3; ++pre_kv) {  // pre-norm, post-norm, pre-norm with one key/value head
      Rng rng(1);
      GPTConfig c = small_config();
      c.pos = pos;
      c.pre_norm = pre_kv != 1;
      c.n_kv_heads = pre_kv == 2 ? 1 : 0;
      GPT m(c, rng);
      m.eval();
      const int64_t B = 2, T = 7;
      const auto idx = tokens(B * T, 2, 11);
      NoGradGuard ng;
      const Tensor full = m.forward(idx, B, T);  // [B, T, V]
      GPT::Cache cache = m.make_cache(B, T);
      // A 3-token prefix at once, then one token at a time.
      auto take = [&](int64_t t0, int64_t n) {
        std::vector<int32_t> v;
        for (int64_t b = 0; b < B; ++b)
          for (int64_t t = t0; t < t0 + n; ++t) v.push_back(idx[b * T + t]);
        return v;
      };
      Tensor first = m.forward_cached(take(0, 3), B, 3, cache);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < 3; ++t)
          for (int64_t v = 0; v < 11; ++v) EXPECT_NEAR(first.at({b, t, v}), full.at({b, t, v}), 1e-5);
      for (int64_t t = 3; t < T; ++t) {
        Tensor step = m.forward_cached(take(t, 1), B, 1, cache);
        for (int64_t b = 0; b < B; ++b)
          for (int64_t v = 0; v < 11; ++v) EXPECT_NEAR(step.at({b, 0, v}), full.at({b, t, v}), 1e-5) << t;
      }
      EXPECT_EQ(cache.len, T);
      EXPECT_THROW(m.forward_cached(take(0, 1), B, 1, cache), Error);  // cache full
    }
}

// Grouped-query attention is multi-head attention whose key/value heads are repeated for their
// groups: a GQA model and the MHA model with c_attn's key and value rows repeated compute the same
// logits and the same gradients of the shared weights (the repeated rows' gradients summed).
TEST(GPT, GroupedQueryAttentionIsMultiHeadWithRepeatedKeyValueHeads) {
  Rng rng(3);
  GPTConfig c = small_config();
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.pos = PosKind::Rope;
  c.rope_base = 500000.0f;
  GPT gqa(c, rng);
  GPTConfig mc = c;
  mc.n_kv_heads = 0;
  GPT mha(mc, rng);
  const int64_t C = c.d_model, HS = C / c.n_heads, KV = 2 * HS;
  auto widen = [&](const Tensor& w) {  // rows [C + 2 KV, ...] -> [3C, ...]: head h takes kv head h / 2
    std::vector<Tensor> rows = {slice(w, 0, 0, C)};
    for (int64_t block = 0; block < 2; ++block)
      for (int64_t h = 0; h < c.n_heads; ++h) {
        const int64_t r0 = C + block * KV + (h / 2) * HS;
        rows.push_back(slice(w, 0, r0, r0 + HS));
      }
    return concat(rows, 0).contiguous();
  };
  std::vector<std::pair<std::string, Tensor>> state;
  for (auto& [name, t] : gqa.state_dict())
    state.emplace_back(name, name.find("c_attn") != std::string::npos ? widen(t) : t.contiguous());
  mha.load_state_dict(state, "test");
  EXPECT_EQ(gqa.transformer.h[0]->attn.c_attn.weight.size(0), C + 2 * KV);
  const int64_t B = 2, T = 7;
  const auto idx = tokens(B * T, 5, 11);
  std::vector<int32_t> targets(idx.begin() + 1, idx.end());
  targets.push_back(0);
  // One forward and backward at a time: a backward consumes the whole tape.
  Tensor lg = gqa.forward(idx, B, T);
  backward(cross_entropy(lg, targets));
  Tensor lm = mha.forward(idx, B, T);
  backward(cross_entropy(lm, targets));
  for (int64_t i = 0; i < lg.numel(); ++i) ASSERT_NEAR(lg.data()[i], lm.data()[i], 1e-5) << i;
  const Tensor gw = gqa.transformer.h[1]->attn.c_attn.weight.grad(),
               mw = mha.transformer.h[1]->attn.c_attn.weight.grad();
  // The key rows of kv head 1 in GQA = the sum of MHA's rows of query heads 2 and 3's keys.
  for (int64_t r = 0; r < HS; ++r)
    for (int64_t j = 0; j < C; ++j)
      ASSERT_NEAR(gw.at({C + HS + r, j}), mw.at({C + 2 * HS + r, j}) + mw.at({C + 3 * HS + r, j}), 1e-5);
  for (int64_t j = 0; j < C; ++j) ASSERT_NEAR(gw.at({0, j}), mw.at({0, j}), 1e-6);  // a query row
}

TEST(GPT, OverfitsOneBatch) {
  Rng rng(3);
  GPTConfig c = small_config();
  c.d_model = 16;
  GPT m(c, rng);
  const int64_t B = 4, T = 8;
  const auto x = tokens(B * T, 4, 11);
  auto y = tokens(B * T, 5, 11);
  y[3] = -1;  // an ignored target
  float first = 0, last = 0;
  for (int step = 0; step < 150; ++step) {
    m.zero_grad();
    Tensor loss = cross_entropy(m.forward(x, B, T), y);
    backward(loss);
    if (step == 0) first = loss.item();
    last = loss.item();
    for (auto& p : m.named_parameters()) {  // plain SGD
      float* w = Tensor(p.tensor).data();
      const float* g = p.tensor.grad().data();
      for (int64_t i = 0; i < p.tensor.numel(); ++i) w[i] -= 0.5f * g[i];
    }
  }
  EXPECT_GT(first, 2.0f);
  EXPECT_LT(last, 0.1f) << "first " << first;
}

TEST(GPT, ConfigErrorsNameTheField) {
  Rng rng(0);
  GPTConfig c = small_config();
  c.n_heads = 3;
  try {
    GPT m(c, rng);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("d_model (8) must be a positive multiple of n_heads (3)"), std::string::npos);
  }
  c = small_config();
  c.n_layers = 0;
  EXPECT_THROW(GPT(c, rng), Error);
  c = small_config();
  c.n_heads = 4;
  c.n_kv_heads = 3;
  try {
    GPT m(c, rng);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("n_kv_heads (3) must divide n_heads (4)"), std::string::npos) << e.what();
  }
  c = small_config();
  c.rope_base = 0.5f;
  EXPECT_THROW(GPT(c, rng), Error);
  c = small_config();
  GPT m(c, rng);
  EXPECT_THROW(m.forward(tokens(9, 1, 11), 1, 9), Error);  // longer than the block
  EXPECT_THROW(m.forward({0, 1, 99}, 1, 3), Error);        // token outside the vocabulary
}

// A context beyond kMaxPositions is refused by validate() before any table is allocated (a
// damaged config.json with block_size 1e9 asked the sinusoidal table alone for 64e9 floats).
TEST(GPT, BlockSizeIsBounded) {
  GPTConfig c = small_config();
  c.block_size = kMaxPositions;
  EXPECT_NO_THROW(c.validate());
  for (PosKind pos : {PosKind::Learned, PosKind::Sinusoidal, PosKind::Rope}) {
    c.pos = pos;
    c.block_size = 1000000000;
    try {
      c.validate();
      FAIL() << "block_size 1e9 accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("block_size must be in [1, 65536]"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("1000000000"), std::string::npos) << e.what();
    }
  }
}

// GPT::loss (the head and the loss in row chunks) is cross_entropy of forward's logits: the same
// loss and the same gradients up to rounding, for tied and untied heads.
TEST(GPT, LossEqualsCrossEntropyOfTheLogits) {
  for (bool tied : {true, false}) {
    GPTConfig c = small_config();
    c.tie_weights = tied;
    const int64_t B = 3, T = 8;
    const auto x = tokens(B * T, 6, 11);
    auto y = tokens(B * T, 7, 11);
    y[5] = -1;
    auto run = [&](bool fused) {
      Rng rng(8);
      GPT m(c, rng);
      m.zero_grad();
      Tensor loss = fused ? m.loss(x, y, B, T) : cross_entropy(m.forward(x, B, T), y);
      backward(loss, Tensor::scalar(0.75f));
      std::vector<Tensor> out{loss.detach()};
      for (auto& p : m.named_parameters()) out.push_back(p.tensor.grad().clone());
      return out;
    };
    const auto a = run(true), b = run(false);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      const float* pa = a[i].data();
      const float* pb = b[i].data();
      for (int64_t j = 0; j < a[i].numel(); ++j) ASSERT_NEAR(pa[j], pb[j], 1e-6f) << "tensor " << i << " at " << j;
    }
  }
}
