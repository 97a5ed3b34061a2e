// Tests of SGD, Adam, AdamW: hand-computed first steps, weight-decay groups, the Adam/AdamW
// relation, skipped parameters, state-dict round trips and option validation.
#include <gmock/gmock.h>

#include <cmath>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "base/error.h"
#include "optim/optimizer.h"
#include "support.h"

namespace atto::optim {
namespace {

using atto::test::error_of;
using ::testing::HasSubstr;

NamedParameter make_param(const std::string& name, const std::vector<float>& v, ParamKind kind = ParamKind::Weight) {
  Tensor t = Tensor::from_vector({static_cast<int64_t>(v.size())}, v);
  t.set_requires_grad(true);
  return {name, t, kind};
}

void set_grad(NamedParameter& p, const std::vector<float>& g) {
  p.tensor.set_grad(Tensor::from_vector(p.tensor.shape(), g));
}

void expect_near_vec(const Tensor& t, const std::vector<double>& want, double tol, const std::string& what) {
  const std::vector<float> got = t.to_vector();
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << what << " element " << i;
}

void expect_bits_equal(const Tensor& a, const Tensor& b, const std::string& what) {
  const std::vector<float> x = a.to_vector(), y = b.to_vector();
  ASSERT_EQ(x.size(), y.size()) << what;
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(x[i], y[i]) << what << " element " << i;
}

// Runs fn and checks that it throws atto::Error whose message contains every string in `parts`.
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  const std::string message = error_of(fn);
  for (const std::string& s : parts) EXPECT_THAT(message, HasSubstr(s));
}

// The common 3-element problem: p0 = [1, -2, 0.5], g1 = [0.1, -0.2, 0.3], g2 = [-0.3, 0.1, 0.2].
const std::vector<float> kP0 = {1.0f, -2.0f, 0.5f};
const std::vector<float> kG1 = {0.1f, -0.2f, 0.3f};
const std::vector<float> kG2 = {-0.3f, 0.1f, 0.2f};

// Two steps of `opt` on the common problem; returns the parameter after each step.
template <typename Opt, typename Options>
std::vector<Tensor> two_steps(float lr, float wd, Options options) {
  NamedParameter p = make_param("w", kP0);
  Opt opt(single_param_group({p}, wd), options);
  std::vector<Tensor> out;
  for (const auto& g : {kG1, kG2}) {
    set_grad(p, g);
    opt.step(lr);
    out.push_back(p.tensor.clone());
  }
  return out;
}

// ---- hand-computed first two steps ---------------------------------------------------------

TEST(Sgd, MomentumTwoSteps) {
  // buf1 = g1, p1 = p0 - 0.1 g1 = [0.99, -1.98, 0.47]
  // buf2 = 0.9 g1 + g2 = [-0.21, -0.08, 0.47], p2 = p1 - 0.1 buf2 = [1.011, -1.972, 0.423]
  auto p = two_steps<SGD>(0.1f, 0.0f, SgdOptions{.momentum = 0.9f});
  expect_near_vec(p[0], {0.99, -1.98, 0.47}, 1e-6, "step 1");
  expect_near_vec(p[1], {1.011, -1.972, 0.423}, 1e-6, "step 2");
}

TEST(Sgd, NesterovTwoSteps) {
  // d1 = g1 + 0.9 g1 = [0.19, -0.38, 0.57], p1 = [0.981, -1.962, 0.443]
  // buf2 = [-0.21, -0.08, 0.47], d2 = g2 + 0.9 buf2 = [-0.489, 0.028, 0.623]
  // p2 = p1 - 0.1 d2 = [1.0299, -1.9648, 0.3807]
  auto p = two_steps<SGD>(0.1f, 0.0f, SgdOptions{.momentum = 0.9f, .nesterov = true});
  expect_near_vec(p[0], {0.981, -1.962, 0.443}, 1e-6, "step 1");
  expect_near_vec(p[1], {1.0299, -1.9648, 0.3807}, 1e-6, "step 2");
}

TEST(Sgd, PlainWithL2WeightDecay) {
  // g1' = g1 + 0.1 p0 = [0.2, -0.4, 0.35], p1 = [0.98, -1.96, 0.465]
  // g2' = g2 + 0.1 p1 = [-0.202, -0.096, 0.2465], p2 = [1.0002, -1.9504, 0.44035]
  auto p = two_steps<SGD>(0.1f, 0.1f, SgdOptions{});
  expect_near_vec(p[0], {0.98, -1.96, 0.465}, 1e-6, "step 1");
  expect_near_vec(p[1], {1.0002, -1.9504, 0.44035}, 1e-6, "step 2");
}

TEST(Sgd, NoMomentumKeepsNoState) {
  NamedParameter p = make_param("w", kP0);
  SGD opt(single_param_group({p}), {});
  set_grad(p, kG1);
  opt.step(0.1f);
  EXPECT_TRUE(opt.state_names().empty());
  StateDict sd = opt.state_dict();
  ASSERT_EQ(sd.size(), 2u);  // "step" and "w.step"
  EXPECT_EQ(sd[1].first, "w.step");
}

// Adam, lr 0.1, betas (0.9, 0.999), eps 1e-8. Step 1: m^ = g1, v^ = g1^2, so the update is
// lr * g1 / (|g1| + eps) = 0.1 sign(g1) up to 1e-8: p1 = [0.9, -1.9, 0.4].
// Step 2: m = 0.09 g1 + 0.1 g2, v = 0.000999 g1^2 + 0.001 g2^2, m^ = m / 0.19, v^ = v / 0.001999;
// element 0: m^ = -0.021/0.19 = -0.1105263, v^ = 9.999e-5/0.001999 = 0.0500200,
// p2 = 0.9 - 0.1 * (-0.1105263 / 0.2236515) = 0.9494190 (all elements in double below).
TEST(Adam, TwoSteps) {
  auto p = two_steps<Adam>(0.1f, 0.0f, AdamOptions{});
  expect_near_vec(p[0], {0.90000001, -1.900000005, 0.4000000033}, 1e-6, "step 1");
  expect_near_vec(p[1], {0.94941899112, -1.87336630272, 0.30296479433}, 2e-6, "step 2");
}

TEST(Adam, TwoStepsWithL2WeightDecay) {
  // Step 1: g' = g1 + 0.1 p0 = [0.2, -0.4, 0.35]; Adam's first step moves by lr sign(g'):
  // p1 = [0.9, -1.9, 0.4] again. Step 2 (g' = g2 + 0.1 p1) in double:
  auto p = two_steps<Adam>(0.1f, 0.1f, AdamOptions{});
  expect_near_vec(p[0], {0.900000005, -1.9000000025, 0.4000000029}, 1e-6, "step 1");
  expect_near_vec(p[1], {0.90769980297, -1.81828755468, 0.30264984561}, 2e-6, "step 2");
}

TEST(AdamW, TwoStepsWithDecoupledWeightDecay) {
  // Step 1: p0 (1 - 0.1*0.1) = [0.99, -1.98, 0.495], then - 0.1 sign(g1): [0.89, -1.88, 0.395].
  auto p = two_steps<AdamW>(0.1f, 0.1f, AdamOptions{});
  expect_near_vec(p[0], {0.89000001, -1.880000005, 0.3950000033}, 1e-6, "step 1");
  expect_near_vec(p[1], {0.93051899102, -1.83456630267, 0.2940147943}, 2e-6, "step 2");
}

// ---- weight decay groups and the Adam / AdamW relation ------------------------------------

TEST(AdamW, DecaysOnlyTheWeightGroup) {
  NamedParameters params = {make_param("w", {1, -2, 3}, ParamKind::Weight),
                            make_param("b", {1, -2, 3}, ParamKind::Bias), make_param("n", {1, -2, 3}, ParamKind::Norm),
                            make_param("e", {1, -2, 3}, ParamKind::Embedding)};
  for (NamedParameter& p : params) set_grad(p, {0, 0, 0});  // zero grads: only decay moves
  auto groups = default_param_groups(params, 0.5f);
  ASSERT_EQ(groups.size(), 2u);
  ASSERT_EQ(groups[0].params.size(), 1u);
  EXPECT_EQ(groups[0].params[0].name, "w");
  EXPECT_EQ(groups[1].params.size(), 3u);
  AdamW opt(groups, {});
  opt.step(0.1f);
  const float decay = 1.0f - 0.1f * 0.5f;
  expect_bits_equal(params[0].tensor, Tensor::from_vector({3}, {decay, -2 * decay, 3 * decay}), "weight");
  for (size_t i = 1; i < params.size(); ++i)
    expect_bits_equal(params[i].tensor, Tensor::from_vector({3}, {1, -2, 3}), params[i].name);
}

TEST(ParamGroups, TiedParametersAppearOnce) {
  NamedParameter wte = make_param("transformer.wte.weight", {1, 2}, ParamKind::Embedding);
  NamedParameter head{"lm_head.weight", wte.tensor, ParamKind::Weight};  // tied
  NamedParameter b = make_param("b", {0, 0}, ParamKind::Bias);
  auto groups = default_param_groups({wte, head, b}, 0.1f);
  EXPECT_TRUE(groups[0].params.empty());  // the first name (embedding) wins
  ASSERT_EQ(groups[1].params.size(), 2u);
  EXPECT_EQ(groups[1].params[0].name, "transformer.wte.weight");
  // Listing a tensor twice by hand is rejected, naming both.
  expect_error([&] { AdamW({ParamGroup{{wte, head}}}, {}); }, {"transformer.wte.weight", "lm_head.weight"});
}

// AdamW(wd) from p == Adam(wd = 0) from p * (1 - lr wd); Adam(wd) with g == Adam(0) with
// g + wd p; with wd = 0 the two are the same. Bit for bit, over three steps.
TEST(AdamVsAdamW, DifferExactlyAsDocumented) {
  Rng rng(7);
  const float lr = 0.05f, wd = 0.2f;
  Tensor init = Tensor::randn({17}, rng);
  std::vector<Tensor> grads;
  for (int s = 0; s < 3; ++s) grads.push_back(Tensor::randn({17}, rng));
  auto param = [&](const char* name) {
    NamedParameter p{name, init.clone(), ParamKind::Weight};
    p.tensor.set_requires_grad(true);
    return p;
  };
  NamedParameter pw = param("w"), pa = param("a"), pref = param("r"), pref2 = param("r2");
  AdamW adamw(single_param_group({pw}, wd), {});
  Adam adam(single_param_group({pa}, wd), {});
  Adam ref_w(single_param_group({pref}, 0.0f), {});   // reference for AdamW
  Adam ref_a(single_param_group({pref2}, 0.0f), {});  // reference for Adam with L2
  for (int s = 0; s < 3; ++s) {
    pw.tensor.set_grad(grads[s].clone());
    adamw.step(lr);
    // decoupled: shrink the reference parameter first, then a plain Adam step on g
    for (float& x : std::span(pref.tensor.data(), 17)) x = x * (1.0f - lr * wd);
    pref.tensor.set_grad(grads[s].clone());
    ref_w.step(lr);
    expect_bits_equal(pw.tensor, pref.tensor, "AdamW vs shrink + Adam, step " + std::to_string(s));

    pa.tensor.set_grad(grads[s].clone());
    adam.step(lr);
    Tensor g2 = grads[s].clone();
    for (int i = 0; i < 17; ++i) g2.data()[i] = g2.data()[i] + wd * pref2.tensor.data()[i];
    pref2.tensor.set_grad(g2);
    ref_a.step(lr);
    expect_bits_equal(pa.tensor, pref2.tensor, "Adam L2 vs Adam on g + wd p, step " + std::to_string(s));
  }
  EXPECT_GT(max_abs_diff(pw.tensor, pa.tensor), 1e-4f);  // the two decays really differ
}

TEST(AdamVsAdamW, IdenticalWithoutWeightDecay) {
  auto a = two_steps<Adam>(0.1f, 0.0f, AdamOptions{});
  auto w = two_steps<AdamW>(0.1f, 0.0f, AdamOptions{});
  expect_bits_equal(a[1], w[1], "Adam vs AdamW, wd 0");
}

TEST(Optimizer, LrScaleMultipliesTheStepLr) {
  NamedParameter p = make_param("w", kP0), q = make_param("v", kP0);
  std::vector<ParamGroup> groups = {ParamGroup{{p}, 0.0f, 0.5f}};
  SGD scaled(groups, {});
  SGD plain(single_param_group({q}), {});
  set_grad(p, kG1);
  set_grad(q, kG1);
  scaled.step(0.2f);
  plain.step(0.1f);
  expect_bits_equal(p.tensor, q.tensor, "lr 0.2 * scale 0.5 vs lr 0.1");
}

// ---- parameters without a gradient ----------------------------------------------------------

TEST(Optimizer, SkipsParametersWithoutGradient) {
  NamedParameter a = make_param("a", kP0), b = make_param("b", kP0);
  AdamW opt(single_param_group({a, b}, 0.1f), {});
  set_grad(a, kG1);  // b has no gradient at step 1
  opt.step(0.1f);
  expect_bits_equal(b.tensor, Tensor::from_vector({3}, kP0), "b untouched (not even decayed)");
  StateDict sd = opt.state_dict();
  for (const auto& [name, t] : sd) EXPECT_NE(name.rfind("b.", 0), 0u) << name << " has state";
  // b's first update uses bias correction t = 1, so it equals a fresh optimizer's first step.
  set_grad(b, kG1);
  opt.step(0.1f);
  NamedParameter c = make_param("c", kP0);
  AdamW fresh(single_param_group({c}, 0.1f), {});
  set_grad(c, kG1);
  fresh.step(0.1f);
  expect_bits_equal(b.tensor, c.tensor, "late first update of b");
  EXPECT_EQ(opt.steps_taken(), 2);
}

// step(lr, updated): each parameter with a gradient is handed to `updated` once, after its own
// update is written (a bf16 copy packed from it sees the new values), and the values are those of
// a step without it, for Adam, AdamW and SGD, over two steps.
TEST(Optimizer, UpdatedSeesEachNewParameterOnceWithTheSameBits) {
  const std::vector<float> big(3000, 0.25f);  // more than one chunk of the parallel update
  std::vector<float> gbig(3000);
  for (size_t i = 0; i < gbig.size(); ++i) gbig[i] = std::sin(0.1f * static_cast<float>(i));
  auto run = [&](auto make, bool hook) {
    NamedParameter a = make_param("a", kP0), b = make_param("b", big), c = make_param("c", kP0);
    auto opt = make(single_param_group({a, b, c}, 0.1f));
    std::vector<std::pair<const float*, std::vector<float>>> seen;
    for (int step = 0; step < 2; ++step) {
      set_grad(a, kG1);
      set_grad(b, gbig);  // c has no gradient: never updated, never handed over
      if (hook) {
        opt->step(0.1f, [&](const float* w, int64_t n) { seen.emplace_back(w, std::vector<float>(w, w + n)); });
      } else {
        opt->step(0.1f);
      }
      if (hook) {
        EXPECT_EQ(seen.size(), size_t(2 * (step + 1)));
        // a then b (group order), each with its values as they are after this step.
        EXPECT_EQ(seen[seen.size() - 2].first, a.tensor.data());
        EXPECT_EQ(seen[seen.size() - 2].second, a.tensor.to_vector());
        EXPECT_EQ(seen.back().first, b.tensor.data());
        EXPECT_EQ(seen.back().second, b.tensor.to_vector());
      }
    }
    expect_bits_equal(c.tensor, Tensor::from_vector({3}, kP0), "c untouched");
    return std::vector<Tensor>{a.tensor, b.tensor};
  };
  auto adamw = [](std::vector<ParamGroup> g) { return std::make_unique<AdamW>(std::move(g)); };
  auto adam = [](std::vector<ParamGroup> g) { return std::make_unique<Adam>(std::move(g)); };
  auto sgd = [](std::vector<ParamGroup> g) { return std::make_unique<SGD>(std::move(g), SgdOptions{.momentum = 0.9f}); };
  const auto w0 = run(adamw, false), w1 = run(adamw, true);
  const auto m0 = run(adam, false), m1 = run(adam, true);
  const auto s0 = run(sgd, false), s1 = run(sgd, true);
  for (size_t i = 0; i < 2; ++i) {
    expect_bits_equal(w1[i], w0[i], "AdamW with updated");
    expect_bits_equal(m1[i], m0[i], "Adam with updated");
    expect_bits_equal(s1[i], s0[i], "SGD with updated");
  }
}

TEST(Optimizer, ZeroGradZeroesOrClears) {
  NamedParameter a = make_param("a", kP0);
  SGD opt(single_param_group({a}), {});
  set_grad(a, kG1);
  opt.zero_grad();
  ASSERT_TRUE(a.tensor.grad().defined());
  expect_bits_equal(a.tensor.grad(), Tensor::zeros({3}), "zeroed grad");
  opt.zero_grad(/*set_to_none=*/true);
  EXPECT_FALSE(a.tensor.grad().defined());
}

// ---- state dict ----------------------------------------------------------------------------

// Runs `steps` steps with the seeded gradient sequence starting at step `first`.
template <typename Opt>
void run_steps(Opt& opt, NamedParameters& params, int first, int steps) {
  for (int s = first; s < first + steps; ++s) {
    Rng rng(1000 + s);
    for (NamedParameter& p : params) p.tensor.set_grad(Tensor::randn(p.tensor.shape(), rng));
    opt.step(0.01f * static_cast<float>(s + 1));
  }
}

NamedParameters clone_params(const NamedParameters& params) {
  NamedParameters out;
  for (const NamedParameter& p : params) {
    NamedParameter q{p.name, p.tensor.clone(), p.kind};
    q.tensor.set_requires_grad(true);
    out.push_back(q);
  }
  return out;
}

template <typename Opt, typename Options>
void check_round_trip(Options options) {
  Rng rng(3);
  NamedParameters params = {{"w", Tensor::randn({4, 3}, rng), ParamKind::Weight},
                            {"b", Tensor::randn({3}, rng), ParamKind::Bias}};
  for (auto& p : params) p.tensor.set_requires_grad(true);
  Opt opt(default_param_groups(params, 0.1f), options);
  run_steps(opt, params, 0, 3);
  const StateDict saved = opt.state_dict();
  NamedParameters resumed = clone_params(params);
  run_steps(opt, params, 3, 2);

  Opt fresh(default_param_groups(resumed, 0.1f), options);
  fresh.load_state_dict(saved);
  EXPECT_EQ(fresh.steps_taken(), 3);
  run_steps(fresh, resumed, 3, 2);
  for (size_t i = 0; i < params.size(); ++i)
    expect_bits_equal(params[i].tensor, resumed[i].tensor, "resumed " + params[i].name);
  const StateDict a = opt.state_dict(), b = fresh.state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    expect_bits_equal(a[i].second, b[i].second, a[i].first);
  }
}

