#include "bench/bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "autograd/tape.h"
#include "base/error.h"
#include "generate/generate.h"
#include "kernels/kernels.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "run/run_dir.h"
#include "train/data_parallel.h"

namespace atto::bench {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// The optimiser settings (as nanoGPT's small configs and `atto train`'s defaults).
constexpr float kLr = 1e-3f, kBeta1 = 0.9f, kBeta2 = 0.99f, kEps = 1e-8f, kWeightDecay = 0.1f, kClip = 1.0f;

void check_counts(int64_t warmup, int64_t steps, int64_t batch, int threads, const char* what) {
  ATTO_CHECK(warmup >= 0, "bench {}: --warmup must be >= 0, got {}", what, warmup);
  ATTO_CHECK(steps >= 1, "bench {}: --steps must be >= 1 (timed steps), got {}", what, steps);
  ATTO_CHECK(batch >= 1, "bench {}: --batch-size must be >= 1, got {}", what, batch);
  ATTO_CHECK(threads >= 0, "bench {}: --threads must be >= 0 (0 = all cores), got {}", what, threads);
}

// One training batch of uniform random tokens: x = seq[0:T], y = seq[1:T+1] per row.
struct TokenBatch {
  std::vector<int32_t> x, y;
};
TokenBatch random_batch(Rng& rng, int64_t B, int64_t T, int64_t V) {
  TokenBatch b;
  b.x.reserve(static_cast<size_t>(B * T));
  b.y.reserve(static_cast<size_t>(B * T));
  for (int64_t r = 0; r < B; ++r) {
    std::vector<int32_t> seq(static_cast<size_t>(T + 1));
    for (auto& t : seq) t = static_cast<int32_t>(rng.below(static_cast<uint64_t>(V)));
    b.x.insert(b.x.end(), seq.begin(), seq.end() - 1);
    b.y.insert(b.y.end(), seq.begin() + 1, seq.end());
  }
  return b;
}

// zero_grad, forward, loss, backward, clip, AdamW: one trainer step. Returns the loss.
// `phase_ms` (kNumPhases entries, or nullptr) accumulates the wall time of each phase.
float train_step(DataParallel& dp, optim::AdamW& opt, kernels::Bf16WeightCache& bf16, const TokenBatch& b, int64_t B,
                 int64_t T, double* phase_ms = nullptr) {
  auto t = Clock::now();
  auto lap = [&](int i) {
    if (phase_ms == nullptr) return;
    const auto now = Clock::now();
    phase_ms[i] += std::chrono::duration<double, std::milli>(now - t).count();
    t = now;
  };
  opt.zero_grad(/*set_to_none=*/true);  // as the trainer
  lap(0);
  tape().mark();
  const auto value = static_cast<float>(gpt_forward_backward(dp, b.x, b.y, B, T));
  lap(1);  // forward, loss and backward together: the shards run both
  const float norm = optim::clip_grad_norm(opt.param_groups(), kClip);
  lap(2);
  // As the trainer: a non-finite step is skipped; the bf16 weight copies are packed anew.
  if (std::isfinite(norm)) optim::step_and_refresh(opt, kLr, bf16);
  lap(3);
  return value;
}

constexpr int kNumPhases = 4;
constexpr const char* kPhases[kNumPhases] = {"zero_grad", "forward+backward", "clip", "optimizer"};

}  // namespace

double quantile(std::vector<double> samples, double q) {
  ATTO_CHECK(!samples.empty(), "quantile of an empty list of timings");
  ATTO_CHECK(q >= 0.0 && q <= 1.0, "quantile: q must be in [0, 1], got {}", q);
  std::sort(samples.begin(), samples.end());
  const double pos = q * static_cast<double>(samples.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, samples.size() - 1);
  return samples[lo] + (pos - static_cast<double>(lo)) * (samples[hi] - samples[lo]);
}

StepStats step_stats(std::vector<double> ms) {
  ATTO_CHECK(!ms.empty(), "step_stats: no timings");
  StepStats s;
  s.count = static_cast<int64_t>(ms.size());
  s.median_ms = quantile(ms, 0.5);
  s.p10_ms = quantile(ms, 0.1);
  s.p90_ms = quantile(ms, 0.9);
  s.mean_ms = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
  s.min_ms = *std::min_element(ms.begin(), ms.end());
  s.max_ms = *std::max_element(ms.begin(), ms.end());
  return s;
}

