// The report page (index.html) and writing the report to a folder.
#include <cstdio>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "base/error.h"
#include "io/file.h"
#include "run/run_dir.h"
#include "viz/report.h"

namespace atto::viz {

namespace {

constexpr const char* kStyle = R"(
:root { color-scheme: light; }
body { margin: 0; background: #f4f5f7; color: #1d1f23;
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", Helvetica, Arial, sans-serif; }
header, section, footer { max-width: 1500px; margin: 0 auto; padding: 4px 24px; }
h1 { font-size: 24px; margin: 18px 0 2px; }
h1 small { font-weight: normal; color: #667; font-size: 15px; }
h2 { font-size: 19px; margin: 26px 0 6px; padding-bottom: 4px; border-bottom: 1px solid #d9dce3; }
p.lead { max-width: 95ch; color: #333; margin: 4px 0 12px; }
.meta { color: #444; margin: 2px 0 8px; }
.meta b { color: #111; font-weight: 600; }
nav a { margin-right: 14px; color: #2a5db0; text-decoration: none; }
nav a:hover { text-decoration: underline; }
.tokens { display: flex; flex-wrap: wrap; gap: 4px; margin: 8px 0 6px; }
.tok { display: inline-flex; flex-direction: column; align-items: center; min-width: 18px; padding: 2px 6px;
       background: #fff; border: 1px solid #cfd3da; border-radius: 4px;
       font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; }
.tok i { font-size: 10px; color: #889; font-style: normal; font-family: system-ui, sans-serif; }
.tok.special { background: #eef2fb; }
ul.notes { margin: 6px 0; padding-left: 20px; color: #8a5300; }
figure { display: inline-block; vertical-align: top; box-sizing: border-box; max-width: 100%;
         margin: 0 12px 14px 0; padding: 8px; background: #fff; border: 1px solid #e0e2e7; border-radius: 6px; }
.svgbox { overflow: auto; max-height: 1400px; }
.svgbox svg { display: block; }
figcaption { font-size: 13px; color: #444; max-width: 80ch; margin-top: 4px; }
figcaption a { color: #2a5db0; }
details { margin: 6px 0 10px; }
details > summary { cursor: pointer; font-weight: 600; font-size: 15px; margin: 6px 0; }
.heads { display: flex; flex-wrap: wrap; gap: 10px; align-items: flex-start; }
.heads figure { margin: 0; }
footer { color: #667; font-size: 12px; padding-bottom: 24px; }
)";

struct SectionText {
  const char* id;
  const char* title;
  const char* lead;
};

const std::vector<SectionText>& sections() {
  static const std::vector<SectionText> s = {
      {"next", "Next token", "What the model predicts after the whole input, before and after the sampler steps."},
      {"attention", "Attention",
       "One map per layer and head. Row i is the query at position i; column j is the key at position j; the colour "
       "is how much position i attends to position j (each row sums to 1). The model is causal: a position sees "
       "itself and earlier positions only, so the cells above the diagonal are masked (hatched grey, not zero-"
       "coloured). Scale: 0 (dark purple) to 1 (yellow); weights are written in the cells when there is room and "
       "shown on hover otherwise."},
      {"enc_attention", "Encoder self-attention",
       "One map per encoder layer and head: source token i (row) attending to source token j (column). The encoder "
       "is not causal, so every cell is live; each row sums to 1. Scale 0 (dark purple) to 1 (yellow)."},
      {"cross_attention", "Cross-attention",
       "One map per decoder layer and head: target position i (row, the decoder input [<bos>] + target) attending to "
       "source token j (column) of the encoder output. Each row sums to 1; an alignment between the languages shows "
       "as a bright path through the map."},
      {"dec_attention", "Decoder self-attention",
       "One map per decoder layer and head: target position i attending to target position j. The decoder is causal, "
       "so the cells above the diagonal are masked (hatched grey). Each row sums to 1."},
      {"residual", "Residual stream",
       "How large the residual stream is at each position as it flows through the layers, and how much each "
       "attention and feed-forward sublayer adds to it."},
      {"embeddings", "Embeddings", "The token embedding table, flattened to two dimensions."},
      {"positions", "Positions", "The vectors added to the token embeddings to tell the model where each token is."},
      {"training", "Training", "The run's metrics.jsonl."},
  };
  return s;
}

std::string figure_html(const Figure& f, bool compact) {
  const std::string link = fmt::format("<a href=\"{0}.svg\">{0}.svg</a>", escape_xml(f.id));
  return fmt::format("<figure id=\"fig-{}\"><div class=\"svgbox\">{}</div><figcaption>{} {}</figcaption></figure>\n",
                     escape_xml(f.id), strip_xml_declaration(f.svg), compact ? "" : escape_xml(f.caption), link);
}

std::string attention_html(const std::vector<const Figure*>& figs) {
  std::map<int64_t, std::vector<const Figure*>> by_layer;
  for (const Figure* f : figs) {
    int64_t l = 0, h = 0;
    const size_t at = f->id.find("attn_L");
    if (at != std::string::npos && std::sscanf(f->id.c_str() + at, "attn_L%ld_H%ld", &l, &h) == 2)
      by_layer[l].push_back(f);
  }
  std::string s;
  for (const auto& [l, fs] : by_layer) {
    s += fmt::format("<details open><summary>Layer {} ({} heads)</summary><div class=\"heads\">\n", l, fs.size());
    for (const Figure* f : fs) s += figure_html(*f, true);
    s += "</div></details>\n";
  }
  return s;
}

// At most max_cp code points of s, with "…" when cut.
std::string clip(const std::string& s, size_t max_cp) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && n++ == max_cp) return s.substr(0, i) + "\u2026";
  return s;
}

std::string token_boxes(const nlohmann::json& tokens) {
  std::string s = "<div class=\"tokens\">";
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string t = tokens[i].get<std::string>();
    const bool special = t == "<eos>" || t == "<bos>" || t == "<pad>" || t == "<unk>";
    s += fmt::format("<span class=\"tok{}\">{}<i>{}</i></span>", special ? " special" : "", escape_xml(t), i);
  }
  return s + "</div>\n";
}

std::string seq2seq_meta_html(const nlohmann::json& data) {
  const nlohmann::json& m = data["model"];
  std::string s = fmt::format(
      "<div class=\"meta\">Seq2seq: <b>{}</b> encoder + <b>{}</b> decoder layers \u00b7 <b>{}</b> heads \u00b7 d_model "
      "<b>{}</b> \u00b7 max length <b>{}</b> \u00b7 vocabularies <b>{}</b> / <b>{}</b>{} \u00b7 {} positions \u00b7 {} "
      "({}) "
      "\u00b7 {}</div>\n",
      m["n_enc_layers"].get<int64_t>(), m["n_dec_layers"].get<int64_t>(), m["n_heads"].get<int64_t>(),
      m["d_model"].get<int64_t>(), m["max_len"].get<int64_t>(), m["src_vocab"].get<int64_t>(),
      m["tgt_vocab"].get<int64_t>(), m["share_embeddings"].get<bool>() ? " (shared)" : "",
      escape_xml(m["pos"].get<std::string>()), escape_xml(m["norm"].get<std::string>()),
      m["pre_norm"].get<bool>() ? "pre-norm" : "post-norm", escape_xml(m["activation"].get<std::string>()));
  const nlohmann::json& in = data["input"];
  s += fmt::format("<div class=\"meta translation\">Source: <b>{}</b></div>\n",
                   escape_xml(clip(in["src_text"].get<std::string>(), 240)));
  s += fmt::format("<div class=\"meta translation\" id=\"atto-translation\">{}: <b>{}</b></div>\n",
                   in["forced"].get<bool>() ? "Target (given with --tgt)" : "Translation (greedy)",
                   escape_xml(clip(in["translation"].get<std::string>(), 240)));
  s += fmt::format("<div class=\"meta\">{} source tokens (encoder input):</div>\n", in["src_tokens"].size());
  s += token_boxes(in["src_tokens"]);
  s += fmt::format("<div class=\"meta\">{} target tokens (decoder input):</div>\n", in["tgt_tokens"].size());
  return s + token_boxes(in["tgt_tokens"]);
}

std::string header_html(const nlohmann::json& data, const std::vector<std::string>& notes, const ReportInfo& info,
                        const std::vector<const Figure*>& present) {
  const nlohmann::json& m = data["model"];
  std::string s =
      fmt::format("<header><h1>{} <small>{}</small></h1>\n", escape_xml(info.title), escape_xml(info.source));
  if (data.value("task", "gpt") == "seq2seq") {
    s += seq2seq_meta_html(data);
  } else {
    s += fmt::format(
        "<div class=\"meta\">GPT: <b>{}</b> layers \u00b7 <b>{}</b> heads \u00b7 d_model <b>{}</b> \u00b7 block size "
        "<b>{}</b> \u00b7 vocabulary <b>{}</b> \u00b7 {} positions \u00b7 {} ({}) \u00b7 {}</div>\n",
        m["n_layers"].get<int64_t>(), m["n_heads"].get<int64_t>(), m["d_model"].get<int64_t>(),
        m["block_size"].get<int64_t>(), m["vocab_size"].get<int64_t>(), escape_xml(m["pos"].get<std::string>()),
        escape_xml(m["norm"].get<std::string>()), m["pre_norm"].get<bool>() ? "pre-norm" : "post-norm",
        escape_xml(m["activation"].get<std::string>()));
    const nlohmann::json& in = data["input"];
    s += fmt::format(
        "<div class=\"meta\">Input text: <b>{}</b> \u2192 {} tokens seen by the model:</div>\n<div class=\"tokens\">",
        escape_xml(clip(nlohmann::json(in["text"].get<std::string>()).dump(), 240)), in["tokens"].size());
    for (size_t i = 0; i < in["tokens"].size(); ++i) {
      const std::string t = in["tokens"][i].get<std::string>();
      s += fmt::format("<span class=\"tok{}\">{}<i>{}</i></span>", t == "<eos>" ? " special" : "", escape_xml(t), i);
    }
    s += "</div>\n";
  }
  if (!notes.empty()) {
    s += "<ul class=\"notes\">";
    for (const std::string& n : notes) s += "<li>" + escape_xml(n) + "</li>";
    s += "</ul>\n";
  }
  s += "<nav>";
  for (const SectionText& sec : sections())
    for (const Figure* f : present)
      if (f->section == sec.id) {
        s += fmt::format("<a href=\"#{}\">{}</a>", sec.id, sec.title);
        break;
      }
  return s + "</nav></header>\n";
}

constexpr const char* kCheckScript = R"(<script>
(function () {
  var out = document.getElementById('atto-check');
  try {
    var d = JSON.parse(document.getElementById('atto-data').textContent);
    var maps = document.querySelectorAll('svg.atto-attn').length;
    var want = 0;
    if (d.task === 'seq2seq') {
      d.attention.kinds.forEach(function (k) {
        var a = d.attention[k], n = document.querySelectorAll('svg.atto-attn[data-kind="' + k + '"]').length;
        if (n !== a.layers * a.heads) throw new Error(n + ' ' + k + ' attention maps for ' + a.layers * a.heads + ' layer/head pairs');
        out.setAttribute('data-' + k + '-maps', String(n));
        want += n;
      });
    } else {
      want = d.attention.layers * d.attention.heads;
    }
    if (maps !== want) throw new Error(maps + ' attention maps on the page for ' + want + ' layer/head pairs');
    out.setAttribute('data-status', 'ok');
    out.setAttribute('data-attention-maps', String(maps));
    out.textContent = 'Self-check passed: ' + maps + ' attention maps match the embedded data.';
  } catch (e) {
    out.setAttribute('data-status', 'error');
    out.textContent = 'Self-check failed: ' + e.message;
    console.error('atto-inspect self-check failed: ' + e.message);
  }
})();
</script>
)";

}  // namespace

std::string render_html(const std::vector<Figure>& figures, const nlohmann::json& data,
                        const std::vector<std::string>& notes, const ReportInfo& info) {
  std::vector<const Figure*> all;
  for (const Figure& f : figures) all.push_back(&f);
  std::string s = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  s += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  s += fmt::format("<title>{} {}</title>\n<style>{}</style></head>\n<body>\n", escape_xml(info.title),
                   escape_xml(info.source), kStyle);
  s += header_html(data, notes, info, all);
  for (const SectionText& sec : sections()) {
    std::vector<const Figure*> figs;
    for (const Figure* f : all)
      if (f->section == sec.id) figs.push_back(f);
    if (figs.empty()) continue;
    s += fmt::format("<section id=\"{}\"><h2>{}</h2><p class=\"lead\">{}</p>\n", sec.id, sec.title,
                     escape_xml(sec.lead));
    if (std::string_view(sec.id).ends_with("attention"))
      s += attention_html(figs);
    else
      for (const Figure* f : figs) s += figure_html(*f, false);
    s += "</section>\n";
  }
  s += "<footer><p>Made by atto inspect. Every figure is also a standalone SVG file next to this page; the numbers "
       "behind them are in the JSON block <code>atto-data</code> of this page. <span id=\"atto-check\" "
       "data-status=\"pending\">Self-check did not run (scripts disabled).</span></p></footer>\n";
  // '<' only occurs inside JSON strings; as \u003c it cannot end the script element ("</script>")
  // or open an HTML comment ("<!--"), whatever the input text holds.
  std::string json;
  for (char ch : data.dump()) json += ch == '<' ? std::string("\\u003c") : std::string(1, ch);
  s += "<script type=\"application/json\" id=\"atto-data\">" + json + "</script>\n";
  s += kCheckScript;
  return s + "</body></html>\n";
}

nlohmann::json extract_data(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"atto-data\">";
  const size_t a = html.find(open);
  ATTO_CHECK(a != std::string::npos, "inspect report: no atto-data block in the page");
  const size_t b = html.find("</script>", a);
  ATTO_CHECK(b != std::string::npos, "inspect report: the atto-data block is not closed");
  return nlohmann::json::parse(html.substr(a + open.size(), b - a - open.size()));
}

void write_report(const Report& r, const std::string& out_dir) {
  ATTO_CHECK(!out_dir.empty(), "--out: give a folder for the report");
  if (std::filesystem::exists(out_dir)) {
    ATTO_CHECK(std::filesystem::is_directory(out_dir), "--out {} exists and is not a folder", out_dir);
    ATTO_CHECK(!looks_like_run(out_dir),
               "--out {} is a run directory; write the report to another folder "
               "(e.g. {}/report)",
               out_dir, out_dir);
  }
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  ATTO_CHECK(!ec, "--out: cannot create the folder {}: {}", out_dir, ec.message());
  for (const Figure& f : r.figures) io::write_file_atomic(out_dir + "/" + f.id + ".svg", f.svg);
  io::write_file_atomic(out_dir + "/index.html", r.html);
}

}  // namespace atto::viz
