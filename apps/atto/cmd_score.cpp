// atto score: per-token log-probabilities of texts under a trained GPT.
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "atto/atto.hpp"
#include "base/error.h"
#include "base/json.h"
#include "commands.h"
#include "data/text_file.h"

namespace atto::cli {

namespace {

struct ScoreFlags {
  std::string model, file;
  std::vector<std::string> texts;
  int threads = 0;
  bool json = false;
};

// The texts: those on the command line, then the non-empty lines of --file.
std::vector<std::string> gather_texts(const ScoreFlags& f) {
  std::vector<std::string> texts = f.texts;
  if (!f.file.empty()) {
    const TextFile file = read_text_file(f.file);
    for (const Line& line : split_lines(file.text))
      if (!line.text.empty()) texts.emplace_back(line.text);
  }
  if (texts.empty()) throw UsageError("nothing to score: give texts after the flags, or --file FILE (one per line)");
  return texts;
}

// "'a'", "' '", "'\\n'", "<eos>": quoted so that spaces show.
std::string shown_token(const Model& m, int32_t id) {
  return m.is_special(id) ? m.token_text(id) : fmt::format("'{}'", m.token_text(id));
}

void print_table(const Model& m, const std::vector<std::string>& texts, const std::vector<Scores>& results) {
  double total = 0.0;
  int64_t count = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const Scores& r = results[i];
    fmt::print("{}\n  {:<8} {:>9} {:>9}\n", texts[i], "token", "log p", "p");
    for (size_t t = 0; t < r.tokens.size(); ++t)
      fmt::print("  {:<8} {:>9.4f} {:>9.4f}\n", shown_token(m, r.tokens[t]), r.logprobs[t], std::exp(r.logprobs[t]));
    fmt::print("  total -log p {:.4f} nats over {} tokens, mean {:.4f} nats/token\n\n", r.total_nll, r.tokens.size(),
               r.mean_nll);
    total += r.total_nll;
    count += static_cast<int64_t>(r.tokens.size());
  }
  if (texts.size() > 1)
    fmt::print("all {} texts: total -log p {:.4f} nats over {} tokens, mean {:.4f} nats/token\n", texts.size(), total,
               count, count > 0 ? total / count : 0.0);
}

void print_json(const Model& m, bool lines, const std::vector<std::string>& texts, const std::vector<Scores>& results) {
  nlohmann::json items = nlohmann::json::array();
  double total = 0.0;
  int64_t count = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const Scores& r = results[i];
    nlohmann::json tokens = nlohmann::json::array();
    for (size_t t = 0; t < r.tokens.size(); ++t)
      tokens.push_back({{"id", r.tokens[t]}, {"token", m.token_text(r.tokens[t])}, {"logprob", r.logprobs[t]}});
    items.push_back({{"text", texts[i]},
                     {"tokens", tokens},
                     {"count", r.tokens.size()},
                     {"total_nll", r.total_nll},
                     {"mean_nll", r.mean_nll}});
    total += r.total_nll;
    count += static_cast<int64_t>(r.tokens.size());
  }
  fmt::print("{}\n", json_util::dump(nlohmann::json{{"mode", lines ? "lines" : "stream"},
                                                    {"texts", items},
                                                    {"count", count},
                                                    {"total_nll", total},
                                                    {"mean_nll", count > 0 ? total / count : 0.0}}));
}

int run_score(const ScoreFlags& f) {
  const std::vector<std::string> texts = gather_texts(f);
  Model m(f.model);  // the library's public API (include/atto/atto.hpp)
  m.set_threads(f.threads);
  if (m.info().task != ATTO_TASK_GPT)
    fail("{} holds an encoder-decoder model: atto score scores GPT language models (use atto eval)", f.model);
  std::vector<Scores> results;
  for (const std::string& t : texts) results.push_back(m.score(t));
  if (f.json)
    print_json(m, m.info().lines_mode, texts, results);
  else
    print_table(m, texts, results);
  return 0;
}

}  // namespace

Command add_score(CLI::App& root) {
  CLI::App* app =
      root.add_subcommand("score", "Per-token log-probabilities (natural log) of texts under a trained model");
  auto f = std::make_shared<ScoreFlags>();
  app->add_option("--model", f->model, "Run directory of a trained model")->required();
  app->add_option("texts", f->texts, "Texts to score (lines mode: each framed as <eos> text <eos>, as in training)");
  app->add_option("--file", f->file, "Score each non-empty line of this file as one text");
  add_threads_flag(app, f->threads);
  app->add_flag("--json", f->json, "Print one JSON object (per-token log-probabilities, totals)");
  return {app, [f] { return run_score(*f); }};
}

}  // namespace atto::cli
