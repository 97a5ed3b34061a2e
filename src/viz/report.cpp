// build_report: from a ModelView (plain data) to the figures, the embedded JSON and the page.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include <fmt/format.h>

#include "base/error.h"
#include "generate/sampler.h"
#include "run/run_config.h"
#include "run/run_dir.h"
#include "viz/pca.h"
#include "viz/report.h"
#include "viz/report_parts.h"
#include "viz/seq2seq_report.h"

namespace atto::viz {

namespace detail {

nlohmann::json jf(float f) {
  if (!std::isfinite(f)) return nullptr;
  return std::strtod(fmt::format("{}", f).c_str(), nullptr);
}
nlohmann::json jrow(const Matrix& m, int64_t r) {
  nlohmann::json a = nlohmann::json::array();
  for (int64_t c = 0; c < m.cols; ++c) a.push_back(jf(m.at(r, c)));
  return a;
}
nlohmann::json jmatrix(const Matrix& m) {
  nlohmann::json a = nlohmann::json::array();
  for (int64_t r = 0; r < m.rows; ++r) a.push_back(jrow(m, r));
  return a;
}
nlohmann::json jdoubles(const std::vector<double>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (double x : v) a.push_back(jf(static_cast<float>(x)));
  return a;
}

std::vector<int64_t> sample_indices(int64_t n, int64_t cap) {
  std::vector<int64_t> idx;
  if (n <= cap) {
    idx.resize(static_cast<size_t>(n));
    std::iota(idx.begin(), idx.end(), 0);
    return idx;
  }
  for (int64_t i = 0; i < cap; ++i)
    idx.push_back(static_cast<int64_t>(
        std::llround(static_cast<double>(i) * static_cast<double>(n - 1) / static_cast<double>(cap - 1))));
  return idx;
}

}  // namespace detail

namespace {

using namespace detail;

struct Builder {
  const ModelView& v;
  const InspectOptions& opt;
  Report& r;
  void add(std::string id, std::string section, std::string title, std::string caption, std::string svg) {
    r.figures.push_back({std::move(id), std::move(section), std::move(title), std::move(caption), std::move(svg)});
  }
};

// ---- attention ------------------------------------------------------------------------------

void attention_figures(Builder& b) {
  const ModelView& v = b.v;
  const int64_t T = static_cast<int64_t>(v.ids.size());
  const int64_t start = std::max<int64_t>(0, T - b.opt.max_attention_tokens), n = T - start;
  const std::vector<std::string> labels(v.tokens.begin() + start, v.tokens.end());
  const std::string sub =
      start > 0 ? fmt::format("last {} of {} positions ({}..{}); earlier keys not shown", n, T, start, T - 1) : "";
  if (start > 0)
    b.r.notes.push_back(
        fmt::format("attention maps show the last {} of the {} input positions (--max-attention-tokens)", n, T));
  nlohmann::json weights = nlohmann::json::array();
  for (size_t l = 0; l < v.attention.size(); ++l) {
    nlohmann::json layer = nlohmann::json::array();
    for (size_t h = 0; h < v.attention[l].size(); ++h) {
      Matrix w(n, n);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) w.at(i, j) = v.attention[l][h].at(start + i, start + j);
      Heatmap hm;
      hm.title = fmt::format("Layer {} \u00b7 head {}", l, h);
      hm.subtitle = sub;
      hm.row_labels = hm.col_labels = labels;
      hm.row_axis = "query";
      hm.col_axis = "key";
      hm.values = w;
      hm.masked = causal_mask(n, n);
      hm.vmin = 0, hm.vmax = 1;
      hm.row_offset = hm.col_offset = start;
      hm.target_size = 384;
      hm.id = fmt::format("attn_L{}_H{}", l, h);
      hm.root = {.css_class = "atto-attn",
                 .data = {{"layer", std::to_string(l)},
                          {"head", std::to_string(h)},
                          {"rows", std::to_string(n)},
                          {"cols", std::to_string(n)}},
                 .title = hm.title};
      layer.push_back(jmatrix(w));
      b.add(hm.id, "attention", hm.title, fmt::format("Layer {}, head {}.", l, h), heatmap_svg(hm));
    }
    weights.push_back(std::move(layer));
  }
  b.r.data["attention"] = {{"layers", v.attention.size()},
                           {"heads", v.attention.empty() ? 0 : v.attention[0].size()},
                           {"T", T},
                           {"start", start},
                           {"tokens", labels},
                           {"ids", std::vector<int32_t>(v.ids.begin() + start, v.ids.end())},
                           {"weights", std::move(weights)}};
}

// ---- residual stream ------------------------------------------------------------------------

void residual_figure(Builder& b) {
  const ModelView& v = b.v;
  Grid g;
  g.title = "Residual stream: L2 norm per position";
  g.subtitle = "per layer: the stream entering the block, and what attention and the FFN add to it";
  g.panel_width = 400, g.panel_height = 230;
  g.columns = 3;
  nlohmann::json j = nlohmann::json::array();
  for (size_t l = 0; l < v.residual.size(); ++l) {
    const ModelView::Residual& rs = v.residual[l];
    std::vector<double> x(rs.stream.size());
    std::iota(x.begin(), x.end(), 0.0);
    LinePlot p;
    p.title = fmt::format("Layer {}", l);
    p.x_label = "position";
    p.width = g.panel_width - 10, p.height = g.panel_height - 6;
    p.y_from_zero = true;
    const bool dots = x.size() <= 32;
    p.series = {
        {"stream", x, rs.stream, "", dots}, {"attn update", x, rs.attn, "", dots}, {"FFN update", x, rs.ffn, "", dots}};
    g.panels.push_back(line_plot_svg(p));
    j.push_back(
        {{"layer", l}, {"stream", jdoubles(rs.stream)}, {"attn", jdoubles(rs.attn)}, {"ffn", jdoubles(rs.ffn)}});
  }
  g.root = {.css_class = "atto-residual", .data = {}, .title = g.title};
  b.r.data["residual"] = std::move(j);
  b.add(
      "residual", "residual", g.title,
      "Each panel is one layer (block). Blue: the norm of the residual stream entering the block; orange and green: "
      "the norms of the updates that attention and the feed-forward network add. Updates much smaller than the stream "
      "change little; a position whose stream norm jumps is where a layer writes a lot.",
      grid_svg(g));
}

// ---- next token -----------------------------------------------------------------------------

// Probabilities of `ids` under logits (after the steps so far); removed = filtered out.
BarPanel stage(const std::string& name, const std::vector<float>& logits, const std::vector<int32_t>& ids) {
  const std::vector<double> p = gen::probabilities(logits);
  BarPanel panel{name, {}, {}};
  for (int32_t id : ids) {
    panel.values.push_back(p[static_cast<size_t>(id)]);
    panel.removed.push_back(std::isinf(logits[static_cast<size_t>(id)]) ? 1 : 0);
  }
  double shown = 0;
  for (double x : panel.values) shown += x;
  panel.name += fmt::format("  (the {} shown hold {:.1f}%)", ids.size(), 100.0 * shown);
  return panel;
}

}  // namespace