int64_t peak_rss_kib() {
  rusage u{};
  ATTO_CHECK(getrusage(RUSAGE_SELF, &u) == 0, "getrusage(RUSAGE_SELF) failed");
  return static_cast<int64_t>(u.ru_maxrss);  // KiB on Linux
}

// ---- GEMM -------------------------------------------------------------------------------

namespace {

// C = A B^T as a bf16 linear layer's forward with B from a weight cache: the first call packs B
// (a warm-up call at least), the timed ones find it packed.
StepStats time_cached_bf16(const GemmBenchOptions& opt, const Tensor& a, const Tensor& b, Tensor& c) {
  kernels::Bf16WeightCache cache;
  const kernels::PrecisionScope scope(kernels::Precision::BF16, &cache);
  const int64_t M = a.shape()[0], K = a.shape()[1], N = b.shape()[0], warmup = std::max<int64_t>(opt.warmup, 1);
  std::vector<double> ms;
  for (int64_t i = 0; i < warmup + opt.steps; ++i) {
    const auto t0 = Clock::now();
    kernels::linear_forward(c.data(), a.data(), b.data(), nullptr, M, K, N);
    if (i >= warmup) ms.push_back(ms_since(t0));
  }
  return step_stats(ms);
}

}  // namespace

GemmBenchResult bench_gemm(const GemmBenchOptions& opt) {
  check_counts(opt.warmup, opt.steps, 1, opt.threads, "gemm");
  ATTO_CHECK(opt.size >= 1 && opt.size <= 16384, "bench gemm: --size must be in [1, 16384], got {}", opt.size);
  const int64_t M = opt.m > 0 ? opt.m : opt.size, N = opt.n > 0 ? opt.n : opt.size, K = opt.k > 0 ? opt.k : opt.size;
  ATTO_CHECK(M <= (1 << 20) && N <= (1 << 20) && K <= (1 << 20) && M * K <= (1ll << 30) && N * K <= (1ll << 30) &&
                 M * N <= (1ll << 30),
             "bench gemm: --shape {},{},{} is too large (each size at most 2^20, each matrix at most 2^30 values)", M,
             N, K);
  ATTO_CHECK(opt.fma_seconds >= 0.0 && opt.fma_seconds <= 60.0,
             "bench gemm: --fma-seconds must be in [0, 60] (0 = skip the FMA ceiling), got {}", opt.fma_seconds);
  if (opt.precision == kernels::Precision::BF16) kernels::require_bf16("--precision bf16");  // before any timing
  kernels::set_num_threads(opt.threads);
  Rng rng(opt.seed);
  const Tensor a = Tensor::randn({M, K}, rng), b = Tensor::randn({N, K}, rng);
  Tensor c = Tensor::zeros({M, N});
  // C[M, N] = A[M, K] @ B[N, K]^T: the layout of linear_forward.
  auto time_calls = [&](kernels::Precision p) {
    const kernels::PrecisionScope scope(p);
    std::vector<double> ms;
    for (int64_t i = 0; i < opt.warmup + opt.steps; ++i) {
      const auto t0 = Clock::now();
      kernels::gemm(false, true, M, N, K, 1.0f, a.data(), K, b.data(), K, 0.0f, c.data(), N);
      if (i >= opt.warmup) ms.push_back(ms_since(t0));
    }
    return step_stats(ms);
  };
  const double flop = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  GemmBenchResult r;
  r.size = opt.size;
  r.m = M, r.n = N, r.k = K;
  r.threads = kernels::num_threads();
  r.call = time_calls(kernels::Precision::F32);
  r.median_gflops = flop / (r.call.median_ms * 1e6);
  r.best_gflops = flop / (r.call.min_ms * 1e6);
  if (opt.fma_seconds > 0.0) {
    r.fma_gflops_per_thread = kernels::fma_peak_gflops(opt.fma_seconds);
    r.fma_gflops = std::accumulate(r.fma_gflops_per_thread.begin(), r.fma_gflops_per_thread.end(), 0.0);
  }
  if (opt.precision == kernels::Precision::BF16) {
    r.bf16 = true;
    r.bf16_kernel = kernels::bf16_backend_name(kernels::bf16_backend());
    r.bf16_call = time_calls(kernels::Precision::BF16);
    r.bf16_median_gflops = flop / (r.bf16_call.median_ms * 1e6);
    r.bf16_best_gflops = flop / (r.bf16_call.min_ms * 1e6);
    r.bf16_cached_call = time_cached_bf16(opt, a, b, c);
    r.bf16_cached_best_gflops = flop / (r.bf16_cached_call.min_ms * 1e6);
    if (opt.fma_seconds > 0.0) {
      r.bf16_peak_gflops_per_thread = kernels::bf16_peak_gflops(opt.fma_seconds);
      r.bf16_peak_gflops =
          std::accumulate(r.bf16_peak_gflops_per_thread.begin(), r.bf16_peak_gflops_per_thread.end(), 0.0);
    }
  }
  return r;
}

