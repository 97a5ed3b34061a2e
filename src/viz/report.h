// atto/viz/report.h: "atto inspect": what a trained GPT does with one input (seq2seq runs: see
// viz/seq2seq_report.h), as a self-contained HTML report with one SVG file per figure.
//
//   viz::InspectOptions opt;
//   opt.text = "emma";
//   viz::Report r = viz::inspect_run("runs/names", opt);   // load, run, draw
//   viz::write_report(r, "report");                        // report/index.html + report/*.svg
//
// Or in pieces, for a model in memory (tests, notebooks):
//   viz::ModelView v = viz::collect(model, tokenizer, "emma");   // one traced forward pass
//   viz::Report r = viz::build_report(v, /*curves=*/nullptr, {.title = "my model"}, opt);
//
// Conventions
// - Input: in lines mode (the tokenizer has "<eos>") the model sees [<eos>] + text, as in
//   training; in stream mode just the text. Text longer than the block size keeps its last
//   block_size tokens (ModelView::dropped says how many went, and the report says so).
// - Caps, so that figures stay legible (each is stated in the figure's subtitle):
//   attention maps show the last max_attention_tokens (64) positions, queries and keys (rows
//   then cover only the shown keys, so they may sum to less than 1); the positional table is
//   sampled at <= 128 evenly spaced positions x <= 128 dimensions (exact values, not averages);
//   the next-token figure shows the top_n (20) tokens by raw probability.
// - The numbers behind the attention, position, embedding, residual and next-token figures are
//   embedded in index.html as JSON (<script type="application/json" id="atto-data">), exactly
//   the float values drawn (shortest round-trip decimal form). See docs/inspect.md.
// - Attention map SVGs carry class="atto-attn" data-layer="l" data-head="h": one per pair.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/gpt.h"
#include "tokenize/char_tokenizer.h"
#include "viz/figures.h"

namespace atto::viz {

struct InspectOptions {
  std::string text;                   // the input text (GPT runs: --text)
  std::string src;                    // seq2seq runs (--src): the source sentence
  std::optional<std::string> tgt;     // seq2seq runs (--tgt): force this target; none = greedy translation
  float temperature = 1.0f;           // next-token figure: the sampler steps to show
  int top_k = 0;                      // 0 = off
  float top_p = 1.0f;                 // 1 = off
  int64_t max_attention_tokens = 64;  // attention maps: the last N positions
  int64_t max_pe_positions = 128;     // positional table: sampled rows
  int64_t max_pe_dims = 128;          // positional table: sampled columns
  int64_t top_n = 20;                 // next-token figure: bars

  void validate() const;  // atto::UsageError naming the flag
};

// Everything the figures show, gathered from one traced forward pass: plain data only.
struct ModelView {
  GPTConfig config;
  std::vector<int32_t> ids;                    // [T] the model input
  std::vector<std::string> tokens;             // [T] display labels ("<eos>", "\n", "␣")
  int64_t dropped = 0;                         // tokens cut from the front of the text
  std::vector<std::vector<Matrix>> attention;  // [NL][NH] -> [T, T] weights, masked entries 0
  Matrix positions;                            // [block_size, C] wpe or the sinusoidal table
  Matrix wte;                                  // [V, C] token embeddings
  std::vector<std::string> vocab;              // [V] display labels
  struct Residual {
    std::vector<double> stream, attn, ffn;  // [T] L2 norms: block input, attention and FFN updates
  };
  std::vector<Residual> residual;  // [NL]
  std::vector<float> last_logits;  // [V] logits at the last position
};

// One token for display: the tokenizer's id_to_string, with a space shown as "␣" (U+2423).
std::string token_label(const GptTokenizer& tok, int32_t id);

// The model input for `text` (see Conventions); dropped = tokens cut from the front.
std::vector<int32_t> encode_input(const GptTokenizer& tok, const std::string& text, int64_t block_size,
                                  int64_t* dropped);

// Runs the model (eval mode, no gradients) on the input for `text` and gathers the view.
ModelView collect(GPT& model, const GptTokenizer& tok, const std::string& text);

// metrics.jsonl: lines with "step" and "train_loss" / "val_loss" / "lr". Lines that are not
// JSON objects are skipped with a note naming the line.
struct TrainingCurves {
  std::vector<double> train_step, train_loss, val_step, val_loss, lr_step, lr;
  std::vector<double> val_bleu_step, val_bleu;  // seq2seq runs that evaluate BLEU
};
TrainingCurves read_metrics(const std::string& path, std::vector<std::string>& notes);

struct Figure {
  std::string id;       // html anchor and file stem, e.g. "attn_L0_H1"
  std::string section;  // "next", "attention", "residual", "embeddings", "positions", "training"
  std::string title;
  std::string caption;  // one or two sentences: what it shows, how to read it
  std::string svg;      // the standalone SVG document (written to <id>.svg)
};

struct ReportInfo {
  std::string title = "atto inspect";
  std::string source;  // the run directory (shown in the header)
};

struct Report {
  std::vector<Figure> figures;
  nlohmann::json data;             // the numbers behind the figures (atto-data)
  std::vector<std::string> notes;  // truncation, caps, skipped metrics lines
  std::string html;                // index.html
};

// curves: nullptr (or empty) leaves the training figures out, with a note.
Report build_report(const ModelView& v, const TrainingCurves* curves, const ReportInfo& info,
                    const InspectOptions& opt);
// load_run(run_dir) + collect + read_metrics + build_report; for a seq2seq run (run.json task
// "seq2seq") inspect_seq2seq_run (viz/seq2seq_report.h). atto::UsageError for the wrong input
// flag (--src on a GPT run, --text on a seq2seq run).
Report inspect_run(const std::string& run_dir, const InspectOptions& opt);
Report inspect_gpt_run(const std::string& run_dir, const InspectOptions& opt);
// Writes out_dir/index.html and out_dir/<figure id>.svg (atomically, creating out_dir).
// Refuses a run directory (atto::Error), so a report never lands among checkpoints.
void write_report(const Report& r, const std::string& out_dir);

// The HTML page for the figures (used by build_report).
std::string render_html(const std::vector<Figure>& figures, const nlohmann::json& data,
                        const std::vector<std::string>& notes, const ReportInfo& info);

// The JSON embedded in the page, from the page text (for tests); atto::Error if absent.
nlohmann::json extract_data(const std::string& html);

}  // namespace atto::viz