void detail::next_token_figure(Report& r, const InspectOptions& o, const std::vector<float>& last_logits,
                               const std::vector<std::string>& vocab, const std::string& after) {
  std::vector<float> logits = last_logits;
  gen::probabilities(logits);  // atto::Error on a NaN or +inf logit, before sorting by them
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t c) { return logits[a] > logits[c]; });
  order.resize(static_cast<size_t>(std::min<int64_t>(o.top_n, static_cast<int64_t>(order.size()))));
  BarChart ch;
  ch.title = fmt::format("Next token after \u201c{}\u201d", after);
  ch.subtitle =
      "the top tokens by raw probability; each panel below the first applies one more\n"
      "sampler step and renormalises (\u00d7 = filtered out)";
  for (int32_t id : order) ch.labels.push_back(vocab[static_cast<size_t>(id)]);
  ch.y_label = "probability";
  // Raw, then one panel per step that is on (a step that is off would repeat the panel above).
  ch.panels.push_back(stage("raw: softmax(logits)", logits, order));
  std::vector<std::string> off;
  if (o.temperature != 1.0f) {
    gen::Temperature{o.temperature}.apply(logits, {});
    ch.panels.push_back(stage(fmt::format("temperature {}", o.temperature), logits, order));
  } else {
    off.push_back("temperature 1");
  }
  if (o.top_k > 0) {
    gen::TopK{o.top_k}.apply(logits, {});
    ch.panels.push_back(stage(fmt::format("then top-k {}", o.top_k), logits, order));
  } else {
    off.push_back("top-k 0");
  }
  if (o.top_p < 1.0f) {
    gen::TopP{o.top_p}.apply(logits, {});
    ch.panels.push_back(stage(fmt::format("then top-p {}", o.top_p), logits, order));
  } else {
    off.push_back("top-p 1");
  }
  if (!off.empty())
    ch.subtitle +=
        fmt::format("\noff: {} (set --temperature / --top-k / --top-p to see each one's effect)", fmt::join(off, ", "));
  ch.root = {.css_class = "atto-next", .data = {}, .title = ch.title};
  nlohmann::json stages = nlohmann::json::array();
  for (const BarPanel& p : ch.panels)
    stages.push_back({{"name", p.name}, {"probs", jdoubles(p.values)}, {"removed", p.removed}});
  r.data["next_token"] = {{"tokens", ch.labels}, {"ids", order},     {"temperature", o.temperature},
                          {"top_k", o.top_k},    {"top_p", o.top_p}, {"stages", std::move(stages)}};
  r.figures.push_back(
      {"next_token", "next", ch.title,
       "The model's distribution over the next token at the last position. Panels top to bottom: the raw softmax, "
       "then temperature (divides the logits: < 1 sharpens, > 1 flattens), then top-k (keeps the k most likely), then "
       "top-p (keeps the smallest set of most likely tokens whose probability reaches p), each renormalised. "
       "Set them with --temperature, --top-k, --top-p (the same steps as atto sample).",
       bar_chart_svg(ch)});
}

