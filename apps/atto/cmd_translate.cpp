// atto translate: translate source lines with a trained encoder-decoder (greedy or beam search).
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/error.h"
#include "commands.h"
#include "data/text_file.h"
#include "generate/seq2seq_decode.h"
#include "kernels/kernels.h"
#include "run/run_dir.h"

namespace atto::cli {

namespace {

struct TranslateFlags {
  std::string model, input;
  gen::DecodeOptions decode;
  int64_t batch_size = 32;
  int threads = 0;
  bool json = false, attention = false;
};

// Lines of --input, or of standard input without it. The file must be a regular file (no device,
// no FIFO: read_user_file's checks); a pipe comes through standard input.
std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::istringstream in(path.empty() ? files::read_stream(stdin, files::kStdinCap, "stdin")
                                     : read_user_file(path, "--input"));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

nlohmann::json hypothesis_json(const gen::Hypothesis& h, const Tokenizer& tok, bool attention) {
  nlohmann::json toks = nlohmann::json::array();
  for (int32_t t : h.tokens) toks.push_back(tok.id_to_string(t));
  nlohmann::json j = {{"text", tok.decode(h.tokens)}, {"tokens", toks},         {"score", h.score},
                      {"logprob", h.logprob},         {"finished", h.finished}, {"token_logprobs", h.token_logprobs}};
  if (attention) j["cross_attention"] = h.cross_attention;
  return j;
}

int run_translate(TranslateFlags f) {
  kernels::set_num_threads(f.threads);
  if (f.attention && !f.json) throw UsageError("--attention needs --json (the weights are written in the JSON)");
  f.decode.keep_attention = f.attention;
  f.decode.validate();
  ATTO_CHECK(f.batch_size >= 1, "--batch-size must be at least 1, got {}", f.batch_size);
  LoadedSeq2Seq lm = load_seq2seq_run(f.model);
  const std::vector<std::string> lines = read_lines(f.input);
  const int64_t max_len = lm.config.seq2seq.max_len;
  std::vector<std::vector<int32_t>> sources;
  for (size_t i = 0; i < lines.size(); ++i) {
    sources.push_back(lm.src_tok->encode(lines[i]));
    if (static_cast<int64_t>(sources.back().size()) > max_len)  // translate_chunks keeps the first max_len
      fmt::print(stderr, "atto: warning: line {} has {} tokens; only the first {} (the model's --max-len) are used\n",
                 i + 1, sources.back().size(), max_len);
  }
  // Printed batch by batch as they are decoded; an empty line translates to an empty line.
  gen::translate_chunks(
      *lm.model, sources, f.decode, f.batch_size,
      [&](size_t first, std::vector<std::vector<gen::Hypothesis>>& results) {
        for (size_t k = 0; k < results.size(); ++k) {
          const size_t i = first + k;
          const auto& hyps = results[k];
          if (f.json) {
            nlohmann::json j = {{"index", i}, {"source", lines[i]}, {"translations", nlohmann::json::array()}};
            for (const auto& h : hyps) j["translations"].push_back(hypothesis_json(h, *lm.tgt_tok, f.attention));
            fmt::print("{}\n", j.dump());
          } else if (f.decode.n_best > 1) {
            for (const auto& h : hyps) fmt::print("{} ||| {} ||| {:.4f}\n", i, lm.tgt_tok->decode(h.tokens), h.score);
          } else {
            fmt::print("{}\n", hyps.empty() ? std::string() : lm.tgt_tok->decode(hyps[0].tokens));
          }
        }
        std::fflush(stdout);
      });
  return 0;
}

}  // namespace

void add_decode_flags(CLI::App* app, gen::DecodeOptions& d) {
  app->add_option("--beam", d.beam, "Beam size (1 = greedy)")->capture_default_str();
  app->add_option("--length-penalty", d.length_penalty, "GNMT length penalty alpha (0 = none)")->capture_default_str();
  app->add_option("--max-len-a", d.max_len_a, "Target length limit: a * source length + b")->capture_default_str();
  app->add_option("--max-len-b", d.max_len_b, "Target length limit: a * source length + b")->capture_default_str();
}

Command add_translate(CLI::App& root) {
  CLI::App* app = root.add_subcommand("translate", "Translate lines (stdin or --input) with a seq2seq model");
  auto f = std::make_shared<TranslateFlags>();
  f->decode.beam = 5;
  app->add_option("--model", f->model, "Run directory of a trained seq2seq model")->required();
  app->add_option("--input", f->input, "Source file, one sentence per line (default: standard input)");
  add_decode_flags(app, f->decode);
  app->add_option("--n-best", f->decode.n_best, "Hypotheses per line (text output: 'i ||| text ||| score')")
      ->capture_default_str();
  app->add_option("--batch-size", f->batch_size, "Sentences decoded together")->capture_default_str();
  add_threads_flag(app, f->threads);
  app->add_flag("--json", f->json, "One JSON object per line: tokens, scores");
  app->add_flag("--attention", f->attention, "With --json: include the cross-attention weights");
  return {app, [f] { return run_translate(*f); }};
}

}  // namespace atto::cli
