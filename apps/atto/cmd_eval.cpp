// atto eval: loss, perplexity, bits per character and per byte of a trained GPT over a text file; BLEU,
// chrF and reference loss of a seq2seq model; BLEU and chrF of given translations (--hyp).
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "commands.h"
#include "data/dataset.h"
#include "data/parallel.h"
#include "data/seq2seq_batches.h"
#include "data/text_file.h"
#include "generate/sampler.h"
#include "kernels/kernels.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "run/run_dir.h"
#include "train/trainer.h"

namespace atto::cli {

namespace {

struct EvalFlags {
  std::string model, data, src, hyp;
  std::vector<std::string> refs;  // --ref, once (seq2seq) or once per reference stream (--hyp)
  int64_t batch_size = 32;
  int threads = 0;
  bool json = false;
  gen::DecodeOptions decode;
};

// Mean loss (nats/token) of the references under teacher forcing, over the pairs within the
// model's max_len; sets count to the reference tokens scored. Non-finite logits are an error.
double reference_loss(LoadedSeq2Seq& lm, const ParallelCorpus& corpus, int64_t& count, LengthFilterReport& lf) {
  const int64_t max_len = lm.config.seq2seq.max_len;
  std::vector<EncodedPair> pairs = encode_pairs(corpus, *lm.src_tok, *lm.tgt_tok);
  lf = filter_by_length(pairs, max_len, max_len - 1);
  double total = 0.0;
  count = 0;
  NoGradGuard ng;
  for (const auto& idx : bucket_batches(pairs, {.max_tokens = 4096})) {
    const Seq2SeqBatch b = make_batch(pairs, idx);
    Tensor memory = lm.model->encode(b.src, b.B, b.S, b.src_mask);
    Tensor logits = lm.model->decode(b.tgt_in, b.B, b.T, memory, b.src_mask, b.tgt_mask).contiguous();
    gen::check_finite_logits(std::span<const float>(logits.data(), logits.numel()), "evaluating");
    total += static_cast<double>(cross_entropy(logits, b.tgt_out).item()) * b.num_targets();
    count += b.num_targets();
  }
  return count > 0 ? total / count : 0.0;
}

// seq2seq: translate --src, score against --ref with BLEU and chrF (sacreBLEU defaults), and the
// loss of the reference translations.
int run_eval_seq2seq(const EvalFlags& f) {
  if (f.refs.size() != 1) throw UsageError("seq2seq evaluation takes one --ref file (aligned with --src)");
  LoadedSeq2Seq lm = load_seq2seq_run(f.model);
  const ParallelCorpus corpus = read_parallel(f.src, f.refs[0]);
  ATTO_CHECK(corpus.skipped_empty == 0 || !corpus.pairs.empty(), "{}: no sentence pairs", corpus.summary());
  std::vector<std::vector<int32_t>> sources;
  std::vector<std::string> refs, hyps;
  for (const auto& p : corpus.pairs) {
    sources.push_back(lm.src_tok->encode(p.src));
    refs.push_back(p.tgt);
  }
  for (const auto& h : gen::translate_all(*lm.model, sources, f.decode, f.batch_size))
    hyps.push_back(h.empty() ? std::string() : lm.tgt_tok->decode(h[0].tokens));
  int64_t count = 0;
  LengthFilterReport lf;
  const double loss = reference_loss(lm, corpus, count, lf);
  const metrics::BleuResult bleu = metrics::corpus_bleu(hyps, {refs});
  const metrics::ChrfResult chrf = metrics::corpus_chrf(hyps, {refs});
  if (f.json) {
    fmt::print("{}\n", nlohmann::json{{"src", f.src},
                                      {"ref", f.refs[0]},
                                      {"sentences", hyps.size()},
                                      {"bleu", bleu.score},
                                      {"bleu_signature", bleu.signature()},
                                      {"chrf", chrf.score},
                                      {"chrf_signature", chrf.signature()},
                                      {"loss", loss},
                                      {"beam", f.decode.beam}}
                           .dump());
  } else {
    fmt::print("{} sentences, beam {}\n{}\n{}\nloss {:.4f} nats/token over {} reference tokens{}\n", hyps.size(),
               f.decode.beam, bleu.format(2, true), chrf.format(2, true), loss, count,
               lf.dropped > 0 ? " (" + lf.summary() + ")" : "");
  }
  return 0;
}

// The lines of a --hyp or --ref file, as the sacrebleu command reads them: every line counts,
// empty ones included; a final newline ends the last line; "\r\n" is a line break.
std::vector<std::string> read_segments(const std::string& path, const char* role) {
  const std::string text = read_user_file(path, role);  // a regular file: no device, no FIFO
  std::vector<std::string> out;
  for (const Line& line : split_lines(text)) {
    std::string_view t = line.text;
    if (t.ends_with('\r')) t.remove_suffix(1);
    out.emplace_back(t);
  }
  return out;
}

// --hyp FILE --ref FILE [--ref FILE ...]: BLEU and chrF of any system's output against one or
// more reference files, with their signatures, as `sacrebleu REF... -i HYP -m bleu chrf` prints.
int run_eval_hyp(const EvalFlags& f) {
  if (!f.model.empty() || !f.data.empty() || !f.src.empty())
    throw UsageError("--hyp scores given translations against --ref: it takes no --model, --data or --src");
  if (f.refs.empty()) throw UsageError("--hyp needs --ref FILE (repeat --ref for several references)");
  const std::vector<std::string> hyps = read_segments(f.hyp, "--hyp");
  ATTO_CHECK(!hyps.empty(), "--hyp file '{}' has no lines: nothing to score", f.hyp);
  std::vector<std::vector<std::string>> refs;
  for (const std::string& r : f.refs) {
    refs.push_back(read_segments(r, "--ref"));
    ATTO_CHECK(refs.back().size() == hyps.size(),
               "--hyp file '{}' has {} lines but --ref file '{}' has {}: line i "
               "of each must be the same sentence",
               f.hyp, hyps.size(), r, refs.back().size());
  }
  const metrics::BleuResult bleu = metrics::corpus_bleu(hyps, refs);
  const metrics::ChrfResult chrf = metrics::corpus_chrf(hyps, refs);
  if (f.json) {
    fmt::print("{}\n", nlohmann::json{{"hyp", f.hyp},
                                      {"ref", f.refs},
                                      {"sentences", hyps.size()},
                                      {"bleu", bleu.score},
                                      {"bleu_signature", bleu.signature()},
                                      {"chrf", chrf.score},
                                      {"chrf_signature", chrf.signature()}}
                           .dump());
  } else {
    fmt::print("{} sentences, {} reference file(s)\n{}\n{}\n", hyps.size(), refs.size(), bleu.format(2, true),
               chrf.format(2, true));
  }
  return 0;
}

int run_eval(const EvalFlags& f) {
  kernels::set_num_threads(f.threads);
  if (!f.hyp.empty()) return run_eval_hyp(f);
  if (f.model.empty()) throw UsageError("--model is required (or --hyp FILE --ref FILE to score given translations)");
  if (!f.src.empty() || !f.refs.empty()) {
    if (f.src.empty() || f.refs.empty()) throw UsageError("seq2seq evaluation needs both --src and --ref");
    if (!f.data.empty()) throw UsageError("give --data (GPT) or --src/--ref (seq2seq), not both");
    return run_eval_seq2seq(f);
  }
  if (f.data.empty()) throw UsageError("give --data FILE (GPT) or --src FILE --ref FILE (seq2seq)");
  LoadedModel lm = load_run(f.model, WeightStorage::Quantized);
  const TextFile file = read_text_file(f.data);
  const DataMode mode = lm.config.data.mode;
  // The file is scored whole, in the model's data mode: every line (lines) or every token
  // (stream), with the model's vocabulary; unknown characters are an error naming them.
  TextFile whole = file;
  auto data = make_dataset(whole, *lm.tokenizer, mode, {.split_seed = lm.config.data.split_seed});
  const int64_t T = lm.config.gpt.block_size;
  data->check_block_size(T);
  double total = 0.0;
  int64_t count = 0, bytes = 0;
  const std::vector<int32_t> byte_len = token_byte_lengths(*lm.tokenizer);
  for (Split split : {Split::Train, Split::Val}) {
    if (data->size(split) == 0) continue;
    const double loss = evaluate_loss(*lm.model, *data, split, f.batch_size, T);
    int64_t n = 0;
    for (int64_t i = 0; i < data->num_eval_batches(split, f.batch_size, T); ++i) {
      const Batch b = data->eval_batch(split, i, f.batch_size, T);
      n += b.num_targets();
      for (int32_t y : b.y)
        if (y != kIgnoreIndex) bytes += byte_len[static_cast<size_t>(y)];
    }
    total += loss * n;
    count += n;
  }
  const double loss = total / count;
  // A non-finite loss means non-finite logits (cross-entropy of finite logits is finite).
  if (!std::isfinite(loss)) gen::fail_non_finite_logits("evaluating");
  const double ppl = std::exp(loss), bits = loss / std::log(2.0);
  const double bpb = total / (static_cast<double>(std::max<int64_t>(bytes, 1)) * std::log(2.0));
  const bool chars = std::string_view(lm.tokenizer->kind()) == "char";  // a token is a character
  if (f.json) {
    nlohmann::json j = {{"file", f.data},    {"mode", to_string(mode)}, {"tokenizer", lm.tokenizer->kind()},
                        {"tokens", count},   {"bytes", bytes},          {"loss", loss},
                        {"perplexity", ppl}, {"bits_per_byte", bpb}};
    if (chars) j["bits_per_char"] = bits;
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print(
        "{}: {} targets ({} mode, {} tokens)\nloss        {:.4f} nats/token\nperplexity  {:.3f}\n{}bits/byte   "
        "{:.4f}\n",
        f.data, count, to_string(mode), lm.tokenizer->kind(), loss, ppl,
        chars ? fmt::format("bits/char   {:.4f}\n", bits) : "", bpb);
  }
  return 0;
}

}  // namespace

Command add_eval(CLI::App& root) {
  CLI::App* app = root.add_subcommand(
      "eval",
      "GPT: loss, perplexity, bits per character over a text file; seq2seq: BLEU, chrF and loss; --hyp/--ref: "
      "BLEU and chrF of given translations");
  auto f = std::make_shared<EvalFlags>();
  app->add_option("--model", f->model, "Run directory of a trained model (not with --hyp)");
  app->add_option("--data", f->data, "GPT: text file to score, in the model's data mode");
  app->add_option("--src", f->src, "seq2seq: source sentences to translate");
  app->add_option("--ref", f->refs,
                  "seq2seq: reference translations (aligned with --src); with --hyp: a reference "
                  "file, repeat for several")
      ->allow_extra_args(false);
  app->add_option("--hyp", f->hyp,
                  "Score this file of translations (one per line) against --ref with BLEU and chrF, "
                  "no model needed");
  f->decode.beam = 5;
  add_decode_flags(app, f->decode);
  app->add_option("--batch-size", f->batch_size, "Sequences per batch")->capture_default_str();
  add_threads_flag(app, f->threads);
  app->add_flag("--json", f->json, "Print one JSON object");
  return {app, [f] { return run_eval(*f); }};
}

}  // namespace atto::cli