// ---- embeddings -----------------------------------------------------------------------------

void detail::embedding_figure(Report& r, const Matrix& wte, const std::vector<std::string>& vocab,
                              const EmbeddingFigure& f) {
  const int k = static_cast<int>(std::min<int64_t>(2, wte.cols));
  const Pca p = pca(wte, k);
  Scatter sc;
  sc.title = f.title;
  sc.subtitle = fmt::format("{} tokens in {} dimensions; PC1 and PC2 explain {:.1f}% of the variance", wte.rows,
                            wte.cols, 100.0 * std::accumulate(p.explained.begin(), p.explained.end(), 0.0));
  sc.x_label = fmt::format("PC1 ({:.1f}%)", 100.0 * p.explained[0]);
  sc.y_label = k > 1 ? fmt::format("PC2 ({:.1f}%)", 100.0 * p.explained[1]) : "(one dimension)";
  sc.labels = vocab;
  for (int64_t i = 0; i < wte.rows; ++i) {
    sc.x.push_back(p.projected.at(i, 0));
    sc.y.push_back(k > 1 ? p.projected.at(i, 1) : 0.0);
  }
  sc.root = {.css_class = "atto-embeddings", .data = {}, .title = sc.title};
  r.data[f.key] = {
      {"tokens", vocab}, {"pc1", jdoubles(sc.x)}, {"pc2", jdoubles(sc.y)}, {"explained", jdoubles(p.explained)}};
  r.figures.push_back({f.id, "embeddings", sc.title,
                       !f.caption.empty() ? f.caption
                                          : "Each token's embedding vector (a row of wte) projected onto the two "
                                            "directions of largest variance. Tokens "
                                            "the model treats alike end up close together (often vowels with vowels, "
                                            "digits with digits). Distances are "
                                            "drawn to the same scale on both axes.",
                       scatter_svg(sc)});
}

// ---- positions ------------------------------------------------------------------------------

namespace {

// cos(P[0], P[k]) for every row k of P, as a series over k.
Series cosine_to_first(const Matrix& P) {
  Series s{"cos(p0, pk)", {}, {}, "", P.rows <= 32};
  auto dot = [&](int64_t a, int64_t c) {
    double d = 0;
    for (int64_t j = 0; j < P.cols; ++j) d += static_cast<double>(P.at(a, j)) * P.at(c, j);
    return d;
  };
  for (int64_t k = 0; k < P.rows; ++k) {
    const double den = std::sqrt(dot(0, 0) * dot(k, k));
    s.x.push_back(static_cast<double>(k));
    s.y.push_back(den > 0 ? dot(0, k) / den : NAN);
  }
  return s;
}

}  // namespace