TEST(StateDict, AdamWRoundTripIsBitIdentical) { check_round_trip<AdamW>(AdamOptions{}); }
TEST(StateDict, SgdRoundTripIsBitIdentical) { check_round_trip<SGD>(SgdOptions{.momentum = 0.9f, .nesterov = true}); }

TEST(StateDict, NamesAndSnapshotSemantics) {
  NamedParameter w = make_param("w", kP0);
  AdamW opt(single_param_group({w}), {});
  set_grad(w, kG1);
  opt.step(0.1f);
  StateDict sd = opt.state_dict();
  ASSERT_EQ(sd.size(), 4u);
  EXPECT_EQ(sd[0].first, "step");
  EXPECT_EQ(sd[1].first, "w.step");
  EXPECT_EQ(sd[2].first, "w.exp_avg");
  EXPECT_EQ(sd[3].first, "w.exp_avg_sq");
  EXPECT_EQ(decode_count(sd[0].second, "step"), 1);
  expect_near_vec(sd[2].second, {0.01, -0.02, 0.03}, 1e-8, "m = (1 - b1) g1");
  const std::vector<float> before = sd[2].second.to_vector();
  opt.step(0.1f);
  EXPECT_EQ(sd[2].second.to_vector(), before) << "state_dict returns a snapshot";
}

