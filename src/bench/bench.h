// atto/bench/bench.h: honest, reproducible speed measurements of training, generation and GEMM.
//
//   bench::TrainBenchOptions o;
//   o.model.vocab_size = 65;             // the model is built from a GPTConfig, as `atto train`
//   o.model.d_model = 384; o.model.n_layers = 6; o.model.n_heads = 6; o.model.block_size = 256;
//   o.batch_size = 8;
//   bench::TrainBenchResult r = bench::bench_train(o);
//   fmt::print("{:.1f} ms/step, {:.0f} tokens/s, MFU {:.1%}\n", r.step.median_ms, r.tokens_per_s, r.mfu);
//
//   bench::GemmBenchResult g = bench::bench_gemm({.size = 1024});   // the sgemm peak
//   bench::GenerateBenchResult s = bench::bench_generate({.model = o.model, .new_tokens = 500});
//
// What is measured
// - bench_train: `warmup` untimed steps, then `steps` timed ones. A step is what the trainer
//   does: zero_grad, forward on a [B, T = block_size] batch, mean cross-entropy, backward,
//   global gradient-norm clipping (1.0), AdamW (lr 1e-3, betas (0.9, 0.99), eps 1e-8, weight
//   decay 0.1 on the Linear weight matrices only: optim::default_param_groups). Tokens are
//   uniform random ids drawn from `seed` before the clock starts (x = seq[0:T], y = seq[1:T+1]).
//   Every step's wall time (steady_clock) is kept; the result gives median, p10 and p90.
//   The batch is split into data-parallel shards as `atto train` splits it (`shards`). With
//   profile on, the per-op times are those of shard 0, which runs beside the other shards.
// - bench_generate: `warmup` untimed runs, then `steps` timed runs of gen::generate_batch
//   (KV cache, its block-size policy, plain sampling at temperature 1, no stop token) producing
//   new_tokens tokens for each of batch_size one-token prompts. A run's time divided by
//   new_tokens is one "ms per token" sample; tokens/s = batch_size * new_tokens / median run.
// - bench_gemm: kernels::gemm (the GEMM every Linear layer uses), C[M, N] = A[M, K] @ B[N, K]^T
//   (the Linear forward layout) with M = N = K = size, 2 M N K FLOPs per call.
// - Peak resident memory: getrusage(RUSAGE_SELF).ru_maxrss, the high-water mark of the whole
//   process (KiB on Linux). bench_train reads it before measuring the GEMM peak, so the GEMM's
//   buffers never count. Measure one thing per process for a clean figure.
//
// Model FLOPs (training): 6 N + 12 L C T per token, the PaLM estimate (Chowdhery et al. 2022,
// appendix B) as nanoGPT's estimate_mfu computes it: N counts the parameters that take part in
// a matrix product, i.e. every parameter except the embedding lookups (wpe always, wte when not
// tied to lm_head: with tied weights the matrix is counted once, as the lm_head product), so
// with tied weights N is nanoGPT's get_num_params(non_embedding=True). 6 N is forward (2 N) plus
// backward (4 N) of the weight products; 12 L C T is forward + backward of q k^T and att v over
// T = block_size (the full, not the causal half). MFU = model FLOP/s / peak sgemm FLOP/s, where
// the peak is the best bench_gemm call at the same thread count (or TrainBenchOptions::peak_gflops).
//
// Determinism: same options (seed, thread count) give the same losses bit for bit; the kernels
// make them thread-count independent as well (tests/train/test_loss_curve.cpp holds a curve).
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/tape.h"
#include "kernels/kernels.h"
#include "models/gpt.h"