void detail::position_figures(Report& r, const InspectOptions& opt, const Matrix& P, PosKind kind) {
  const bool sinus = kind == PosKind::Sinusoidal;
  const std::vector<int64_t> rows = sample_indices(P.rows, opt.max_pe_positions);
  const std::vector<int64_t> cols = sample_indices(P.cols, opt.max_pe_dims);
  Heatmap hm;
  hm.title = sinus ? "Sinusoidal positional encoding" : "Learned position embeddings (wpe)";
  hm.subtitle = fmt::format("{} positions x {} dimensions", P.rows, P.cols);
  if (rows.size() < static_cast<size_t>(P.rows) || cols.size() < static_cast<size_t>(P.cols))
    hm.subtitle += fmt::format("; {} x {} evenly spaced samples shown (exact values)", rows.size(), cols.size());
  hm.values = Matrix(static_cast<int64_t>(rows.size()), static_cast<int64_t>(cols.size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    hm.row_labels.push_back(std::to_string(rows[i]));
    for (size_t j = 0; j < cols.size(); ++j)
      hm.values.at(static_cast<int64_t>(i), static_cast<int64_t>(j)) = P.at(rows[i], cols[j]);
  }
  for (int64_t c : cols) hm.col_labels.push_back(std::to_string(c));
  hm.row_axis = "position", hm.col_axis = "dimension";
  hm.cmap = ColourMap::Diverging;
  hm.mono_labels = false;
  hm.target_size = 640, hm.target_height = 420;
  hm.id = "positions";
  hm.root = {.css_class = "atto-positions", .data = {{"kind", to_string(kind)}}, .title = hm.title};
  r.figures.push_back(
      {"positions", "positions", hm.title,
       sinus ? "PE[pos, 2i] = sin(pos / 10000^(2i/C)), PE[pos, 2i+1] = cos(...): low dimensions oscillate fast along "
               "the positions, high ones slowly. Blue is negative, red positive."
             : "The learned vector added to the token embedding at each position. Smooth bands mean neighbouring "
               "positions got similar vectors; blue is negative, red positive.",
       heatmap_svg(hm)});
  // Cosine similarity of position 0 with every position k.
  LinePlot lp;
  lp.title = "Position similarity: cos(p\u2080, p\u2096)";
  lp.x_label = "position k", lp.y_label = "cosine similarity";
  lp.ymin = -1, lp.ymax = 1;
  lp.legend = false;
  const Series s = cosine_to_first(P);
  lp.series = {s};
  lp.root = {.css_class = "atto-position-similarity", .data = {}, .title = lp.title};
  nlohmann::json values = nlohmann::json::array();
  for (size_t i = 0; i < rows.size(); ++i) values.push_back(jrow(hm.values, static_cast<int64_t>(i)));
  r.data["positions"] = {{"kind", to_string(kind)},
                         {"positions", rows},
                         {"dims", cols},
                         {"values", std::move(values)},
                         {"cosine_to_0", jdoubles(s.y)}};
  r.figures.push_back(
      {"position_similarity", "positions", lp.title,
       "How similar each position's vector is to position 0's. Sinusoidal encodings fall off smoothly and "
       "oscillate; learned ones show what the model found useful (noisy where positions were rarely seen).",
       line_plot_svg(lp)});
}

// ---- training -------------------------------------------------------------------------------

void detail::training_figures(Report& r, const TrainingCurves* c) {
  if (!c || (c->train_loss.empty() && c->val_loss.empty())) {
    r.notes.push_back("no loss records in the training metrics: the loss and learning-rate figures are left out");
    return;
  }
  LinePlot loss;
  loss.title = "Loss";
  loss.x_label = "step", loss.y_label = "cross-entropy (nats/token)";
  loss.width = 620;
  loss.series = {{"train", c->train_step, c->train_loss, "", false},
                 {"validation", c->val_step, c->val_loss, "", true}};
  loss.root = {.css_class = "atto-loss", .data = {}, .title = loss.title};
  r.figures.push_back(
      {"loss", "training", "Loss",
       "Training loss (logged every few steps, on one batch) and validation loss (each evaluation, on held-out data) "
       "against the optimizer step. Validation rising while training falls is overfitting.",
       line_plot_svg(loss)});
  if (!c->val_bleu.empty()) {
    LinePlot bleu;
    bleu.title = "Validation BLEU";
    bleu.x_label = "step", bleu.y_label = "BLEU";
    bleu.width = 620, bleu.height = 240;
    bleu.legend = false;
    bleu.y_from_zero = true;
    bleu.series = {{"val_bleu", c->val_bleu_step, c->val_bleu, "", true}};
    bleu.root = {.css_class = "atto-bleu", .data = {}, .title = bleu.title};
    r.figures.push_back({"bleu", "training", bleu.title,
                         "Corpus BLEU of greedy translations of validation sentences at each evaluation (0-100).",
                         line_plot_svg(bleu)});
  }
  if (c->lr.empty()) return;
  LinePlot lr;
  lr.title = "Learning rate";
  lr.x_label = "step", lr.y_label = "learning rate";
  lr.width = 620, lr.height = 240;
  lr.legend = false;
  lr.y_from_zero = true;
  lr.series = {{"lr", c->lr_step, c->lr, "", false}};
  lr.root = {.css_class = "atto-lr", .data = {}, .title = lr.title};
  r.figures.push_back({"lr", "training", "Learning rate", "The schedule the run used (warmup, then decay), as logged.",
                       line_plot_svg(lr)});
}

Report build_report(const ModelView& v, const TrainingCurves* curves, const ReportInfo& info,
                    const InspectOptions& opt) {
  opt.validate();
  ATTO_CHECK(!v.ids.empty() && v.tokens.size() == v.ids.size(), "build_report: the view has no input tokens");
  Report r;
  if (v.dropped > 0)
    r.notes.push_back(fmt::format("the input is longer than the block size {}: its first {} tokens were dropped",
                                  v.config.block_size, v.dropped));
  const GPTConfig& c = v.config;
  r.data["format"] = "atto-inspect";
  r.data["version"] = 1;
  r.data["model"] = {
      {"n_layers", c.n_layers},     {"n_heads", c.n_heads},       {"d_model", c.d_model},
      {"block_size", c.block_size}, {"vocab_size", c.vocab_size}, {"pos", to_string(c.pos)},
      {"norm", to_string(c.norm)},  {"pre_norm", c.pre_norm},     {"activation", to_string(c.activation)}};
  r.data["input"] = {{"text", opt.text}, {"tokens", v.tokens}, {"ids", v.ids}, {"dropped", v.dropped}};
  Builder b{v, opt, r};
  next_token_figure(r, opt, v.last_logits, v.vocab, v.tokens.back());
  attention_figures(b);
  residual_figure(b);
  embedding_figure(r, v.wte, v.vocab, {});
  if (v.config.pos != PosKind::Rope) position_figures(r, opt, v.positions, v.config.pos);
  training_figures(r, curves);
  r.html = render_html(r.figures, r.data, r.notes, info);
  return r;
}

Report inspect_run(const std::string& run_dir, const InspectOptions& opt) {
  if (load_run_config(run_dir).task == Task::Seq2Seq) return inspect_seq2seq_run(run_dir, opt);
  return inspect_gpt_run(run_dir, opt);
}

Report inspect_gpt_run(const std::string& run_dir, const InspectOptions& opt) {
  opt.validate();
  if (!opt.src.empty() || opt.tgt)
    throw UsageError(
        fmt::format("--src and --tgt are for seq2seq runs; {} is a GPT run: give the input with --text", run_dir));
  LoadedModel lm = load_run(run_dir);
  const ModelView v = collect(*lm.model, *lm.tokenizer, opt.text);
  std::vector<std::string> notes;
  const TrainingCurves curves = read_metrics(run_path(run_dir, "metrics.jsonl"), notes);
  Report r = build_report(v, &curves, {.title = "atto inspect", .source = run_dir}, opt);
  if (!notes.empty()) {
    r.notes.insert(r.notes.begin(), notes.begin(), notes.end());
    r.html = render_html(r.figures, r.data, r.notes, {.title = "atto inspect", .source = run_dir});
  }
  return r;
}

}  // namespace atto::viz