TEST(StateDict, CountEncodingIsExactPast2To24) {
  for (int64_t c : {int64_t{0}, int64_t{1}, int64_t{16777217}, int64_t{123456789012}})
    EXPECT_EQ(decode_count(encode_count(c), "c"), c);
  expect_error([] { decode_count(Tensor::from_vector({2}, {0.0f, 1.5f}), "x.step"); }, {"x.step", "1.5"});
}

TEST(StateDict, LoadRejectsMismatchesAndChangesNothing) {
  NamedParameter w = make_param("w", kP0);
  AdamW opt(single_param_group({w}), {});
  set_grad(w, kG1);
  opt.step(0.1f);
  const StateDict good = opt.state_dict();

  StateDict bad_shape = good;
  bad_shape[2].second = Tensor::zeros({4});
  expect_error([&] { opt.load_state_dict(bad_shape); }, {"w.exp_avg", "[4]", "[3]"});

  StateDict unknown = good;
  unknown.emplace_back("v.exp_avg", Tensor::zeros({3}));
  expect_error([&] { opt.load_state_dict(unknown); }, {"v.exp_avg"});

  StateDict missing = good;
  missing.pop_back();  // no w.exp_avg_sq
  expect_error([&] { opt.load_state_dict(missing); }, {"w.exp_avg_sq", "missing"});

  StateDict dup = good;
  dup.push_back(good[1]);
  expect_error([&] { opt.load_state_dict(dup); }, {"w.step", "twice"});

  NamedParameter v = make_param("w", kP0);
  SGD sgd(single_param_group({v}), {.momentum = 0.9f});
  expect_error([&] { sgd.load_state_dict(good); }, {"w.exp_avg"});  // Adam state into SGD
  expect_error([&] { opt.load_state_dict({}); }, {"step"});

  // None of the failures changed the state.
  const StateDict after = opt.state_dict();
  ASSERT_EQ(after.size(), good.size());
  for (size_t i = 0; i < good.size(); ++i) expect_bits_equal(after[i].second, good[i].second, good[i].first);
}

