// atto/viz/seq2seq_report.h: "atto inspect" for an encoder-decoder run: the translation of one
// source sentence, with encoder self-attention, decoder self-attention and cross-attention maps.
//
//   viz::InspectOptions opt;
//   opt.src = "a dog runs";                   // opt.tgt = "ein hund läuft" forces a target
//   viz::Report r = viz::inspect_run("runs/ende", opt);   // dispatches on run.json's task
//   viz::write_report(r, "report");
//
// Or for a model in memory:
//   viz::Seq2SeqView v = viz::collect_seq2seq(model, src_tok, tgt_tok, "a dog runs", std::nullopt);
//   viz::Report r = viz::build_seq2seq_report(v, nullptr, {.title = "my model"}, opt);
//
// Conventions
// - The source is tokenized without specials (as atto translate does) and keeps its first
//   max_len tokens. The target is the greedy translation (gen::translate_batch, beam 1), or
//   opt.tgt tokenized; the decoder input is [<bos>] + target (at most max_len positions), so
//   the next-token figure shows the distribution after the last target token (EOS is likely
//   there for a greedy translation that finished).
// - One traced encode + decode (eval mode, no gradients, no padding): encoder maps [S, S] (no
//   mask), decoder maps [T, T] (causal triangle masked, stored as 0), cross maps [T, S] (target
//   rows x source columns). Every map caps rows and columns to the last max_attention_tokens.
// - Page data (atto-data): task "seq2seq"; attention.kinds = ["encoder", "cross", "decoder"], and
//   attention.<kind> = {layers, heads, rows, cols, row_start, col_start, row_tokens, col_tokens,
//   weights [layers][heads][rows][cols]}. Attention SVGs carry class "atto-attn" with
//   data-kind (encoder / cross / decoder), data-layer, data-head; figure ids enc_attn_L{l}_H{h},
//   cross_attn_L{l}_H{h}, dec_attn_L{l}_H{h}. See docs/inspect.md.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "models/seq2seq.h"
#include "tokenize/tokenizer.h"
#include "viz/report.h"

namespace atto::viz {

struct Seq2SeqView {
  Seq2SeqConfig config;
  std::string src_text;
  std::vector<int32_t> src_ids;                      // [S] encoder input (no specials)
  std::vector<std::string> src_tokens;               // [S] display labels
  std::vector<int32_t> tgt_ids;                      // [T] decoder input: <bos> + target
  std::vector<std::string> tgt_tokens;               // [T]
  std::string translation;                           // the target as text
  bool forced = false;                               // the target came from opt.tgt
  bool finished = true;                              // greedy decoding ended with EOS (else cut at the limit)
  int64_t src_dropped = 0, tgt_dropped = 0;          // tokens cut from the end to fit max_len
  std::vector<std::vector<Matrix>> enc_attention;    // [NLe][NH] -> [S, S]
  std::vector<std::vector<Matrix>> dec_attention;    // [NLd][NH] -> [T, T], masked entries 0
  std::vector<std::vector<Matrix>> cross_attention;  // [NLd][NH] -> [T, S]
  Matrix positions;                                  // [max_len, C] the encoder's table (sinusoidal or learned)
  Matrix src_embed, tgt_embed;                       // [V_src, C], [V_tgt, C]
  std::vector<std::string> src_vocab, tgt_vocab;
  struct Residual {
    std::vector<double> stream, attn, cross, ffn;  // [positions] L2 norms (cross: decoder layers only)
  };
  std::vector<Residual> enc_residual, dec_residual;
  std::vector<float> last_logits;  // [V_tgt] at the last decoder position
};

// A token for display: id_to_string with a space shown as "␣".
std::string token_label(const Tokenizer& tok, int32_t id);

// Translates (or forces tgt) and runs one traced encode/decode; UsageError for an empty source.
Seq2SeqView collect_seq2seq(Seq2Seq& model, const Tokenizer& src_tok, const Tokenizer& tgt_tok, const std::string& src,
                            const std::optional<std::string>& tgt);

Report build_seq2seq_report(const Seq2SeqView& v, const TrainingCurves* curves, const ReportInfo& info,
                            const InspectOptions& opt);

// load_seq2seq_run + collect_seq2seq + read_metrics + build_seq2seq_report (opt.src, opt.tgt).
Report inspect_seq2seq_run(const std::string& run_dir, const InspectOptions& opt);

}  // namespace atto::viz