// ---- training ---------------------------------------------------------------------------

int64_t flop_parameters(const GPT& model) {
  int64_t n = model.num_parameters();
  if (model.transformer.wpe) n -= model.transformer.wpe->weight.numel();
  if (!model.config().tie_weights) n -= model.transformer.wte.weight.numel();
  return n;
}

double train_flops_per_token(const GPTConfig& cfg, int64_t flop_params) {
  const auto L = static_cast<double>(cfg.n_layers), C = static_cast<double>(cfg.d_model);
  const auto T = static_cast<double>(cfg.block_size);
  return 6.0 * static_cast<double>(flop_params) + 12.0 * L * C * T;
}

namespace {

// The GEMM peak MFU is measured against: opt.peak_gflops, or bench_gemm's best in the step's
// precision when it is 0; 0 (no MFU) when it is negative.
double gemm_peak(const TrainBenchOptions& opt) {
  if (opt.peak_gflops != 0.0) return std::max(opt.peak_gflops, 0.0);
  const kernels::PrecisionScope fp32(kernels::Precision::F32);  // bench_gemm times bf16 itself
  const GemmBenchResult g = bench_gemm({.threads = opt.threads, .fma_seconds = 0.0, .precision = opt.precision});
  return opt.precision == kernels::Precision::BF16 ? g.bf16_best_gflops : g.best_gflops;
}

// A data-parallel replica of the timed model (its values replaced by the model's).
std::unique_ptr<GPT> make_replica(const TrainBenchOptions& opt, Rng& rng) {
  auto replica = std::make_unique<GPT>(opt.model, rng);
  replica->set_recompute(opt.recompute);
  return replica;
}

}  // namespace

TrainBenchResult bench_train(const TrainBenchOptions& opt) {
  check_counts(opt.warmup, opt.steps, opt.batch_size, opt.threads, "train");
  ATTO_CHECK(opt.data_batches >= 0, "bench train: data_batches must be >= 0, got {}", opt.data_batches);
  opt.model.validate();
  kernels::set_num_threads(opt.threads);
  const int64_t B = opt.batch_size, T = opt.model.block_size, total = opt.warmup + opt.steps;
  Rng init_rng(opt.seed), data_rng(opt.seed ^ 0xDA7A5EEDull), dropout_rng(opt.seed ^ 0xD50F0D7Eull);
  GPT model(opt.model, init_rng);
  model.set_recompute(opt.recompute);  // and the replicas: make_replica
  model.set_rng(&dropout_rng);
  model.train();
  optim::AdamW adamw(optim::default_param_groups(model.trainable_parameters(), kWeightDecay), {kBeta1, kBeta2, kEps});
  Rng replica_rng(0);  // replicas' own initial values are replaced by the model's
  DataParallel dp(model, resolve_shards(opt.shards, B), [&] { return make_replica(opt, replica_rng); });
  std::vector<TokenBatch> batches;
  const int64_t nb = opt.data_batches > 0 ? std::min(opt.data_batches, total) : total;
  for (int64_t i = 0; i < nb; ++i) batches.push_back(random_batch(data_rng, B, T, opt.model.vocab_size));

  kernels::Bf16WeightCache bf16;
  const kernels::PrecisionScope precision(opt.precision, &bf16);
  TrainBenchResult r;
  std::vector<double> ms;
  double phase_ms[kNumPhases] = {0, 0, 0, 0};
  for (int64_t i = 0; i < total; ++i) {
    const bool timed = i >= opt.warmup;
    if (opt.profile && i == opt.warmup) {
      tape().reset_profile();
      tape().set_profiling(true);
    }
    const auto t0 = Clock::now();
    r.losses.push_back(train_step(dp, adamw, bf16, batches[static_cast<size_t>(i % nb)], B, T,
                                  opt.profile && timed ? phase_ms : nullptr));
    if (timed) ms.push_back(ms_since(t0));
  }
  if (opt.profile) {
    tape().set_profiling(false);
    const auto n = static_cast<double>(opt.steps);
    for (int i = 0; i < kNumPhases; ++i) r.phases.push_back({kPhases[i], phase_ms[i] / n});
    r.ops = tape().profile();
    for (auto& o : r.ops) {
      o.forward_ms /= n;
      o.backward_ms /= n;
    }
    tape().reset_profile();
  }
  r.peak_rss_kib = peak_rss_kib();  // before any GEMM buffers exist
  r.threads = kernels::num_threads();
  r.shards = dp.shards();
  r.tokens_per_step = B * T;
  r.step = step_stats(ms);
  r.tokens_per_s = static_cast<double>(r.tokens_per_step) / (r.step.median_ms / 1e3);
  r.num_parameters = model.num_parameters();
  r.flop_parameters = flop_parameters(model);
  r.flops_per_token = train_flops_per_token(opt.model, r.flop_parameters);
  r.model_gflops = r.flops_per_token * r.tokens_per_s / 1e9;
  r.precision = kernels::precision_label(opt.precision);
  r.peak_gflops = gemm_peak(opt);
  r.mfu = r.peak_gflops > 0.0 ? r.model_gflops / r.peak_gflops : 0.0;
  return r;
}

