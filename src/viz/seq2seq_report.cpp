// build_seq2seq_report: from a Seq2SeqView (plain data) to the figures, the embedded JSON and the page.
#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "base/error.h"
#include "run/run_config.h"
#include "run/run_dir.h"
#include "viz/report_parts.h"
#include "viz/seq2seq_report.h"

namespace atto::viz {

namespace {

using namespace detail;

struct AttnKind {
  const char* kind;    // "encoder", "cross", "decoder"
  const char* prefix;  // figure id prefix
  const char* section;
  const char* row_axis;
  const char* col_axis;
  bool causal;
};

// One heatmap per layer and head; rows and columns capped to the last `cap` positions.
void attention_kind(Report& r, const InspectOptions& opt, const AttnKind& k,
                    const std::vector<std::vector<Matrix>>& maps, const std::vector<std::string>& rows,
                    const std::vector<std::string>& cols) {
  const auto R = static_cast<int64_t>(rows.size()), K = static_cast<int64_t>(cols.size());
  const int64_t r0 = std::max<int64_t>(0, R - opt.max_attention_tokens),
                c0 = std::max<int64_t>(0, K - opt.max_attention_tokens);
  const int64_t nr = R - r0, nc = K - c0;
  std::string sub;
  if (r0 > 0 || c0 > 0) {
    sub = fmt::format("last {} of {} rows, last {} of {} columns shown", nr, R, nc, K);
    r.notes.push_back(fmt::format("{} attention maps show {} (--max-attention-tokens)", k.kind, sub));
  }
  const std::vector<std::string> rl(rows.begin() + r0, rows.end()), cl(cols.begin() + c0, cols.end());
  nlohmann::json weights = nlohmann::json::array();
  for (size_t l = 0; l < maps.size(); ++l) {
    nlohmann::json layer = nlohmann::json::array();
    for (size_t h = 0; h < maps[l].size(); ++h) {
      Matrix w(nr, nc);
      for (int64_t i = 0; i < nr; ++i)
        for (int64_t j = 0; j < nc; ++j) w.at(i, j) = maps[l][h].at(r0 + i, c0 + j);
      Heatmap hm;
      hm.title = fmt::format("{} \u00b7 layer {} \u00b7 head {}", k.kind, l, h);
      hm.subtitle = sub;
      hm.row_labels = rl, hm.col_labels = cl;
      hm.row_axis = k.row_axis, hm.col_axis = k.col_axis;
      hm.values = w;
      if (k.causal) hm.masked = causal_mask(nr, nc);
      hm.vmin = 0, hm.vmax = 1;
      hm.row_offset = r0, hm.col_offset = c0;
      hm.target_size = 384;
      hm.id = fmt::format("{}_L{}_H{}", k.prefix, l, h);
      hm.root = {.css_class = "atto-attn",
                 .data = {{"kind", k.kind},
                          {"layer", std::to_string(l)},
                          {"head", std::to_string(h)},
                          {"rows", std::to_string(nr)},
                          {"cols", std::to_string(nc)}},
                 .title = hm.title};
      layer.push_back(jmatrix(w));
      r.figures.push_back(
          {hm.id, k.section, hm.title, fmt::format("{} layer {}, head {}.", k.kind, l, h), heatmap_svg(hm)});
    }
    weights.push_back(std::move(layer));
  }
  r.data["attention"][k.kind] = {{"layers", maps.size()},
                                 {"heads", maps.empty() ? 0 : maps[0].size()},
                                 {"rows", nr},
                                 {"cols", nc},
                                 {"row_start", r0},
                                 {"col_start", c0},
                                 {"row_tokens", rl},
                                 {"col_tokens", cl},
                                 {"weights", std::move(weights)}};
}

void stack_residual_figure(Report& r, const std::vector<Seq2SeqView::Residual>& res, const char* stack) {
  const bool decoder = std::string_view(stack) == "decoder";
  Grid g;
  g.title = fmt::format("{} residual stream: L2 norm per position", decoder ? "Decoder" : "Encoder");
  g.subtitle =
      decoder ? "per layer: the stream entering the block, and what self-attention, cross-attention and the FFN add"
              : "per layer: the stream entering the block, and what self-attention and the FFN add to it";
  g.panel_width = 400, g.panel_height = 230;
  g.columns = 3;
  nlohmann::json j = nlohmann::json::array();
  for (size_t l = 0; l < res.size(); ++l) {
    const Seq2SeqView::Residual& rs = res[l];
    std::vector<double> x(rs.stream.size());
    std::iota(x.begin(), x.end(), 0.0);
    LinePlot p;
    p.title = fmt::format("{} layer {}", stack, l);
    p.x_label = decoder ? "target position" : "source position";
    p.width = g.panel_width - 10, p.height = g.panel_height - 6;
    p.y_from_zero = true;
    const bool dots = x.size() <= 32;
    p.series = {{"stream", x, rs.stream, "", dots}, {"self-attn update", x, rs.attn, "", dots}};
    if (decoder) p.series.push_back({"cross-attn update", x, rs.cross, "", dots});
    p.series.push_back({"FFN update", x, rs.ffn, "", dots});
    g.panels.push_back(line_plot_svg(p));
    nlohmann::json e = {
        {"layer", l}, {"stream", jdoubles(rs.stream)}, {"attn", jdoubles(rs.attn)}, {"ffn", jdoubles(rs.ffn)}};
    if (decoder) e["cross"] = jdoubles(rs.cross);
    j.push_back(std::move(e));
  }
  g.root = {.css_class = "atto-residual", .data = {{"stack", stack}}, .title = g.title};
  r.data["residual"][stack] = std::move(j);
  r.figures.push_back(
      {fmt::format("residual_{}", stack), "residual", g.title,
       "Each panel is one layer. The norm of the residual stream entering the layer, and the norms of "
       "the updates its sublayers add (decoder layers also add the cross-attention read of the source).",
       grid_svg(g)});
}

void embedding_figures(Report& r, const Seq2SeqView& v) {
  if (v.config.share_embeddings) {
    embedding_figure(r, v.src_embed, v.src_vocab,
                     {.id = "embeddings_pca",
                      .key = "embeddings",
                      .title = "Shared source/target token embeddings, projected by PCA",
                      .caption = ""});
    return;
  }
  embedding_figure(r, v.src_embed, v.src_vocab,
                   {.id = "src_embeddings_pca",
                    .key = "src_embeddings",
                    .title = "Source token embeddings (encoder), projected by PCA",
                    .caption = "Each source token's embedding vector projected onto its two main directions."});
  embedding_figure(r, v.tgt_embed, v.tgt_vocab,
                   {.id = "tgt_embeddings_pca",
                    .key = "tgt_embeddings",
                    .title = "Target token embeddings (decoder), projected by PCA",
                    .caption = "Each target token's embedding vector projected onto its two main directions."});
}

nlohmann::json model_json(const Seq2SeqConfig& c) {
  return {{"n_enc_layers", c.n_enc_layers},
          {"n_dec_layers", c.n_dec_layers},
          {"n_heads", c.n_heads},
          {"d_model", c.d_model},
          {"max_len", c.max_len},
          {"src_vocab", c.src_vocab},
          {"tgt_vocab", c.tgt_vocab},
          {"pos", to_string(c.pos)},
          {"norm", to_string(c.norm)},
          {"pre_norm", c.pre_norm},
          {"activation", to_string(c.activation)},
          {"share_embeddings", c.share_embeddings},
          {"tie_weights", c.tie_weights}};
}

}  // namespace

Report build_seq2seq_report(const Seq2SeqView& v, const TrainingCurves* curves, const ReportInfo& info,
                            const InspectOptions& opt) {
  opt.validate();
  ATTO_CHECK(!v.src_ids.empty() && !v.tgt_ids.empty() && v.src_tokens.size() == v.src_ids.size() &&
                 v.tgt_tokens.size() == v.tgt_ids.size(),
             "build_seq2seq_report: the view has no source or target tokens");
  Report r;
  if (v.src_dropped > 0)
    r.notes.push_back(fmt::format("the source is longer than max_len {}: its last {} tokens were dropped",
                                  v.config.max_len, v.src_dropped));
  if (v.tgt_dropped > 0)
    r.notes.push_back(fmt::format("the target is longer than max_len - 1 = {}: its last {} tokens were dropped",
                                  v.config.max_len - 1, v.tgt_dropped));
  if (!v.forced && !v.finished)
    r.notes.push_back("greedy decoding reached the length limit before EOS: the translation is cut");
  r.data["format"] = "atto-inspect";
  r.data["version"] = 1;
  r.data["task"] = "seq2seq";
  r.data["model"] = model_json(v.config);
  r.data["input"] = {{"src_text", v.src_text},     {"src_tokens", v.src_tokens}, {"src_ids", v.src_ids},
                     {"tgt_tokens", v.tgt_tokens}, {"tgt_ids", v.tgt_ids},       {"translation", v.translation},
                     {"forced", v.forced},         {"finished", v.finished}};
  next_token_figure(r, opt, v.last_logits, v.tgt_vocab, v.tgt_tokens.back());
  r.data["attention"]["kinds"] = {"encoder", "cross", "decoder"};
  attention_kind(r, opt, {"encoder", "enc_attn", "enc_attention", "query (source)", "key (source)", false},
                 v.enc_attention, v.src_tokens, v.src_tokens);
  attention_kind(r, opt, {"cross", "cross_attn", "cross_attention", "query (target)", "key (source)", false},
                 v.cross_attention, v.tgt_tokens, v.src_tokens);
  attention_kind(r, opt, {"decoder", "dec_attn", "dec_attention", "query (target)", "key (target)", true},
                 v.dec_attention, v.tgt_tokens, v.tgt_tokens);
  stack_residual_figure(r, v.enc_residual, "encoder");
  stack_residual_figure(r, v.dec_residual, "decoder");
  embedding_figures(r, v);
  position_figures(r, opt, v.positions, v.config.pos);
  training_figures(r, curves);
  r.html = render_html(r.figures, r.data, r.notes, info);
  return r;
}

Report inspect_seq2seq_run(const std::string& run_dir, const InspectOptions& opt) {
  opt.validate();
  if (!opt.text.empty())
    throw UsageError(
        fmt::format("--text is for GPT runs; {} is a seq2seq run: give the source sentence with --src", run_dir));
  if (opt.src.empty())
    throw UsageError(
        fmt::format("{} is a seq2seq run: give the source sentence with --src (and optionally --tgt)", run_dir));
  LoadedSeq2Seq lm = load_seq2seq_run(run_dir);
  const Seq2SeqView v = collect_seq2seq(*lm.model, *lm.src_tok, *lm.tgt_tok, opt.src, opt.tgt);
  std::vector<std::string> notes;
  const TrainingCurves curves = read_metrics(run_path(run_dir, "metrics.jsonl"), notes);
  const ReportInfo info{.title = "atto inspect", .source = run_dir};
  Report r = build_seq2seq_report(v, &curves, info, opt);
  if (!notes.empty()) {
    r.notes.insert(r.notes.begin(), notes.begin(), notes.end());
    r.html = render_html(r.figures, r.data, r.notes, info);
  }
  return r;
}

}  // namespace atto::viz
