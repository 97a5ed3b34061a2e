// atto sample: generate text from a trained GPT (batched, with the KV cache).
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/json.h"
#include "commands.h"
#include "data/lines_dataset.h"
#include "generate/generate.h"
#include "kernels/kernels.h"
#include "run/run_dir.h"

namespace atto::cli {

namespace {

constexpr int64_t kChunkTokens = int64_t{1} << 22;  // tokens a chunk of samples may hold (16 MiB of ids)

struct SampleFlags {
  std::string model, prompt;
  int64_t n = 20;
  int64_t max_tokens = 0;  // 0: block size (lines), 500 (stream)
  gen::SamplerOptions sampler;
  std::vector<std::string> logit_bias;  // --logit-bias ID=BIAS, repeated
  uint64_t seed = gen::kDefaultSampleSeed;
  int threads = 0;
  std::string precision = "fp32";
  bool report = false, json = false;
};

// Which samples are copies of training or validation lines: the run's data file is re-read and
// split again with the run's split seed and tokenizer (the same split the trainer used). Read
// before any sample is generated, so a missing file is an error at once; counts grow per chunk.
class NoveltyCounter {
 public:
  NoveltyCounter(const LoadedModel& lm, const std::string& run_dir)
      : data_(load(lm, run_dir), *lm.tokenizer, {.split_seed = lm.config.data.split_seed}) {}

  void add(const std::string& text) {
    switch (data_.novelty(text)) {
      case LinesDataset::Novelty::Train: ++train; break;
      case LinesDataset::Novelty::Val: ++val; break;
      case LinesDataset::Novelty::New: ++fresh; break;
    }
  }
  int64_t total() const { return train + val + fresh; }

  int64_t train = 0, val = 0, fresh = 0;

 private:
  static TextFile load(const LoadedModel& lm, const std::string& run_dir) {
    const DataConfig& d = lm.config.data;
    if (d.path.empty() || !std::filesystem::exists(d.path))
      fail(
          "--report needs the training file '{}' named in {}: it no longer exists (run from the directory you "
          "trained in, or restore the file)",
          d.path, run_path(run_dir, "config.json"));
    TextFile file = read_text_file(d.path);
    if (!d.fingerprint.empty() && fingerprint_bytes(file.text) != d.fingerprint)
      fmt::print(stderr, "atto: warning: {} has changed since training; the train/val split may differ\n", d.path);
    return file;
  }

  LinesDataset data_;
};

// Prints samples chunk by chunk as they come (stdout is flushed after each chunk). --json
// streams one JSON object: {"mode", "seed", "samples": [...] (one element per sample, written
// as its chunk finishes), "novelty" (with --report)}.
class SamplePrinter {
 public:
  SamplePrinter(const SampleFlags& f, bool lines) : f_(f), lines_(lines) {
    if (f_.json) fmt::print("{{\"mode\":\"{}\",\"seed\":{},\"samples\":[", lines ? "lines" : "stream", f_.seed);
  }

  // skip_first: the chunk's first sample was streamed already (stream_piece); only its separator
  // is left to print.
  void chunk(const gen::SampleChunk& c, const std::vector<std::string>& texts, bool skip_first = false) {
    for (size_t i = 0; i < texts.size(); ++i) {
      if (i == 0 && skip_first) {
        fmt::print("{}----------\n", streamed_ends_line_ ? "" : "\n");
        continue;
      }
      if (f_.json) {
        const nlohmann::json j{{"text", texts[i]},
                               {"prompt_ids", c.prompts[i]},
                               {"ids", c.samples[i].tokens},
                               {"stopped", c.samples[i].stopped}};
        fmt::print("{}{}", c.first + static_cast<int64_t>(i) == 0 ? "" : ",", json_util::dump(j));
      } else if (lines_) {
        fmt::print("{}\n", texts[i]);
      } else {  // stream: each sample, then a separator line
        fmt::print("{}{}----------\n", texts[i], texts[i].empty() || texts[i].back() != '\n' ? "\n" : "");
      }
    }
    std::fflush(stdout);
  }

  // Text of a stream-mode sample as it is generated (the first sample of each chunk: a long
  // generation shows at once instead of after the whole chunk).
  void stream_piece(std::string_view piece) {
    if (piece.empty()) return;
    fmt::print("{}", piece);
    streamed_ends_line_ = piece.back() == '\n';
    std::fflush(stdout);
  }
  void stream_start() { streamed_ends_line_ = true; }

