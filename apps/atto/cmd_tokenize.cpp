// atto tokenizer train|import-gpt2 (make a byte-level BPE tokenizer.json) and atto tokenize
// (text <-> ids with a tokenizer.json or a run's tokenizer).
#include <chrono>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/files.h"
#include "base/json.h"
#include "commands.h"
#include "io/file.h"
#include "io/gguf.h"
#include "run/gguf_model.h"
#include "run/run_dir.h"
#include "tokenize/bpe.h"

namespace atto::cli {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string read_stdin() { return files::read_stream(stdin, files::kStdinCap, "stdin"); }

std::vector<int32_t> parse_ids(std::string_view line, int64_t n) {
  std::vector<int32_t> ids;
  std::istringstream in{std::string(line)};
  std::string w;
  while (in >> w) {
    try {
      size_t used = 0;
      const long long v = std::stoll(w, &used);
      if (used != w.size() || v < INT32_MIN || v > INT32_MAX) throw std::invalid_argument(w);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      throw Error(fmt::format("stdin line {}: '{}' is not a token id", n, w));
    }
  }
  return ids;
}

struct TokenizeFlags {
  std::string tokenizer, model;
  bool decode = false, as_json = false, bench = false;
  int repeat = 3;
};

int run_tokenize(const TokenizeFlags& f) {
  const std::shared_ptr<const GptTokenizer> tok = load_gpt_tokenizer_flag(f.tokenizer, f.model);
  const GptTokenizer& c = *tok;
  const std::string in = read_stdin();
  if (f.bench) {
    if (f.repeat < 1) throw UsageError("--repeat must be at least 1");
    double best = 1e300;
    size_t tokens = 0;
    for (int r = 0; r <= f.repeat; ++r) {  // the first run warms up
      const auto t0 = Clock::now();
      tokens = c.encode(in).size();
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (r > 0) best = std::min(best, s);
    }
    fmt::print("{}\n", json{{"mb_per_s", static_cast<double>(in.size()) / 1e6 / best},
                            {"seconds", best},
                            {"bytes", in.size()},
                            {"tokens", tokens}}
                           .dump());
    return 0;
  }
  if (f.as_json && !f.decode) {
    const std::vector<int32_t> ids = c.encode(in);
    fmt::print("{}\n", json{{"ids", ids}, {"tokens", ids.size()}, {"bytes", in.size()}}.dump());
    return 0;
  }
  if (f.as_json) {
    const json j = atto::json_util::parse(in, "stdin");
    ATTO_CHECK(j.is_object() && j.contains("ids") && j["ids"].is_array(), "stdin: expected {{\"ids\": [...]}}");
    std::vector<int32_t> ids;
    for (const auto& v : j["ids"]) {
      ATTO_CHECK(v.is_number_integer(), "stdin: \"ids\" holds {}, not an integer", atto::json_util::excerpt(v));
      ids.push_back(v.get<int32_t>());
    }
    const std::string text = c.decode(ids);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  std::istringstream lines(in);
  std::string line;
  for (int64_t n = 1; std::getline(lines, line); ++n) {
    if (f.decode) {
      fmt::print("{}\n", c.decode(parse_ids(line, n)));
    } else {
      const std::vector<int32_t> ids = c.encode(line);
      fmt::print("{}\n", fmt::join(ids, " "));
    }
  }
  return 0;
}

struct TokenizerTrainFlags {
  std::vector<std::string> inputs;
  std::string out;
  BpeTrainOptions opt;
};

int run_tokenizer_train(const TokenizerTrainFlags& f) {
  std::vector<std::string> texts;
  size_t bytes = 0;
  for (const std::string& p : f.inputs) {
    texts.push_back(io::read_file(p));
    bytes += texts.back().size();
  }
  const std::vector<std::string_view> views(texts.begin(), texts.end());
  const auto t0 = Clock::now();
  const BpeTokenizer t = BpeTokenizer::train(views, f.opt);
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  io::write_file_atomic(f.out, t.to_json().dump() + "\n");
  fmt::print(
      "atto tokenizer train: {} merges, vocabulary {} (256 bytes, {} merges, <|endoftext|>) from {:.1f} MB "
      "in {:.2f} s -> {}\n",
      t.merge_count(), t.vocab_size(), t.merge_count(), static_cast<double>(bytes) / 1e6, s, f.out);
  return 0;
}

}  // namespace

std::shared_ptr<const GptTokenizer> load_gpt_tokenizer_flag(const std::string& tokenizer, const std::string& model) {
  if (tokenizer.empty() == model.empty()) throw UsageError("give one of --tokenizer FILE or --model RUN");
  // A GGUF file: the tokenizer its metadata describes (the matrices stay quantized; no floats).
  if (!model.empty() && io::is_gguf_file(model)) return gguf_tokenizer(model);
  const std::string path = tokenizer.empty() ? (std::filesystem::path(model) / "tokenizer.json").string() : tokenizer;
  return load_gpt_tokenizer(io::read_json(path), path, std::filesystem::path(path).parent_path().string());
}

Command add_tokenize(CLI::App& root) {
  CLI::App* app = root.add_subcommand("tokenize", "Text to token ids (one line of ids per line, or --json), or back");
  auto f = std::make_shared<TokenizeFlags>();
  app->add_option("--tokenizer", f->tokenizer, "A tokenizer.json (byte-level BPE, or a GPT's characters)");
  app->add_option("--model", f->model, "A run directory (its tokenizer.json) or a GGUF file (its vocabulary)");
  app->add_flag("--decode", f->decode,
                "Ids to text: each line of ids to a line of text (--json: {\"ids\": [...]} to the text)");
  app->add_flag("--json", f->as_json,
                "All of stdin as one text -> {\"ids\", \"tokens\", \"bytes\"} (with --decode: the reverse)");
  app->add_flag("--bench", f->bench, "Time encoding all of stdin: {\"mb_per_s\", \"seconds\", \"bytes\", \"tokens\"}");
  app->add_option("--repeat", f->repeat, "--bench: timed runs (the best is reported)")->capture_default_str();
  return {app, [f] { return run_tokenize(*f); }};
}

Command add_tokenizer(CLI::App& root) {
  CLI::App* app = root.add_subcommand("tokenizer", "Make a byte-level BPE tokenizer.json");
  app->require_subcommand(1);
  auto tf = std::make_shared<TokenizerTrainFlags>();
  CLI::App* train =
      app->add_subcommand("train", "Learn byte-level BPE merges (GPT-2's pre-tokenisation) on text files");
  train->add_option("--input", tf->inputs, "Text files")->required();
  train->add_option("--vocab-size", tf->opt.vocab_size, "Tokens: 256 bytes + merges + <|endoftext|>")
      ->capture_default_str();
  train->add_option("--min-frequency", tf->opt.min_frequency, "Pairs seen fewer times are not merged")
      ->capture_default_str();
  train->add_option("--out", tf->out, "tokenizer.json to write")->required();
  auto gf = std::make_shared<std::array<std::string, 3>>();
  CLI::App* gpt2 = app->add_subcommand("import-gpt2", "GPT-2's tokenizer from its encoder.json and vocab.bpe");
  gpt2->add_option("--encoder", (*gf)[0], "encoder.json")->required();
  gpt2->add_option("--merges", (*gf)[1], "vocab.bpe")->required();
  gpt2->add_option("--out", (*gf)[2], "tokenizer.json to write")->required();
  return {app, [app, train, tf, gf] {
            if (app->got_subcommand(train)) return run_tokenizer_train(*tf);
            const BpeTokenizer t = BpeTokenizer::import_gpt2((*gf)[0], (*gf)[1]);
            io::write_file_atomic((*gf)[2], t.to_json().dump() + "\n");
            fmt::print("atto tokenizer import-gpt2: vocabulary {} ({} merges) -> {}\n", t.vocab_size(), t.merge_count(),
                       (*gf)[2]);
            return 0;
          }};
}

}  // namespace atto::cli