namespace atto::bench {

// Summary of a list of timings (milliseconds). Percentiles interpolate linearly between the
// sorted samples (numpy's default), so p10 <= median <= p90 always.
struct StepStats {
  int64_t count = 0;
  double median_ms = 0.0, p10_ms = 0.0, p90_ms = 0.0, mean_ms = 0.0, min_ms = 0.0, max_ms = 0.0;
};
StepStats step_stats(std::vector<double> ms);
// The q-quantile (q in [0, 1]) of samples, linear interpolation; samples must be non-empty.
double quantile(std::vector<double> samples, double q);

// getrusage(RUSAGE_SELF).ru_maxrss: the process's peak resident memory so far, in KiB.
int64_t peak_rss_kib();

// ---- GEMM -------------------------------------------------------------------------------
struct GemmBenchOptions {
  int64_t size = 1024;  // M = N = K
  int64_t m = 0, n = 0, k = 0;  // a product of another shape: C[m, n] = A[m, k] B[n, k]^T (0: size)
  int64_t warmup = 2;   // untimed calls
  int64_t steps = 10;   // timed calls
  int threads = 0;      // 0 = all cores
  uint64_t seed = 1337;
  double fma_seconds = 0.25;                               // how long the FMA ceiling is measured; 0 = not measured
  kernels::Precision precision = kernels::Precision::F32;  // bf16: also the bf16 GEMM and its ceiling
};
struct GemmBenchResult {
  int64_t size = 0;
  int64_t m = 0, n = 0, k = 0;  // the product timed
  int threads = 0;
  StepStats call;              // ms per call
  double median_gflops = 0.0;  // 2 m n k / median call time
  double best_gflops = 0.0;    // 2 m n k / fastest call: the peak used for MFU
  // The cores' FMA ceiling (kernels::fma_peak_gflops, all threads at once): per thread, and the
  // sum, which no GEMM passes.
  std::vector<double> fma_gflops_per_thread;
  double fma_gflops = 0.0;
  // With precision bf16: the same product under a bf16 PrecisionScope (both inputs rounded,
  // B packed on each call), the kernel that ran it, and the bf16 units' ceiling
  // (kernels::bf16_peak_gflops) beside the FMA one.
  bool bf16 = false;
  std::string bf16_kernel;
  StepStats bf16_call;
  double bf16_median_gflops = 0.0, bf16_best_gflops = 0.0;
  // The same product as a linear layer's forward with B from a weight cache (packed once, before
  // the timed calls, as in a training step or a generation): A still rounded on each call.
  StepStats bf16_cached_call;
  double bf16_cached_best_gflops = 0.0;
  std::vector<double> bf16_peak_gflops_per_thread;
  double bf16_peak_gflops = 0.0;
};
GemmBenchResult bench_gemm(const GemmBenchOptions& opt);

// ---- training ---------------------------------------------------------------------------
struct TrainBenchOptions {
  GPTConfig model;           // vocab_size must be set
  int64_t batch_size = 8;    // B; T = model.block_size
  int64_t warmup = 3;        // untimed steps
  int64_t steps = 20;        // timed steps
  uint64_t seed = 1337;      // weights, tokens and dropout
  int threads = 0;           // 0 = all cores
  int shards = 0;            // data-parallel shards of each batch (train/data_parallel.h); 0 = auto
  int64_t data_batches = 0;  // distinct random batches, cycled; 0 = a fresh batch every step
  double peak_gflops = 0.0;  // sgemm peak for MFU; 0 = measure it (bench_gemm defaults); < 0 = skip
  bool profile = false;      // also time the step's phases and every op kind (slightly slower steps)
  kernels::Precision precision = kernels::Precision::F32;  // bf16: as atto train --precision bf16
  bool recompute = false;    // as atto train --recompute
};
// With TrainBenchOptions::profile: mean milliseconds per timed step.
struct PhaseTime {
  std::string phase;  // zero_grad, forward+backward (incl. the loss), clip, optimizer
  double ms = 0.0;
};
struct TrainBenchResult {
  int threads = 0;
  int shards = 0;
  int64_t tokens_per_step = 0;    // B * T
  StepStats step;                 // ms per timed step
  double tokens_per_s = 0.0;      // tokens_per_step / median step
  int64_t num_parameters = 0;     // every parameter (a tied matrix once)
  int64_t flop_parameters = 0;    // N of the FLOP estimate (see the header comment)
  double flops_per_token = 0.0;   // 6 N + 12 L C T
  double model_gflops = 0.0;      // flops_per_token * tokens_per_s / 1e9
  std::string precision;          // fp32 or bf16 (with the bf16 kernel: "bf16 (amx)")
  double peak_gflops = 0.0;       // the GEMM peak of the step's precision (0 when skipped)
  double mfu = 0.0;               // model_gflops / peak_gflops (0 when no peak)
  int64_t peak_rss_kib = 0;       // after the timed steps, before any GEMM measurement
  std::vector<float> losses;      // every step's loss, warm-up steps first
  std::vector<PhaseTime> phases;  // profile only: per phase, mean ms per timed step
  std::vector<OpTime> ops;        // profile only: per op kind, calls and ms per timed step
};
TrainBenchResult bench_train(const TrainBenchOptions& opt);

// Parameters in matrix products (N of 6 N + 12 L C T) and the model FLOPs per trained token.
int64_t flop_parameters(const GPT& model);
double train_flops_per_token(const GPTConfig& cfg, int64_t flop_params);

// ---- generation -------------------------------------------------------------------------
struct GenerateBenchOptions {
  GPTConfig model;            // vocab_size must be set (random weights), unless model_path is given
  std::string model_path;     // a run directory or a GGUF file: its weights, loaded as `atto sample` loads them
  int64_t prompt_tokens = 0;  // > 0: also time the forward of a prompt of this many random tokens
  bool greedy = false;        // argmax instead of sampling at temperature 1
  int64_t batch_size = 1;     // sequences decoded together
  int64_t new_tokens = 500;   // per sequence
  int64_t warmup = 1;         // untimed runs
  int64_t steps = 5;          // timed runs
  uint64_t seed = 1337;
  int threads = 0;
  kernels::Precision precision = kernels::Precision::F32;  // bf16: weights kept in bf16 while generating
};
struct GenerateBenchResult {
  int threads = 0;
  std::string precision;  // as TrainBenchResult's
  StepStats token;        // ms per generated token (a run's time / new_tokens), over runs
  StepStats prompt;       // ms per prompt forward (prompt_tokens > 0)
  double prompt_tokens_per_s = 0.0;
  double tokens_per_s = 0.0;  // batch_size * new_tokens / median run time
  int64_t num_parameters = 0;
  int64_t peak_rss_kib = 0;
  int64_t generated = 0;  // tokens of the last run (all sequences), a check
};
GenerateBenchResult bench_generate(const GenerateBenchOptions& opt);

// Machine-readable forms (what `atto bench ... --json` prints).
nlohmann::json to_json(const StepStats& s);
nlohmann::json to_json(const GemmBenchResult& r);
nlohmann::json to_json(const TrainBenchResult& r);
nlohmann::json to_json(const GenerateBenchResult& r);

}  // namespace atto::bench