  void finish(const NoveltyCounter* nov) {
    if (f_.json) {
      fmt::print("]");
      if (nov)
        fmt::print(",\"novelty\":{}",
                   nlohmann::json{{"train", nov->train}, {"val", nov->val}, {"new", nov->fresh}}.dump());
      fmt::print("}}\n");
    } else if (nov) {  // on stderr, so that stdout stays one sample per line
      std::fflush(stdout);
      const double n = static_cast<double>(nov->total());
      fmt::print(stderr,
                 "novelty: {:.1f}% in the training set, {:.1f}% in the validation set, {:.1f}% new ({} "
                 "samples)\n",
                 100.0 * nov->train / n, 100.0 * nov->val / n, 100.0 * nov->fresh / n, nov->total());
    }
  }

 private:
  const SampleFlags& f_;
  bool lines_;
  bool streamed_ends_line_ = true;  // the streamed text so far ends with a newline (or is empty)
};

// The first sample of a chunk printed as its tokens are drawn (gen::TextStream: a piece never
// ends inside a UTF-8 character), the prompt text first.
class LiveSample {
 public:
  LiveSample(const GptTokenizer& tok, const std::string& prompt, SamplePrinter& printer)
      : tok_(tok), prompt_(prompt), printer_(printer) {
    restart();
  }
  bool token(int32_t t) {
    if (!stream_->started(0)) printer_.stream_piece(prompt_);
    return stream_->on_token(0, t);
  }
  void finish(const gen::Sample& s) {  // the sample ended: what was held back, then a new one
    if (!stream_->started(0)) printer_.stream_piece(prompt_);
    stream_->finish(0, s);
    restart();
  }

