// atto sample: generate text from a trained GPT (batched, with the KV cache).
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "data/lines_dataset.h"
#include "generate/generate.h"
#include "kernels/kernels.h"
#include "tensor/error.h"
#include "train/checkpoint.h"

namespace atto::cli {

namespace {

constexpr int64_t kStreamDefaultTokens = 500;

struct SampleFlags {
  std::string model, prompt;
  int64_t n = 20;
  int64_t max_tokens = 0;  // 0: block size (lines), 500 (stream)
  gen::SamplerOptions sampler;
  uint64_t seed = 1337;
  int threads = 0;
  bool report = false, json = false;
};

struct Novelty {
  int64_t train = 0, val = 0, fresh = 0;
};

// Which samples are copies of training or validation lines: the run's data file is re-read and
// split again with the run's split seed and tokenizer (the same split the trainer used).
Novelty novelty_report(const LoadedModel& lm, const std::string& run_dir, const std::vector<std::string>& texts) {
  const DataConfig& d = lm.config.data;
  if (d.path.empty() || !std::filesystem::exists(d.path))
    fail("--report needs the training file '{}' named in {}: it no longer exists (run from the directory you "
         "trained in, or restore the file)",
         d.path, run_path(run_dir, "config.json"));
  const TextFile file = read_text_file(d.path);
  if (!d.fingerprint.empty() && fingerprint_bytes(file.text) != d.fingerprint)
    fmt::print(stderr, "atto: warning: {} has changed since training; the train/val split may differ\n", d.path);
  const LinesDataset data(file, lm.tokenizer, {.split_seed = d.split_seed});
  Novelty n;
  for (const std::string& t : texts) {
    switch (data.novelty(t)) {
      case LinesDataset::Novelty::Train: ++n.train; break;
      case LinesDataset::Novelty::Val: ++n.val; break;
      case LinesDataset::Novelty::New: ++n.fresh; break;
    }
  }
  return n;
}

void print_samples(const SampleFlags& f, bool lines, const gen::PromptSet& ps, const std::vector<gen::Sample>& out,
                   const std::vector<std::string>& texts, const Novelty* nov) {
  if (f.json) {
    nlohmann::json samples = nlohmann::json::array();
    for (size_t i = 0; i < out.size(); ++i)
      samples.push_back({{"text", texts[i]}, {"prompt_ids", ps.prompts[i]}, {"ids", out[i].tokens},
                         {"stopped", out[i].stopped}});
    nlohmann::json j{{"mode", lines ? "lines" : "stream"}, {"seed", f.seed}, {"samples", samples}};
    if (nov) j["novelty"] = {{"train", nov->train}, {"val", nov->val}, {"new", nov->fresh}};
    fmt::print("{}\n", j.dump());
    return;
  }
  for (const std::string& t : texts) {
    if (lines) {
      fmt::print("{}\n", t);
    } else {  // stream: each sample, then a separator line
      fmt::print("{}{}----------\n", t, t.empty() || t.back() != '\n' ? "\n" : "");
    }
  }
  if (nov) {  // on stderr, so that stdout stays one sample per line
    std::fflush(stdout);
    const double n = static_cast<double>(texts.size());
    fmt::print(stderr, "novelty: {:.1f}% in the training set, {:.1f}% in the validation set, {:.1f}% new ({} samples)\n",
               100.0 * nov->train / n, 100.0 * nov->val / n, 100.0 * nov->fresh / n, texts.size());
  }
}

int run_sample(const SampleFlags& f) {
  if (f.n < 1) throw UsageError(fmt::format("-n must be at least 1, got {}", f.n));
  if (f.max_tokens < 0) throw UsageError(fmt::format("--max-tokens must be >= 0 (0 = default), got {}", f.max_tokens));
  f.sampler.validate();
  kernels::set_num_threads(f.threads);
  LoadedModel lm = load_run(f.model);
  const bool lines = lm.tokenizer.has_boundary();
  if (f.report && !lines)
    throw UsageError("--report compares samples with the training lines: it needs a lines-mode model, and " + f.model +
                     " was trained in stream mode");
  const int64_t block = lm.config.model.block_size;
  Rng rng(f.seed);
  gen::PromptSet ps;
  try {
    ps = gen::make_prompts(lm.tokenizer, f.prompt, f.n, block, rng);
  } catch (const Error& e) {
    fail("--prompt: {}", e.what());
  }
  if (ps.cropped > 0)
    fmt::print(stderr, "atto: warning: the prompt is longer than the block size {}: its first {} tokens are dropped\n",
               block, ps.cropped);
  gen::GenerateOptions opt;
  opt.max_new_tokens = f.max_tokens > 0 ? f.max_tokens : (lines ? block : kStreamDefaultTokens);
  opt.stop_token = lines ? lm.tokenizer.boundary_id() : -1;
  opt.sampler = f.sampler;
  const std::vector<gen::Sample> out = gen::generate_batch(*lm.model, ps.prompts, opt, rng);
  std::vector<std::string> texts;
  for (const gen::Sample& s : out) texts.push_back(ps.text + lm.tokenizer.decode(s.tokens));
  Novelty nov;
  if (f.report) nov = novelty_report(lm, f.model, texts);
  print_samples(f, lines, ps, out, texts, f.report ? &nov : nullptr);
  return 0;
}

}  // namespace

Command add_sample(CLI::App& root) {
  CLI::App* app = root.add_subcommand("sample", "Generate text from a trained model");
  auto f = std::make_shared<SampleFlags>();
  gen::SamplerOptions& s = f->sampler;
  app->add_option("--model", f->model, "Run directory of a trained model")->required();
  app->add_option("-n,--num-samples", f->n, "Number of samples (generated together as one batch)")
      ->capture_default_str();
  app->add_option("--prompt", f->prompt, "Text each sample starts with");
  app->add_option("--max-tokens", f->max_tokens, "Tokens to generate per sample at most; 0 = block size (lines) "
                  "or 500 (stream)")->capture_default_str();
  app->add_option("--temperature", s.temperature, "Divide the logits by this (> 0); lower is more conservative")
      ->capture_default_str();
  app->add_option("--top-k", s.top_k, "Keep the k most likely tokens; 0 = off")->capture_default_str();
  app->add_option("--top-p", s.top_p, "Nucleus: keep the most likely tokens up to this total probability; 1 = off")
      ->capture_default_str();
  app->add_option("--min-p", s.min_p, "Keep tokens at least this fraction as likely as the best one; 0 = off")
      ->capture_default_str();
  app->add_option("--repetition-penalty", s.repetition_penalty, "Penalise tokens seen recently (> 1); 1 = off")
      ->capture_default_str();
  app->add_option("--repetition-last-n", s.repetition_last_n, "Recent tokens the penalty looks at; 0 = all")
      ->capture_default_str();
  app->add_flag("--greedy", s.greedy, "Always take the most likely token (deterministic)");
  app->add_option("--seed", f->seed, "Seed of the sampling RNG (same seed, same samples)")->capture_default_str();
  app->add_option("--threads", f->threads, "Threads; 0 = all cores")->capture_default_str();
  app->add_flag("--report", f->report, "Lines mode: report how many samples are training lines, validation lines, "
                "or new (re-reads the training file)");
  app->add_flag("--json", f->json, "Print one JSON object (texts, token ids)");
  return {app, [f] { return run_sample(*f); }};
}

}  // namespace atto::cli
