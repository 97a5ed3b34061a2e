// Seq2Seq: names, shared/tied embeddings, cached decoding equals the full decoder (with source
// padding), padding does not leak, overfitting a small batch.
#include <gtest/gtest.h>

#include "base/error.h"
#include "models/seq2seq.h"

using namespace atto;

namespace {
Seq2SeqConfig small() {
  Seq2SeqConfig c;
  c.src_vocab = 9;
  c.tgt_vocab = 11;
  c.max_len = 10;
  c.n_enc_layers = 2;
  c.n_dec_layers = 2;
  c.n_heads = 2;
  c.d_model = 8;
  c.dropout = 0.0f;
  return c;
}
std::vector<int32_t> ids(int64_t n, uint64_t seed, int32_t V) {
  Rng r(seed);
  std::vector<int32_t> v(n);
  for (auto& t : v) t = static_cast<int32_t>(r.below(V));
  return v;
}
}  // namespace

TEST(Seq2Seq, NamesAndSharing) {
  Rng rng(0);
  Seq2SeqConfig c = small();
  Seq2Seq m(c, rng);
  std::vector<std::string> names;
  for (auto& [n, t] : m.state_dict()) names.push_back(n);
  for (const char* want :
       {"encoder.embed_tokens.weight", "encoder.layers.1.attn.c_attn.weight",
        "decoder.layers.0.cross_attn.kv_proj.weight", "decoder.layers.1.ln_3.bias", "lm_head.weight"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  EXPECT_TRUE(m.lm_head.weight.same(m.decoder.embed_tokens.weight));
  EXPECT_FALSE(m.decoder.embed_tokens.weight.same(m.encoder.embed_tokens.weight));
  c.tgt_vocab = c.src_vocab;
  c.share_embeddings = true;
  Seq2Seq shared(c, rng);
  EXPECT_TRUE(shared.decoder.embed_tokens.weight.same(shared.encoder.embed_tokens.weight));
  EXPECT_TRUE(shared.lm_head.weight.same(shared.encoder.embed_tokens.weight));
  c.src_vocab = 5;
  EXPECT_THROW(Seq2Seq(c, rng), Error);  // shared vocabulary of unequal sizes
}

TEST(Seq2Seq, CachedDecodingEqualsFullDecoder) {
  for (bool pre : {false, true}) {
    Rng rng(1);
    Seq2SeqConfig c = small();
    c.pre_norm = pre;
    Seq2Seq m(c, rng);
    m.eval();
    NoGradGuard ng;
    const int64_t B = 2, S = 5, T = 6;
    const auto src = ids(B * S, 2, 9);
    const std::vector<uint8_t> src_mask = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
    const auto tgt = ids(B * T, 3, 11);
    Tensor memory = m.encode(src, B, S, src_mask);
    Tensor full = m.decode(tgt, B, T, memory, src_mask, {});
    Seq2Seq::Cache cache = m.make_cache(memory, src_mask, T);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int32_t> step = {tgt[t], tgt[T + t]};
      Tensor l = m.decode_cached(step, B, 1, cache);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t v = 0; v < 11; ++v) ASSERT_NEAR(l.at({b, 0, v}), full.at({b, t, v}), 1e-5) << pre << " " << t;
    }
    // Reordering the cache (beam search) permutes rows consistently.
    Seq2Seq::Cache c2 = m.make_cache(memory, src_mask, T);
    m.decode_cached({tgt[0], tgt[T]}, B, 1, c2);
    c2.reorder({1, 1});
    Tensor l2 = m.decode_cached({tgt[T + 1], tgt[T + 1]}, B, 1, c2);
    for (int64_t v = 0; v < 11; ++v) {
      EXPECT_NEAR(l2.at({0, 0, v}), full.at({1, 1, v}), 1e-5);
      EXPECT_NEAR(l2.at({1, 0, v}), full.at({1, 1, v}), 1e-5);
    }
  }
}

TEST(Seq2Seq, SourcePaddingDoesNotLeak) {
  Rng rng(4);
  Seq2Seq m(small(), rng);
  m.eval();
  NoGradGuard ng;
  // The same sentence with two different pad contents gives the same logits.
  std::vector<int32_t> a = {3, 4, 5, 0, 0}, b = {3, 4, 5, 7, 8};
  const std::vector<uint8_t> mask = {1, 1, 1, 0, 0};
  const std::vector<int32_t> tgt = {1, 2, 3};
  Tensor la = m.decode(tgt, 1, 3, m.encode(a, 1, 5, mask), mask, {});
  Tensor lb = m.decode(tgt, 1, 3, m.encode(b, 1, 5, mask), mask, {});
  EXPECT_LE(max_abs_diff(la, lb), 1e-6f);
}

TEST(Seq2Seq, LearnsToCopyASmallBatch) {
  Rng rng(5);
  Seq2SeqConfig c = small();
  c.d_model = 16;
  Seq2Seq m(c, rng);
  const int64_t B = 4, S = 5;
  const auto src = ids(B * S, 6, 9);
  // target input: [BOS=10, src...] (target vocab ids 0..8 mirror the source), target output: [src..., EOS=9]
  std::vector<int32_t> tin, tout;
  for (int64_t b = 0; b < B; ++b) {
    tin.push_back(10);
    for (int64_t s = 0; s < S; ++s) tin.push_back(src[b * S + s]);
    for (int64_t s = 0; s < S; ++s) tout.push_back(src[b * S + s]);
    tout.push_back(9);
  }
  float first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    m.zero_grad();
    Tensor loss = cross_entropy(m.decode(tin, B, S + 1, m.encode(src, B, S, {}), {}, {}), tout);
    backward(loss);
    if (step == 0) first = loss.item();
    last = loss.item();
    for (auto& p : m.named_parameters()) {
      float* w = Tensor(p.tensor).data();
      const float* g = p.tensor.grad().data();
      for (int64_t i = 0; i < p.tensor.numel(); ++i) w[i] -= 0.1f * g[i];
    }
  }
  EXPECT_LT(last, 0.1f * first) << "first " << first << " last " << last;
}

TEST(Seq2Seq, MaxLenIsBounded) {
  Seq2SeqConfig c = small();
  c.max_len = kMaxPositions;
  EXPECT_NO_THROW(c.validate());
  c.max_len = kMaxPositions + 1;
  try {
    c.validate();
    FAIL() << "max_len beyond the limit accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_len must be in [1, 65536]"), std::string::npos) << e.what();
  }
}
