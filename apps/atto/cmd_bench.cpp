// atto bench train|generate|gemm: speed of training steps, generated tokens and the GEMM.
#include <fmt/format.h>

#include <string>

#include "base/error.h"
#include "bench/bench.h"
#include "commands.h"
#include "kernels/isa.h"
#ifdef ATTO_HAVE_MPI
#include "mpi/comm_bench.h"
#endif
#include "run/run_config.h"

namespace atto::cli {

namespace {

// The model flags of `atto train` (same names, same meaning) plus the vocabulary size.
struct ModelFlags {
  GPTConfig cfg;
  std::string ffn = "gelu", norm = "layernorm", placement = "pre", pos = "learned";

  ModelFlags() { cfg.vocab_size = 65; }

  GPTConfig resolve() const {
    GPTConfig c = cfg;
    c.activation = parse_activation(ffn);
    c.norm = parse_norm(norm);
    if (placement != "pre" && placement != "post")
      throw UsageError(fmt::format("--norm-placement must be pre or post, got '{}'", placement));
    c.pre_norm = placement == "pre";
    c.pos = parse_pos(pos);
    c.validate();
    return c;
  }
};

struct CommonFlags {
  int threads = 0;
  int64_t warmup = 0, steps = 0;
  uint64_t seed = 1337;
  bool json = false;
  std::string precision = "fp32";
};

void add_model_flags(CLI::App* app, ModelFlags& f) {
  GPTConfig& m = f.cfg;
  app->add_option("--vocab-size", m.vocab_size, "Vocabulary size (random token ids)")->capture_default_str();
  app->add_option("--d-model", m.d_model, "Model width")->capture_default_str();
  app->add_option("--n-heads", m.n_heads, "Attention heads (must divide --d-model)")->capture_default_str();
  app->add_option("--n-layers", m.n_layers, "Transformer blocks")->capture_default_str();
  app->add_option("--block-size", m.block_size, "Context length (training batches are [B, block-size])")
      ->capture_default_str();
  app->add_option("--d-ff", m.d_ff, "Feed-forward width; 0 = 4 * d-model")->capture_default_str();
  app->add_option("--ffn", f.ffn, "Feed-forward activation: relu, gelu, gelu_tanh, swiglu")->capture_default_str();
  app->add_option("--norm", f.norm, "layernorm or rmsnorm")->capture_default_str();
  app->add_option("--norm-placement", f.placement, "pre (GPT-2) or post (2017 paper)")->capture_default_str();
  app->add_option("--pos", f.pos, "Positional encoding: learned or sinusoidal")->capture_default_str();
  app->add_flag("--tie-weights,!--no-tie-weights", m.tie_weights, "Tie the output projection to the token embedding")
      ->capture_default_str();
  app->add_flag("--bias,!--no-bias", m.bias, "Biases in Linear layers and LayerNorm")->capture_default_str();
  app->add_option("--dropout", m.dropout, "Dropout probability")->capture_default_str();
  app->add_option("--lora-rank", m.lora_rank, "train: LoRA adapters of this rank over frozen weights (0: all train)")
      ->capture_default_str();
  app->add_option("--lora-targets", m.lora_targets, "train: the layers LoRA adapts (qkv, proj, fc, fc2)")
      ->capture_default_str();
}

void add_common_flags(CLI::App* app, CommonFlags& f, const char* unit) {
  add_threads_flag(app, f.threads);
  app->add_option("--warmup", f.warmup, fmt::format("Untimed {} before measuring", unit))->capture_default_str();
  app->add_option("--steps", f.steps, fmt::format("Timed {}", unit))->capture_default_str();
  app->add_option("--seed", f.seed, "Seed of the weights and the random tokens")->capture_default_str();
  app->add_flag("--json", f.json, "Print one JSON object instead of the table");
  app->add_option("--precision", f.precision,
                  "fp32, or bf16 (GEMMs with bf16 inputs and fp32 sums, as atto train --precision bf16)")
      ->capture_default_str();
}

double mib(int64_t kib) { return static_cast<double>(kib) / 1024.0; }

std::string describe(const GPTConfig& m) {
  return fmt::format("GPT {} layers, d_model {}, {} heads, block {}, vocab {}, {}, {}, {}-norm, {} positions{}{}",
                     m.n_layers, m.d_model, m.n_heads, m.block_size, m.vocab_size, to_string(m.activation),
                     to_string(m.norm), m.pre_norm ? "pre" : "post", to_string(m.pos), m.tie_weights ? ", tied" : "",
                     m.dropout > 0 ? fmt::format(", dropout {}", m.dropout) : "") +
         (m.lora() ? fmt::format(", LoRA rank {} on {} (the rest frozen)", m.lora_rank, m.lora_targets) : "");
}

std::string stats_line(const bench::StepStats& s, const char* what) {
  return fmt::format("{:<12} median {:.3f} ms   p10 {:.3f} ms   p90 {:.3f} ms   ({} timed)", what, s.median_ms,
                     s.p10_ms, s.p90_ms, s.count);
}

// The --profile tables: phases of a step, then op kinds by total time (ms per timed step).
void print_profile(const bench::TrainBenchResult& r) {
  double step = 0.0;
  for (const auto& p : r.phases) step += p.ms;
  fmt::print("\nprofile (mean ms per timed step; profiling adds a little time to each op{})\n",
             r.shards > 1 ? "; ops: shard 0's, beside the other shards" : "");
  for (const auto& p : r.phases)
    fmt::print("  {:<22} {:9.3f} ms  {:5.1f}%\n", p.phase, p.ms, step > 0 ? 100.0 * p.ms / step : 0.0);
  fmt::print("\n  {:<22} {:>6} {:>12} {:>12} {:>7}\n", "op", "calls", "forward ms", "backward ms", "step");
  for (const auto& o : r.ops) {
    const double calls = static_cast<double>(o.calls) / static_cast<double>(r.step.count);
    fmt::print("  {:<22} {:6.0f} {:12.3f} {:12.3f} {:6.1f}%\n", o.op, calls, o.forward_ms, o.backward_ms,
               step > 0 ? 100.0 * (o.forward_ms + o.backward_ms) / step : 0.0);
  }
}

struct TrainBenchFlags {
  ModelFlags model;
  CommonFlags common{.warmup = 3, .steps = 20};
  bench::TrainBenchOptions opt;
};

int run_train_bench(const TrainBenchFlags& f) {
  bench::TrainBenchOptions o = f.opt;
  o.model = f.model.resolve();
  o.threads = f.common.threads;
  o.warmup = f.common.warmup;
  o.steps = f.common.steps;
  o.seed = f.common.seed;
  o.precision = parse_precision(f.common.precision);  // bench_* check that the CPU runs it
  const bench::TrainBenchResult r = bench::bench_train(o);
  if (f.common.json) {
    nlohmann::json j = bench::to_json(r);
    j["model"] = describe(o.model);
    j["batch_size"] = o.batch_size;
    j["recompute"] = o.recompute;
    fmt::print("{}\n", j.dump());
    return 0;
  }
  fmt::print("atto bench train: {}; batch {}; {} parameters; threads {}, shards {}; {}{}\n", describe(o.model),
             o.batch_size, r.num_parameters, r.threads, r.shards, r.precision, o.recompute ? "; recompute" : "");
  fmt::print("{}\n", kernels::kernels_description());
  fmt::print("{}\n", stats_line(r.step, "step"));
  fmt::print("{:<12} {:.0f} tokens/s ({} tokens per step)\n", "throughput", r.tokens_per_s, r.tokens_per_step);
  fmt::print("{:<12} {:.2f} GFLOP/s ({:.4g} FLOP/token = 6 N + 12 L C T, N = {})\n", "model", r.model_gflops,
             r.flops_per_token, r.flop_parameters);
  if (r.peak_gflops > 0)
    fmt::print("{:<12} {:.1f}% of the {} GEMM peak {:.2f} GFLOP/s\n", "MFU", 100.0 * r.mfu,
               o.precision == kernels::Precision::BF16 ? "bf16" : "sgemm", r.peak_gflops);
  fmt::print("{:<12} {:.1f} MiB peak resident (ru_maxrss)\n", "memory", mib(r.peak_rss_kib));
  fmt::print("{:<12} {:.4f} first, {:.4f} last\n", "loss", r.losses.front(), r.losses.back());
  if (!r.phases.empty()) print_profile(r);
  return 0;
}

struct GenerateBenchFlags {
  ModelFlags model;
  CommonFlags common{.warmup = 1, .steps = 5};
  bench::GenerateBenchOptions opt;
};

int run_generate_bench(const GenerateBenchFlags& f) {
  bench::GenerateBenchOptions o = f.opt;
  o.model = f.model.resolve();
  o.threads = f.common.threads;
  o.warmup = f.common.warmup;
  o.steps = f.common.steps;
  o.seed = f.common.seed;
  o.precision = parse_precision(f.common.precision);  // bench_* check that the CPU runs it
  const bench::GenerateBenchResult r = bench::bench_generate(o);
  const std::string what = o.model_path.empty() ? describe(o.model) : o.model_path;
  if (f.common.json) {
    nlohmann::json j = bench::to_json(r);
    j["model"] = what;
    j["prompt_tokens"] = o.prompt_tokens;
    j["batch_size"] = o.batch_size;
    j["new_tokens"] = o.new_tokens;
    fmt::print("{}\n", j.dump());
    return 0;
  }
  fmt::print("atto bench generate: {}; batch {}, {} new tokens per run (KV cache); {} parameters; threads {}; {}\n",
             what, o.batch_size, o.new_tokens, r.num_parameters, r.threads, r.precision);
  fmt::print("{}\n", kernels::kernels_description());
  if (o.prompt_tokens > 0) {
    fmt::print("{}\n", stats_line(r.prompt, fmt::format("per {}-token prompt", o.prompt_tokens).c_str()));
    fmt::print("{:<12} {:.0f} tokens/s\n", "prompt", r.prompt_tokens_per_s);
  }
  fmt::print("{}\n", stats_line(r.token, "per token"));
  fmt::print("{:<12} {:.0f} tokens/s\n", "throughput", r.tokens_per_s);
  fmt::print("{:<12} {:.1f} MiB peak resident (ru_maxrss)\n", "memory", mib(r.peak_rss_kib));
  return 0;
}

struct GemmBenchFlags {
  CommonFlags common{.warmup = 2, .steps = 10};
  bench::GemmBenchOptions opt;
  std::vector<int64_t> shape;  // --shape M,N,K
};

int run_gemm_bench(const GemmBenchFlags& f) {
  bench::GemmBenchOptions o = f.opt;
  if (!f.shape.empty()) {
    ATTO_CHECK(f.shape.size() == 3 && f.shape[0] > 0 && f.shape[1] > 0 && f.shape[2] > 0,
               "bench gemm: --shape takes three positive sizes M,N,K (e.g. 4096,768,3072)");
    o.m = f.shape[0], o.n = f.shape[1], o.k = f.shape[2];
  }
  o.threads = f.common.threads;
  o.warmup = f.common.warmup;
  o.steps = f.common.steps;
  o.seed = f.common.seed;
  o.precision = parse_precision(f.common.precision);  // bench_* check that the CPU runs it
  const bench::GemmBenchResult r = bench::bench_gemm(o);
  if (f.common.json) {
    fmt::print("{}\n", bench::to_json(r).dump());
    return 0;
  }
  fmt::print("atto bench gemm: C[{0}, {1}] = A[{0}, {2}] @ B[{1}, {2}]^T (kernels::gemm); threads {3}\n", r.m, r.n,
             r.k, r.threads);
  fmt::print("{}\n", kernels::kernels_description());
  fmt::print("{}\n", stats_line(r.call, "call"));
  fmt::print("{:<12} {:.2f} GFLOP/s median, {:.2f} GFLOP/s best (the peak MFU is measured against)\n", "sgemm",
             r.median_gflops, r.best_gflops);
  if (!r.fma_gflops_per_thread.empty()) {
    std::string each;
    for (const double g : r.fma_gflops_per_thread) each += fmt::format("{}{:.1f}", each.empty() ? "" : " + ", g);
    fmt::print(
        "{:<12} {:.2f} GFLOP/s ({} per thread, all at once): the cores' FMA ceiling; sgemm best is {:.0f}% "
        "of it\n",
        "fma peak", r.fma_gflops, each, 100.0 * r.best_gflops / r.fma_gflops);
  }
  if (r.bf16) {
    fmt::print("{}\n", stats_line(r.bf16_call, "bf16 call"));
    fmt::print("{:<12} {:.2f} GFLOP/s median, {:.2f} GFLOP/s best ({} kernel; {:.2f}x sgemm best)\n", "bf16 gemm",
               r.bf16_median_gflops, r.bf16_best_gflops, r.bf16_kernel, r.bf16_best_gflops / r.best_gflops);
    fmt::print("{:<12} {:.2f} GFLOP/s best with B packed once (a linear layer's weight cache, as in training)\n",
               "bf16 cached", r.bf16_cached_best_gflops);
    if (!r.bf16_peak_gflops_per_thread.empty()) {
      std::string each;
      for (const double g : r.bf16_peak_gflops_per_thread)
        each += fmt::format("{}{:.1f}", each.empty() ? "" : " + ", g);
      fmt::print("{:<12} {:.2f} GFLOP/s ({} per thread): the bf16 units' ceiling; bf16 gemm best is {:.0f}% of it\n",
                 "bf16 peak", r.bf16_peak_gflops, each, 100.0 * r.bf16_best_gflops / r.bf16_peak_gflops);
    }
  }
  return 0;
}

#ifdef ATTO_HAVE_MPI
// mpirun -np N atto bench comm: the gradient sum across ranks, exact exchange vs MPI_Allreduce.
int run_comm_bench(int runs, const std::vector<int64_t>& extra) {
  if (!mpi::launched_by_mpirun())
    throw UsageError("atto bench comm measures ranks: run it as mpirun -np N atto bench comm");
  const std::unique_ptr<mpi::MpiCollective> c = mpi::MpiCollective::init();
  if (c->size() < 2) throw UsageError("atto bench comm needs at least 2 ranks (mpirun -np 2 ...)");
  // Gradient sizes (parameters, tied embeddings, vocabulary 65) of bench/e2e's models (c) and
  // (d), and of GPT-2 small (124M).
  std::vector<mpi::CommBenchSize> sizes = {
      {"(c) d128 L4", 809856}, {"(d) d384 L6", 10770816}, {"gpt2 124M", 124439808}};
  for (int64_t n : extra) sizes.push_back({fmt::format("{} floats", n), n});
  const auto results = mpi::bench_comm(*c, sizes, runs);
  if (c->rank() != 0) return 0;
  fmt::print("{} ranks on {}; median of {} runs; bandwidth = gradient bytes / time\n", c->size(), c->host(), runs);
  fmt::print("{:<14} {:>12} {:>14} {:>10} {:>16} {:>10} {:>8}\n", "gradient", "MB", "exact ms", "GB/s",
             "MPI_Allreduce ms", "GB/s", "ratio");
  for (const auto& r : results) {
    const double mb = 4e-6 * static_cast<double>(r.floats);
    fmt::print("{:<14} {:>12.1f} {:>14.3f} {:>10.2f} {:>16.3f} {:>10.2f} {:>8.2f}\n", r.name, mb, r.exchange_ms,
               mb / r.exchange_ms, r.allreduce_ms, mb / r.allreduce_ms, r.exchange_ms / r.allreduce_ms);
  }
  return 0;
}

CLI::App* add_comm_bench(CLI::App* app, int& runs, std::vector<int64_t>& floats) {
  CLI::App* comm = app->add_subcommand("comm",
                                       "Under mpirun: time the gradient sum across ranks (training's exact exchange "
                                       "and MPI_Allreduce) for models (c), (d) and GPT-2 124M");
  comm->add_option("--runs", runs, "Timed runs per size (the median is reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  comm->add_option("--floats", floats, "Also time gradients of these many floats");
  return comm;
}
#endif

}  // namespace

std::shared_ptr<GemmBenchFlags> add_gemm_flags(CLI::App* gemm) {
  auto mf = std::make_shared<GemmBenchFlags>();
  gemm->add_option("--size", mf->opt.size, "M = N = K")->capture_default_str();
  gemm->add_option("--shape", mf->shape, "M,N,K: C[M, N] = A[M, K] B[N, K]^T instead of --size's square")
      ->expected(3)
      ->delimiter(',');
  gemm->add_option("--fma-seconds", mf->opt.fma_seconds,
                   "Seconds spent measuring the cores' FMA ceiling after the GEMM; 0 = skip it")
      ->capture_default_str();
  add_common_flags(gemm, mf->common, "calls");
  return mf;
}

Command add_bench(CLI::App& root) {
  CLI::App* app = root.add_subcommand("bench", "Measure training, generation and GEMM speed (see docs/bench.md)");
  app->require_subcommand(1);

  CLI::App* train = app->add_subcommand("train", "Time training steps (forward, loss, backward, clip, AdamW)");
  auto tf = std::make_shared<TrainBenchFlags>();
  add_model_flags(train, tf->model);
  train->add_option("--batch-size", tf->opt.batch_size, "Sequences per step")->capture_default_str();
  train
      ->add_option("--shards", tf->opt.shards,
                   "Data-parallel shards of each batch, run side by side (as `atto train`); 0 = auto (2)")
      ->capture_default_str();
  add_common_flags(train, tf->common, "steps");
  train
      ->add_option("--peak-gflops", tf->opt.peak_gflops,
                   "sgemm peak for MFU (e.g. from `atto bench gemm`); 0 = measure it after the steps, < 0 = no MFU")
      ->capture_default_str();
  train->add_flag("--profile", tf->opt.profile,
                  "Also print where a step's time goes: its phases and each op kind's forward and backward");
  train->add_flag("--recompute", tf->opt.recompute,
                  "Recompute each block's activations in the backward (as `atto train --recompute`)");

  CLI::App* gen = app->add_subcommand("generate", "Time token generation with the KV cache");
  auto gf = std::make_shared<GenerateBenchFlags>();
  add_model_flags(gen, gf->model);
  gen->add_option("--batch-size", gf->opt.batch_size, "Sequences generated together")->capture_default_str();
  gen->add_option("--new-tokens", gf->opt.new_tokens, "Tokens generated per sequence in one run")
      ->capture_default_str();
  gen->add_option("--model", gf->opt.model_path,
                  "A run directory or GGUF file to time (its weights, as sample loads them: quantized matrices stay quantized) instead of random ones");
  gen->add_option("--prompt-tokens", gf->opt.prompt_tokens, "Also time the forward of a prompt of N random tokens")
      ->capture_default_str();
  gen->add_flag("--greedy", gf->opt.greedy, "Take the most likely token instead of sampling");
  add_common_flags(gen, gf->common, "runs");

  const auto mf = add_gemm_flags(app->add_subcommand("gemm", "Measure the sgemm peak (kernels::gemm, square matrices)"));

  CLI::App* comm = nullptr;
  auto comm_runs = std::make_shared<int>(10);
  auto comm_floats = std::make_shared<std::vector<int64_t>>();
#ifdef ATTO_HAVE_MPI
  comm = add_comm_bench(app, *comm_runs, *comm_floats);
#endif
  return {app, [train, gen, comm, tf, gf, mf, comm_runs, comm_floats] {
            if (train->parsed()) return run_train_bench(*tf);
            if (gen->parsed()) return run_generate_bench(*gf);
#ifdef ATTO_HAVE_MPI
            if (comm->parsed()) return run_comm_bench(*comm_runs, *comm_floats);
#endif
            (void)comm, (void)comm_runs, (void)comm_floats;
            return run_gemm_bench(*mf);
          }};
}

}  // namespace atto::cli