 private:
  void restart() {
    stream_.emplace(tok_, 1, std::vector<std::string>{}, [this](int64_t, const std::string& piece, int32_t, bool) {
      printer_.stream_piece(piece);
      return true;
    });
  }
  const GptTokenizer& tok_;
  const std::string& prompt_;
  SamplePrinter& printer_;
  std::optional<gen::TextStream> stream_;
};

// --logit-bias ID=BIAS (repeated): token ids with their biases; a later flag for the same id wins.
std::vector<std::pair<int32_t, float>> parse_logit_bias(const std::vector<std::string>& flags) {
  std::map<int32_t, float> bias;
  for (const std::string& a : flags) {
    const size_t eq = a.find('=');
    int32_t id = -1;
    double b = 0.0;
    bool ok = eq != std::string::npos;
    if (ok) {
      const char* end = a.data() + eq;
      const auto r = std::from_chars(a.data(), end, id);
      ok = r.ec == std::errc() && r.ptr == end && id >= 0;
    }
    if (ok) {
      const std::string tail = a.substr(eq + 1);
      char* end = nullptr;
      b = std::strtod(tail.c_str(), &end);
      ok = !tail.empty() && end == tail.c_str() + tail.size();
    }
    if (!ok)
      throw UsageError(fmt::format("--logit-bias expects TOKEN_ID=BIAS (e.g. --logit-bias 12=-100 bans token 12), "
                                   "got '{}'",
                                   a));
    bias[id] = static_cast<float>(b);
  }
  return {bias.begin(), bias.end()};
}

int run_sample(const SampleFlags& flags) {
  SampleFlags f = flags;
  f.sampler.logit_bias = parse_logit_bias(flags.logit_bias);
  if (f.n < 1) throw UsageError(fmt::format("-n must be at least 1, got {}", f.n));
  if (f.max_tokens < 0 || f.max_tokens > gen::kMaxNewTokens)
    throw UsageError(fmt::format("--max-tokens must be in [0, {}] (0 = default), got {}", gen::kMaxNewTokens,
                                 f.max_tokens));
  f.sampler.validate();
  kernels::set_num_threads(f.threads);
  kernels::Bf16WeightCache bf16;  // the weights do not change while sampling: packed once
  const kernels::PrecisionScope precision(parse_precision(f.precision), &bf16);
  LoadedModel lm = load_run(f.model, WeightStorage::Quantized);
  f.sampler.check_vocab(lm.tokenizer->vocab_size());
  const bool lines = lm.tokenizer->has_boundary();
  if (f.report && !lines)
    throw UsageError("--report compares samples with the training lines: it needs a lines-mode model, and " + f.model +
                     " was trained in stream mode");
  const int64_t block = lm.config.gpt.block_size;
  gen::PromptSet ps;
  try {
    ps = gen::make_prompt_set(*lm.tokenizer, f.prompt, block);
  } catch (const Error& e) {
    fail("--prompt: {}", e.what());
  }
  if (ps.cropped > 0)
    fmt::print(stderr, "atto: warning: the prompt is longer than the block size {}: its first {} tokens are dropped\n",
               block, ps.cropped);
  gen::GenerateOptions opt;  // opt.max_batch: the chunk size, fixed (same seed, same samples anywhere)
  opt.max_new_tokens = gen::default_max_new_tokens(f.max_tokens, lines, block);
  opt.stop_token = lines ? lm.tokenizer->boundary_id() : -1;
  opt.sampler = f.sampler;
  std::optional<NoveltyCounter> nov;
  if (f.report) nov.emplace(lm, f.model);
  // Memory: a chunk holds max_batch samples of up to max_new_tokens tokens each: at most
  // kChunkTokens tokens together (the default lengths keep the chunks of 256, and their samples).
  opt.max_batch = std::clamp<int64_t>(kChunkTokens / opt.max_new_tokens, 1, opt.max_batch);
  SamplePrinter printer(f, lines);
  // Stream mode as plain text: each chunk's first sample is printed as its tokens come.
  const bool stream = !lines && !f.json;
  LiveSample live(*lm.tokenizer, ps.text, printer);
  if (stream) opt.on_token = [&, batch = opt.max_batch](int64_t i, int32_t t) { return i % batch || live.token(t); };
  Rng rng(f.seed);
  gen::generate_chunks(*lm.model, ps, f.n, opt, rng, [&](const gen::SampleChunk& c) {
    std::vector<std::string> texts;
    for (const gen::Sample& s : c.samples) texts.push_back(ps.text + lm.tokenizer->decode(s.tokens));
    if (nov)
      for (const std::string& t : texts) nov->add(t);
    if (stream) live.finish(c.samples[0]);
    printer.chunk(c, texts, stream);
    printer.stream_start();
  });
  printer.finish(nov ? &*nov : nullptr);
  return 0;
}

}  // namespace

Command add_sample(CLI::App& root) {
  CLI::App* app = root.add_subcommand("sample", "Generate text from a trained model");
  auto f = std::make_shared<SampleFlags>();
  gen::SamplerOptions& s = f->sampler;
  app->add_option("--model", f->model, "Run directory of a trained model")->required();
  app->add_option("-n,--num-samples", f->n, "Number of samples (decoded 256 at a time and printed as they come)")
      ->capture_default_str();
  app->add_option("--prompt", f->prompt, "Text each sample starts with");
  app->add_option("--max-tokens", f->max_tokens,
                  fmt::format("Tokens to generate per sample at most; 0 = block size (lines) or {} (stream)",
                              gen::kStreamSampleTokens))
      ->capture_default_str();
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
  app->add_option("--frequency-penalty", s.frequency_penalty,
                  "Subtract this times a token's count among the recent tokens from its logit (OpenAI's); 0 = off")
      ->capture_default_str();
  app->add_option("--presence-penalty", s.presence_penalty,
                  "Subtract this from the logit of each token among the recent tokens (OpenAI's); 0 = off")
      ->capture_default_str();
  app->add_option("--logit-bias", f->logit_bias,
                  "TOKEN_ID=BIAS: add BIAS (-100 to 100) to that token's logit; repeat the flag for more tokens "
                  "(`atto tokenize` gives the ids)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app->add_flag("--greedy", s.greedy, "Always take the most likely token (deterministic)");
  app->add_option("--seed", f->seed, "Seed of the sampling RNG (same seed, same samples)")->capture_default_str();
  add_threads_flag(app, f->threads);
  app->add_option("--precision", f->precision,
                  "fp32, or bf16: matrix products with bf16 weights and inputs, fp32 sums (AMX or AVX512_BF16)")
      ->capture_default_str();
  app->add_flag("--report", f->report,
                "Lines mode: report how many samples are training lines, validation lines, "
                "or new (re-reads the training file)");
  app->add_flag("--json", f->json, "Print one JSON object (texts, token ids), its samples streamed as they come");
  return {app, [f] { return run_sample(*f); }};
}

}  // namespace atto::cli