// ---- generation -------------------------------------------------------------------------

namespace {

// Times the forward of one prompt of `n` random tokens (batch 1, a fresh KV cache each run).
StepStats time_prompt(GPT& model, int64_t n, int64_t warmup, int64_t steps, Rng& rng) {
  const GPTConfig& c = model.config();
  ATTO_CHECK(n >= 1 && n <= c.block_size, "bench generate: --prompt-tokens must be in [1, block size {}], got {}",
             c.block_size, n);
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>(rng.below(static_cast<uint64_t>(c.vocab_size))));
  NoGradGuard no_grad;
  std::vector<double> ms;
  for (int64_t i = 0; i < warmup + steps; ++i) {
    GPT::Cache cache = model.make_cache(1, n);
    const auto t0 = Clock::now();
    model.forward_cached(ids, 1, n, cache);
    if (i >= warmup) ms.push_back(ms_since(t0));
  }
  return step_stats(ms);
}

}  // namespace

GenerateBenchResult bench_generate(const GenerateBenchOptions& opt) {
  check_counts(opt.warmup, opt.steps, opt.batch_size, opt.threads, "generate");
  ATTO_CHECK(opt.new_tokens >= 1, "bench generate: --new-tokens must be >= 1, got {}", opt.new_tokens);
  kernels::set_num_threads(opt.threads);
  Rng init_rng(opt.seed), rng(opt.seed ^ 0x5A3B1E00ull);
  LoadedModel loaded;
  if (!opt.model_path.empty()) {
    loaded = load_run(opt.model_path, WeightStorage::Quantized);
  } else {
    opt.model.validate();
    loaded.model = std::make_unique<GPT>(opt.model, init_rng);
  }
  GPT& model = *loaded.model;
  const int64_t V = model.config().vocab_size;
  std::vector<std::vector<int32_t>> prompts;  // one random token per sequence
  for (int64_t b = 0; b < opt.batch_size; ++b)
    prompts.push_back({static_cast<int32_t>(rng.below(static_cast<uint64_t>(V)))});
  gen::GenerateOptions g;
  g.max_new_tokens = opt.new_tokens;
  g.max_batch = opt.batch_size;
  g.sampler.greedy = opt.greedy;

  kernels::Bf16WeightCache bf16;  // the weights never change: packed once for every run
  const kernels::PrecisionScope precision(opt.precision, &bf16);
  GenerateBenchResult r;
  r.precision = kernels::precision_label(opt.precision);
  if (opt.prompt_tokens > 0) {
    r.prompt = time_prompt(model, opt.prompt_tokens, opt.warmup, opt.steps, rng);
    r.prompt_tokens_per_s = static_cast<double>(opt.prompt_tokens) / (r.prompt.median_ms / 1e3);
  }
  std::vector<double> ms_per_token;
  for (int64_t i = 0; i < opt.warmup + opt.steps; ++i) {
    const auto t0 = Clock::now();
    const std::vector<gen::Sample> out = gen::generate_batch(model, prompts, g, rng);
    const double ms = ms_since(t0);
    if (i >= opt.warmup) ms_per_token.push_back(ms / static_cast<double>(opt.new_tokens));
    r.generated = 0;
    for (const auto& s : out) r.generated += static_cast<int64_t>(s.tokens.size());
  }
  r.peak_rss_kib = peak_rss_kib();
  r.threads = kernels::num_threads();
  r.token = step_stats(ms_per_token);
  r.tokens_per_s = static_cast<double>(opt.batch_size) / (r.token.median_ms / 1e3);
  r.num_parameters = model.num_parameters();
  return r;
}