// ---- option validation ----------------------------------------------------------------------

TEST(Options, BadValuesThrowNamingTheValue) {
  NamedParameter w = make_param("w", kP0);
  auto g = single_param_group({w});
  expect_error([&] { AdamW(g, {.beta1 = 1.0f}); }, {"beta1", "1"});
  expect_error([&] { AdamW(g, {.beta2 = -0.5f}); }, {"beta2", "-0.5"});
  expect_error([&] { Adam(g, {.eps = 0.0f}); }, {"eps", "0"});
  expect_error([&] { Adam(g, {.eps = NAN}); }, {"eps", "nan"});
  expect_error([&] { SGD(g, {.momentum = -0.25f}); }, {"momentum", "-0.25"});
  expect_error([&] { SGD(g, {.nesterov = true}); }, {"Nesterov"});
  expect_error([&] { AdamW(single_param_group({w}, -0.125f), {}); }, {"weight_decay", "-0.125"});
  std::vector<ParamGroup> scaled = {ParamGroup{{w}, 0.0f, NAN}};
  expect_error([&] { SGD(scaled, {}); }, {"lr_scale", "nan"});
  AdamW opt(g, {});
  set_grad(w, kG1);
  expect_error([&] { opt.step(-0.001f); }, {"learning rate", "-0.001"});
  expect_error([&] { opt.step(NAN); }, {"learning rate", "nan"});
  expect_bits_equal(w.tensor, Tensor::from_vector({3}, kP0), "no update on a rejected step");
}

TEST(Options, RejectsNonContiguousParameterOrGradient) {
  Tensor m = Tensor::zeros({2, 3});
  NamedParameter t{"t", m.as_strided({3, 2}, {1, 3}, 0), ParamKind::Weight};
  expect_error([&] { SGD(single_param_group({t}), {}); }, {"'t'", "contiguous"});
  NamedParameter w{"w", Tensor::zeros({2, 3}), ParamKind::Weight};
  SGD opt(single_param_group({w}), {});
  w.tensor.set_grad(Tensor::ones({3, 2}).as_strided({2, 3}, {1, 2}, 0));  // a transposed view
  expect_error([&] { opt.step(0.1f); }, {"'w'", "not contiguous"});
}

}  // namespace
}  // namespace atto::optim
