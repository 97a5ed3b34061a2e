// Whole-model PyTorch parity of atto's encoder-decoder Transformer (reference:
// tests/parity/ref_seq2seq.py, torch 1.13 primitives in float64).
//
// Direction atto -> PyTorch: atto builds a small Seq2Seq (its own Xavier initialisation, then
// biases and norm gains moved off 0 and 1 so that a misplaced bias or gain shows), saves it with
// save_model_weights, builds a padded batch with make_batch (3 pairs of different source and
// target lengths), and the reference loads the file with load_state_dict(strict=True), no
// renaming. atto must reproduce, within 1e-4:
//   - the logits [B, T, V] (padded positions included), the loss (with its label smoothing),
//   - the gradient of every parameter, under the same names (a tied tensor once, first name).
// Padding: changing the ids in the padded positions (source and target) must change neither
// atto's logits at real target positions, nor its loss and gradients; the reference checks the
// same of itself, and both check that with the masks off the change is visible (so the padding
// check can fail). The reference computes in float64, so the differences are atto's float32
// rounding (measured: logits, loss, gradients <= 1e-6, see the printed summary).
//
// Cases: the paper (post-norm, sinusoidal positions, ReLU, LayerNorm, decoder embedding tied to
// the output, separate vocabularies, label smoothing 0.1); pre-norm (ln_f per stack) + learned
// positions + GELU + one vocabulary (encoder, decoder and output embeddings one tensor); and
// RMSNorm + SwiGLU + no bias + untied output + 1 encoder / 3 decoder layers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "data/seq2seq_batches.h"
#include "models/seq2seq.h"
#include "parity/harness.h"
#include "run/run_config.h"
#include "run/run_dir.h"
#include "support.h"