// ---- JSON -------------------------------------------------------------------------------

nlohmann::json to_json(const StepStats& s) {
  return {{"count", s.count},     {"median_ms", s.median_ms}, {"p10_ms", s.p10_ms}, {"p90_ms", s.p90_ms},
          {"mean_ms", s.mean_ms}, {"min_ms", s.min_ms},       {"max_ms", s.max_ms}};
}

nlohmann::json to_json(const GemmBenchResult& r) {
  return {{"size", r.size},
          {"m", r.m},
          {"n", r.n},
          {"k", r.k},
          {"threads", r.threads},
          {"kernels", kernels::cpu_level_name(kernels::cpu_level())},
          {"call", to_json(r.call)},
          {"median_gflops", r.median_gflops},
          {"best_gflops", r.best_gflops},
          {"fma_gflops", r.fma_gflops},
          {"fma_gflops_per_thread", r.fma_gflops_per_thread},
          {"bf16", r.bf16 ? nlohmann::json{{"kernel", r.bf16_kernel},
                                           {"call", to_json(r.bf16_call)},
                                           {"median_gflops", r.bf16_median_gflops},
                                           {"best_gflops", r.bf16_best_gflops},
                                           {"cached_call", to_json(r.bf16_cached_call)},
                                           {"cached_best_gflops", r.bf16_cached_best_gflops},
                                           {"peak_gflops", r.bf16_peak_gflops},
                                           {"peak_gflops_per_thread", r.bf16_peak_gflops_per_thread}}
                          : nlohmann::json()}};
}

nlohmann::json to_json(const TrainBenchResult& r) {
  nlohmann::json j = {{"threads", r.threads},
                      {"precision", r.precision},
                      {"kernels", kernels::cpu_level_name(kernels::cpu_level())},
                      {"shards", r.shards},
                      {"tokens_per_step", r.tokens_per_step},
                      {"step", to_json(r.step)},
                      {"tokens_per_s", r.tokens_per_s},
                      {"num_parameters", r.num_parameters},
                      {"flop_parameters", r.flop_parameters},
                      {"flops_per_token", r.flops_per_token},
                      {"model_gflops", r.model_gflops},
                      {"peak_gflops", r.peak_gflops},
                      {"mfu", r.mfu},
                      {"peak_rss_kib", r.peak_rss_kib},
                      {"losses", r.losses}};
  if (!r.phases.empty()) {
    nlohmann::json phases = nlohmann::json::object(), ops = nlohmann::json::array();
    for (const auto& p : r.phases) phases[p.phase] = p.ms;
    for (const auto& o : r.ops)
      ops.push_back({{"op", o.op}, {"calls", o.calls}, {"forward_ms", o.forward_ms}, {"backward_ms", o.backward_ms}});
    j["profile"] = {{"phases_ms_per_step", phases}, {"ops_per_step", ops}};
  }
  return j;
}

nlohmann::json to_json(const GenerateBenchResult& r) {
  return {{"threads", r.threads},
          {"precision", r.precision},
                      {"kernels", kernels::cpu_level_name(kernels::cpu_level())},
          {"token", to_json(r.token)},
          {"tokens_per_s", r.tokens_per_s},
          {"num_parameters", r.num_parameters},
          {"peak_rss_kib", r.peak_rss_kib},
          {"generated", r.generated},
          {"prompt", to_json(r.prompt)},
          {"prompt_tokens_per_s", r.prompt_tokens_per_s}};
}

}  // namespace atto::bench