namespace atto {
namespace {
namespace seq2seq_parity {

using atto::test::TempDir;
using test::compare;
using test::num;
using test::split_names;

constexpr float kTol = 1e-4f;
// Pad contents cannot reach real positions through -inf scores; allow float32 GEMM noise only.
constexpr float kPadTol = 1e-6f;

Seq2SeqConfig base_config() {
  Seq2SeqConfig c;
  c.src_vocab = 11;
  c.tgt_vocab = 13;
  c.max_len = 12;
  c.n_enc_layers = 2;
  c.n_dec_layers = 2;
  c.n_heads = 2;
  c.d_model = 16;
  c.dropout = 0.0f;
  return c;
}

std::vector<std::string> reference_args(const Seq2SeqConfig& c, float label_smoothing, const std::string& weights,
                                        const std::string& batch) {
  const nn::BlockConfig bc = c.block_config();
  return {"--weights",
          weights,
          "--batch",
          batch,
          "--src-vocab",
          std::to_string(c.src_vocab),
          "--tgt-vocab",
          std::to_string(c.tgt_vocab),
          "--max-len",
          std::to_string(c.max_len),
          "--n-enc",
          std::to_string(c.n_enc_layers),
          "--n-dec",
          std::to_string(c.n_dec_layers),
          "--n-head",
          std::to_string(c.n_heads),
          "--d-model",
          std::to_string(c.d_model),
          "--d-ff",
          std::to_string(bc.d_ff),
          "--activation",
          to_string(c.activation),
          "--norm",
          c.norm == nn::NormKind::RMSNorm ? "rmsnorm" : "layernorm",
          "--pre-norm",
          c.pre_norm ? "1" : "0",
          "--bias",
          c.bias ? "1" : "0",
          "--pos",
          c.pos == PosKind::Learned ? "learned" : "sinusoidal",
          "--share",
          c.share_embeddings ? "1" : "0",
          "--tie",
          c.tie_weights ? "1" : "0",
          "--norm-eps",
          num(bc.norm_eps),
          "--label-smoothing",
          num(label_smoothing)};
}

// Biases 0 and norm gains 1 (atto's initialisation) would hide a bias or gain applied in the
// wrong place; move them to random values.
void perturb(Seq2Seq& model, Rng& rng) {
  for (const NamedParameter& p : model.named_parameters()) {
    Tensor t = p.tensor;
    if (p.kind == ParamKind::Bias || (p.kind == ParamKind::Norm && p.name.ends_with(".bias")))
      t.copy_from(Tensor::rand(t.shape(), rng, -0.2f, 0.2f));
    else if (p.kind == ParamKind::Norm)
      t.copy_from(Tensor::rand(t.shape(), rng, 0.7f, 1.3f));
  }
}

// Three pairs of different source (7, 3, 5) and target (4, 6, 2) lengths; ids avoid the
// special ids pad 0, bos 1, eos 2.
std::vector<EncodedPair> make_pairs(const Seq2SeqConfig& c) {
  auto ids = [](int64_t n, int64_t V, int64_t seed) {
    std::vector<int32_t> v;
    for (int64_t t = 0; t < n; ++t) v.push_back(static_cast<int32_t>(3 + (seed + 5 * t + t * t) % (V - 3)));
    return v;
  };
  return {{ids(7, c.src_vocab, 0), ids(4, c.tgt_vocab, 1), 1},
          {ids(3, c.src_vocab, 2), ids(6, c.tgt_vocab, 3), 2},
          {ids(5, c.src_vocab, 4), ids(2, c.tgt_vocab, 5), 3}};
}

// The same batch with other ids in every padded position (source and target input).
struct AltIds {
  std::vector<int32_t> src, tgt_in;
};
AltIds alt_ids(const Seq2SeqBatch& b, const Seq2SeqConfig& c) {
  AltIds a{b.src, b.tgt_in};
  for (size_t i = 0; i < a.src.size(); ++i)
    if (!b.src_mask[i]) a.src[i] = static_cast<int32_t>(3 + (7 * static_cast<int64_t>(i)) % (c.src_vocab - 3));
  for (size_t i = 0; i < a.tgt_in.size(); ++i)
    if (!b.tgt_mask[i]) a.tgt_in[i] = static_cast<int32_t>(3 + (5 * static_cast<int64_t>(i)) % (c.tgt_vocab - 3));
  return a;
}

template <typename T>
Tensor as_float_tensor(const std::vector<T>& v, int64_t B, int64_t n) {
  return Tensor::from_vector({B, n}, std::vector<float>(v.begin(), v.end()));
}

// The rows [B*T, V] of logits at real target positions (tgt_mask = 1), as [N, V].
Tensor real_rows(const Tensor& logits, const std::vector<uint8_t>& tgt_mask) {
  const int64_t V = logits.size(2);
  const std::vector<float> all = logits.to_vector();
  std::vector<float> out;
  for (size_t r = 0; r < tgt_mask.size(); ++r)
    if (tgt_mask[r]) out.insert(out.end(), all.begin() + r * V, all.begin() + (r + 1) * V);
  return Tensor::from_vector({static_cast<int64_t>(out.size()) / V, V}, out);
}

struct Run {
  Tensor logits, loss;
  std::vector<Tensor> grads;  // named_parameters order
};
Run forward_backward(Seq2Seq& model, const Seq2SeqBatch& b, const std::vector<int32_t>& src,
                     const std::vector<int32_t>& tgt_in, float label_smoothing) {
  model.zero_grad();
  Run r;
  Tensor memory = model.encode(src, b.B, b.S, b.src_mask);
  r.logits = model.decode(tgt_in, b.B, b.T, memory, b.src_mask, b.tgt_mask);
  CrossEntropyOptions ce;
  ce.label_smoothing = label_smoothing;
  r.loss = cross_entropy(r.logits, b.tgt_out, ce);
  backward(r.loss);
  for (const NamedParameter& p : model.named_parameters()) {
    const Tensor g = p.tensor.grad();
    r.grads.push_back(g.defined() ? g.contiguous() : Tensor());
  }
  return r;
}

struct Diffs {
  float logits = 0, loss = 0, grad = 0, pad = 0;
  std::string worst_grad = "-";
};

void check_against_reference(Seq2Seq& model, const Run& run, const io::SafetensorsFile& ref, Diffs& d) {
  d.logits = compare(run.logits, ref.get("logits"), kTol, "logits");
  d.loss = std::fabs(run.loss.item() - ref.get("loss").item());
  EXPECT_LE(d.loss, kTol) << "loss: atto " << run.loss.item() << " PyTorch " << ref.get("loss").item();
  std::set<std::string> names;
  const NamedParameters params = model.named_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string& name = params[i].name;
    names.insert(name);
    const std::string key = "grad." + name;
    if (!ref.contains(key)) {
      ADD_FAILURE() << "the reference has no gradient of " << name;
      continue;
    }
    ASSERT_TRUE(run.grads[i].defined()) << name << " got no gradient";
    const float e = compare(run.grads[i], ref.get(key), kTol, key);
    if (!(e <= d.grad)) d.grad = e, d.worst_grad = name;
  }
  EXPECT_EQ(names, split_names(ref, "params")) << "atto's and PyTorch's parameter names differ";
}

// Pad contents must not matter to atto (logits at real positions, loss, gradients), must not
// matter to the reference either, and must matter once the source mask is off.
void check_padding(Seq2Seq& model, const Seq2SeqBatch& b, const AltIds& alt, const Run& run, float ls,
                   const io::SafetensorsFile& ref, Diffs& d) {
  const Run a = forward_backward(model, b, alt.src, alt.tgt_in, ls);
  const Tensor want = real_rows(run.logits, b.tgt_mask);
  d.pad = compare(real_rows(a.logits, b.tgt_mask), want, kPadTol, "atto logits with other pad contents");
  EXPECT_LE(std::fabs(a.loss.item() - run.loss.item()), kPadTol) << "the loss depends on pad contents";
  const NamedParameters params = model.named_parameters();
  for (size_t i = 0; i < params.size(); ++i)
    d.pad = std::max(d.pad, compare(a.grads[i], run.grads[i], kPadTol, "pad-invariance of grad." + params[i].name));
  compare(real_rows(ref.get("logits_alt"), b.tgt_mask), real_rows(ref.get("logits"), b.tgt_mask), kPadTol,
          "reference logits with other pad contents");

  NoGradGuard ng;
  auto unmasked = [&](const std::vector<int32_t>& src) {
    Tensor memory = model.encode(src, b.B, b.S, {});
    return real_rows(model.decode(b.tgt_in, b.B, b.T, memory, {}, b.tgt_mask), b.tgt_mask);
  };
  EXPECT_GT(max_abs_diff(unmasked(alt.src), unmasked(b.src)), 1e-3f)
      << "without a source mask the pad contents change nothing: the padding check is vacuous";
}

void run_case(const std::string& name, const Seq2SeqConfig& cfg, float label_smoothing) {
  TempDir dir("s2s_parity_" + name);
  Rng rng(4321);
  Seq2Seq model(cfg, rng);
  perturb(model, rng);
  const std::string weights = dir / "model.safetensors";
  const std::string batch_path = dir / "batch.safetensors";
  save_model_weights(weights, model);

  const std::vector<EncodedPair> pairs = make_pairs(cfg);
  const Seq2SeqBatch b = make_batch(pairs, {0, 1, 2});
  ASSERT_EQ(b.B, 3);
  ASSERT_EQ(b.S, 7);
  ASSERT_EQ(b.T, 7);  // longest target 6 + BOS / EOS
  const AltIds alt = alt_ids(b, cfg);
  ASSERT_NE(alt.src, b.src);
  ASSERT_NE(alt.tgt_in, b.tgt_in);
  io::save_safetensors(batch_path, {{"src", as_float_tensor(b.src, b.B, b.S)},
                                    {"src_mask", as_float_tensor(b.src_mask, b.B, b.S)},
                                    {"tgt_in", as_float_tensor(b.tgt_in, b.B, b.T)},
                                    {"tgt_out", as_float_tensor(b.tgt_out, b.B, b.T)},
                                    {"tgt_mask", as_float_tensor(b.tgt_mask, b.B, b.T)},
                                    {"src_alt", as_float_tensor(alt.src, b.B, b.S)},
                                    {"tgt_in_alt", as_float_tensor(alt.tgt_in, b.B, b.T)}});

  const io::SafetensorsFile ref =
      test::run_reference("ref_seq2seq.py", name, reference_args(cfg, label_smoothing, weights, batch_path));
  Diffs d;
  const Run run = forward_backward(model, b, b.src, b.tgt_in, label_smoothing);
  check_against_reference(model, run, ref, d);
  check_padding(model, b, alt, run, label_smoothing, ref, d);
  std::printf("[ parity   ] seq2seq %-14s logits %.2e  loss %.2e  grads %.2e (%s)  pad invariance %.2e\n", name.c_str(),
              static_cast<double>(d.logits), static_cast<double>(d.loss), static_cast<double>(d.grad),
              d.worst_grad.c_str(), static_cast<double>(d.pad));
}

TEST(Seq2SeqParity, PaperModelMatchesPyTorch) {
  ATTO_REQUIRE_TORCH();
  Seq2SeqConfig c = base_config();  // post-norm, sinusoidal, ReLU, LayerNorm, tied output
  ASSERT_FALSE(c.pre_norm);
  ASSERT_EQ(c.pos, PosKind::Sinusoidal);
  ASSERT_EQ(c.activation, nn::Activation::ReLU);
  ASSERT_EQ(c.norm, nn::NormKind::LayerNorm);
  ASSERT_TRUE(c.bias);
  ASSERT_TRUE(c.tie_weights);
  ASSERT_FALSE(c.share_embeddings);
  run_case("paper", c, 0.1f);
}

TEST(Seq2SeqParity, PreNormLearnedGeluSharedVocabularyMatchesPyTorch) {
  ATTO_REQUIRE_TORCH();
  Seq2SeqConfig c = base_config();
  c.src_vocab = c.tgt_vocab = 13;
  c.pre_norm = true;
  c.pos = PosKind::Learned;
  c.activation = nn::Activation::GELU;
  c.share_embeddings = true;
  c.tie_weights = true;
  run_case("prenorm_shared", c, 0.0f);
}

TEST(Seq2SeqParity, RmsSwigluNoBiasUntiedMatchesPyTorch) {
  ATTO_REQUIRE_TORCH();
  Seq2SeqConfig c = base_config();
  c.n_enc_layers = 1;
  c.n_dec_layers = 3;
  c.n_heads = 4;
  c.d_ff = 24;
  c.pre_norm = true;
  c.norm = nn::NormKind::RMSNorm;
  c.activation = nn::Activation::SwiGLU;
  c.bias = false;
  c.tie_weights = false;
  run_case("rms_swiglu", c, 0.1f);
}

}  // namespace seq2seq_parity
}  // namespace
}  // namespace atto
