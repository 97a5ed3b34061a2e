// The report's numbers are the model's own: attention weights, positional encodings, residual
// norms and next-token probabilities embedded in index.html equal what GPT::forward computes.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <unistd.h>

#include "autograd/tape.h"
#include "base/error.h"
#include "generate/broken_logits.h"
#include "io/file.h"
#include "models/gpt.h"
#include "viz/report.h"
#include "viz/viz_support.h"

using namespace atto;
using namespace atto::viz;
using atto::test::occurrences;

namespace {


CharTokenizer names_tokenizer() {
  return CharTokenizer::build("emma\nolivia\nava\nisabella\nsophia\n", {.boundary = true, .include_newline = false});
}

// A small random GPT whose attention is far from uniform (sharpened Q/K projections), so that
// the checks below see real structure.
std::unique_ptr<GPT> small_gpt(int64_t V, PosKind pos, int64_t block, uint64_t seed) {
  GPTConfig c;
  c.vocab_size = V;
  c.block_size = block;
  c.n_layers = 2;
  c.n_heads = 2;
  c.d_model = 16;
  c.pos = pos;
  Rng rng(seed);
  auto m = std::make_unique<GPT>(c, rng);
  for (auto& p : m->named_parameters())
    if (p.name.ends_with("c_attn.weight") || p.name.ends_with("wte.weight")) {
      Tensor t = p.tensor;
      for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] *= 25.0f;
    }
  return m;
}

struct Traced {
  GPT::Trace trace;
  std::vector<float> logits;
};
Traced run(GPT& m, const std::vector<int32_t>& ids) {
  NoGradGuard ng;
  m.eval();
  Traced t;
  t.logits = m.forward(ids, 1, static_cast<int64_t>(ids.size()), &t.trace).to_vector();
  return t;
}

}  // namespace

TEST(Report, AttentionInTheJsonIsTheModelsOwn) {
  const CharTokenizer tok = names_tokenizer();
  auto m = small_gpt(tok.vocab_size(), PosKind::Learned, 16, 1);
  InspectOptions opt;
  opt.text = "emma";
  const ModelView v = collect(*m, tok, opt.text);
  const Report r = build_report(v, nullptr, {}, opt);
  const nlohmann::json d = extract_data(r.html);

  std::vector<int32_t> ids = {tok.boundary_id()};
  for (int32_t id : tok.encode("emma")) ids.push_back(id);
  EXPECT_EQ(d["input"]["ids"].get<std::vector<int32_t>>(), ids);
  EXPECT_EQ(d["input"]["tokens"][0], "<eos>");
  const Traced ref = run(*m, ids);
  const int64_t T = 5, NH = 2;
  const auto& a = d["attention"];
  ASSERT_EQ(a["layers"], 2);
  ASSERT_EQ(a["heads"], 2);
  ASSERT_EQ(a["start"], 0);
  double max_off_diag = 0;
  for (int l = 0; l < 2; ++l) {
    const std::vector<float> w = ref.trace.blocks[l].attn_weights.contiguous().to_vector();  // [1, NH, T, T]
    for (int h = 0; h < NH; ++h)
      for (int i = 0; i < T; ++i) {
        double row = 0;
        for (int j = 0; j < T; ++j) {
          const float got = a["weights"][l][h][i][j].get<float>();
          EXPECT_EQ(got, w[((h * T) + i) * T + j]) << "layer " << l << " head " << h << " (" << i << ", " << j << ")";
          if (j > i) {
            EXPECT_EQ(got, 0.0f) << "a masked (future) entry is not 0";
          }
          if (j < i) max_off_diag = std::max(max_off_diag, static_cast<double>(got));
          row += got;
        }
        EXPECT_NEAR(row, 1.0, 1e-5) << "row " << i << " of layer " << l << " head " << h;
      }
  }
  EXPECT_GT(max_off_diag, 0.3);  // the sharpened model attends to earlier positions too
  // One attention map per layer and head, each an SVG file and inlined in the page.
  EXPECT_EQ(occurrences(r.html, "class=\"atto-attn\""), 4u);
  int maps = 0;
  for (const Figure& f : r.figures) maps += f.section == "attention";
  EXPECT_EQ(maps, 4);
  // Masked cells in each map: T(T-1)/2.
  for (const Figure& f : r.figures)
    if (f.section == "attention") {
      EXPECT_EQ(occurrences(f.svg, "class=\"cell masked\""), 10u) << f.id;
    }
}

TEST(Report, SinusoidalTableEqualsTheFormulaAndIsSampledToTheCap) {
  const CharTokenizer tok = names_tokenizer();
  auto m = small_gpt(tok.vocab_size(), PosKind::Sinusoidal, 200, 2);
  InspectOptions opt;
  opt.text = "ava";
  const Report r = build_report(collect(*m, tok, opt.text), nullptr, {}, opt);
  const nlohmann::json p = extract_data(r.html)["positions"];
  EXPECT_EQ(p["kind"], "sinusoidal");
  const auto pos = p["positions"].get<std::vector<int64_t>>();
  const auto dims = p["dims"].get<std::vector<int64_t>>();
  ASSERT_EQ(pos.size(), 128u);  // 200 positions sampled to the cap, ends included
  EXPECT_EQ(pos.front(), 0);
  EXPECT_EQ(pos.back(), 199);
  ASSERT_EQ(dims.size(), 16u);  // C = 16 < 128: every dimension
  const double C = 16;
  for (size_t a = 0; a < pos.size(); ++a)
    for (size_t b = 0; b < dims.size(); ++b) {
      const int64_t i = dims[b] / 2;
      const double angle = static_cast<double>(pos[a]) / std::pow(10000.0, 2.0 * static_cast<double>(i) / C);
      const double want = dims[b] % 2 == 0 ? std::sin(angle) : std::cos(angle);
      EXPECT_NEAR(p["values"][a][b].get<double>(), want, 1e-6) << "pos " << pos[a] << " dim " << dims[b];
    }
  // cos(p0, pk): 1 at k = 0, one value per position.
  ASSERT_EQ(p["cosine_to_0"].size(), 200u);
  EXPECT_NEAR(p["cosine_to_0"][0].get<double>(), 1.0, 1e-6);
}

TEST(Report, ResidualNormsAndNextTokenStagesFollowTheModel) {
  const CharTokenizer tok = names_tokenizer();
  auto m = small_gpt(tok.vocab_size(), PosKind::Learned, 16, 3);
  InspectOptions opt;
  opt.text = "sop";
  opt.temperature = 0.5f;
  opt.top_k = 6;
  opt.top_p = 0.6f;
  const ModelView v = collect(*m, tok, opt.text);
  const nlohmann::json d = extract_data(build_report(v, nullptr, {}, opt).html);
  const std::vector<int32_t> ids = v.ids;
  const Traced ref = run(*m, ids);
  const int64_t T = static_cast<int64_t>(ids.size()), C = 16, V = tok.vocab_size();
  // Residual: L2 norm of the stream entering each block, per position.
  for (int l = 0; l < 2; ++l) {
    const std::vector<float> x = ref.trace.blocks[l].input.contiguous().to_vector();
    for (int64_t t = 0; t < T; ++t) {
      double s = 0;
      for (int64_t c = 0; c < C; ++c) s += double(x[t * C + c]) * x[t * C + c];
      EXPECT_NEAR(d["residual"][l]["stream"][t].get<double>(), std::sqrt(s), 1e-5 * (1 + std::sqrt(s)));
    }
  }
  // Next token: raw = softmax of the last position's logits; temperature 0.5 squares and
  // renormalises; top-k keeps 6; top-p keeps the shortest prefix reaching 0.6.
  std::vector<double> p(V);
  const float* last = ref.logits.data() + (T - 1) * V;
  const double mx = *std::max_element(last, last + V);
  double z = 0, z2 = 0;
  for (int64_t i = 0; i < V; ++i) z += p[i] = std::exp(last[i] - mx), z2 += p[i] * p[i];
  const auto& nt = d["next_token"];
  const auto top = nt["ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(top.size(), static_cast<size_t>(std::min<int64_t>(20, V)));
  for (size_t k = 1; k < top.size(); ++k) EXPECT_GE(p[top[k - 1]], p[top[k]]);
  ASSERT_EQ(nt["stages"].size(), 4u);
  for (size_t k = 0; k < top.size(); ++k) {
    EXPECT_NEAR(nt["stages"][0]["probs"][k].get<double>(), p[top[k]] / z, 1e-6);
    EXPECT_NEAR(nt["stages"][1]["probs"][k].get<double>(), p[top[k]] * p[top[k]] / z2, 1e-6);
    EXPECT_EQ(nt["stages"][2]["removed"][k].get<int>(), k >= 6 ? 1 : 0);
  }
  double z6 = 0, cum = 0;  // top-p acts on the top-6 distribution (temperature applied)
  for (size_t k = 0; k < 6; ++k) z6 += p[top[k]] * p[top[k]];
  size_t keep = 0;
  while (keep < 6 && cum < 0.6) cum += p[top[keep]] * p[top[keep]] / z6, ++keep;
  EXPECT_LT(keep, 6u);  // the test means something: top-p removed more than top-k did
  double kept_mass = 0;
  for (size_t k = 0; k < top.size(); ++k) {
    EXPECT_EQ(nt["stages"][3]["removed"][k].get<int>(), k >= keep ? 1 : 0) << k;
    kept_mass += nt["stages"][3]["probs"][k].get<double>();
  }
  EXPECT_NEAR(kept_mass, 1.0, 1e-6);
}

TEST(Report, LongTextKeepsTheLastBlockAndCapsTheAttentionMaps) {
  const CharTokenizer tok = names_tokenizer();
  auto m = small_gpt(tok.vocab_size(), PosKind::Learned, 16, 4);
  InspectOptions opt;
  opt.text = "isabellasophiaolivia";  // 20 characters + <eos> = 21 tokens > block 16
  opt.max_attention_tokens = 6;
  const ModelView v = collect(*m, tok, opt.text);
  EXPECT_EQ(v.ids.size(), 16u);
  EXPECT_EQ(v.dropped, 5);
  EXPECT_EQ(tok.decode(v.ids), "ellasophiaolivia");  // the last 16 tokens (the <eos> went too)
  const Report r = build_report(v, nullptr, {}, opt);
  const nlohmann::json a = extract_data(r.html)["attention"];
  EXPECT_EQ(a["start"], 10);
  EXPECT_EQ(a["weights"][0][0].size(), 6u);
  EXPECT_EQ(a["tokens"].get<std::vector<std::string>>(), (std::vector<std::string>{"o", "l", "i", "v", "i", "a"}));
  const Traced ref = run(*m, v.ids);
  const std::vector<float> w = ref.trace.blocks[1].attn_weights.contiguous().to_vector();
  EXPECT_EQ(a["weights"][1][1][5][2].get<float>(), w[((1 * 16) + 15) * 16 + 12]);
  bool noted = false;
  for (const auto& n : r.notes) noted |= n.find("first 5 tokens were dropped") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(Report, InputEncodingAndLabels) {
  const CharTokenizer lines = names_tokenizer();
  int64_t dropped = -1;
  EXPECT_EQ(encode_input(lines, "", 8, &dropped), std::vector<int32_t>{0});  // lines: [<eos>] alone is fine
  EXPECT_EQ(dropped, 0);
  EXPECT_THROW(encode_input(lines, "emma!", 8, nullptr), Error);  // unknown character
  const CharTokenizer stream = CharTokenizer::build("a b\nc", {.boundary = false, .include_newline = true});
  EXPECT_EQ(encode_input(stream, "a", 8, nullptr), stream.encode("a"));  // stream: no <eos> in front
  EXPECT_THROW(encode_input(stream, "", 8, nullptr), UsageError);
  EXPECT_EQ(token_label(stream, stream.id_of(' ')), "\u2423");
  EXPECT_EQ(token_label(stream, stream.id_of('\n')), "\\n");
  EXPECT_EQ(token_label(lines, 0), "<eos>");
  InspectOptions bad;
  bad.top_p = 0;
  EXPECT_THROW(bad.validate(), UsageError);
  bad = {};
  bad.temperature = -1;
  EXPECT_THROW(bad.validate(), UsageError);
}

TEST(Report, MetricsAndWritingTheFolder) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("atto-viz-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string metrics = (dir / "metrics.jsonl").string();
  io::write_file_atomic(metrics,
                        "{\"step\": 5, \"train_loss\": 3.1, \"lr\": 0.001}\n"
                        "not json\n"
                        "{\"step\": 10, \"train_loss\": 2.9, \"lr\": 0.002}\n"
                        "{\"step\": 10, \"val_loss\": 3.0, \"best\": true}\n");
  std::vector<std::string> notes;
  const TrainingCurves c = read_metrics(metrics, notes);
  EXPECT_EQ(c.train_step, (std::vector<double>{5, 10}));
  EXPECT_EQ(c.train_loss, (std::vector<double>{3.1, 2.9}));
  EXPECT_EQ(c.lr, (std::vector<double>{0.001, 0.002}));
  EXPECT_EQ(c.val_step, std::vector<double>{10});
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("line 2"), std::string::npos);

  const CharTokenizer tok = names_tokenizer();
  auto m = small_gpt(tok.vocab_size(), PosKind::Learned, 16, 5);
  InspectOptions opt;
  opt.text = "mia";
  const Report r = build_report(collect(*m, tok, opt.text), &c, {.title = "t", .source = "<run>"}, opt);
  EXPECT_NE(r.html.find("&lt;run&gt;"), std::string::npos);
  const fs::path out = dir / "report";
  write_report(r, out.string());
  for (const Figure& f : r.figures) {
    const std::string svg = io::read_file((out / (f.id + ".svg")).string());
    EXPECT_TRUE(svg.starts_with("<?xml")) << f.id;
    EXPECT_EQ(occurrences(svg, "<svg "), f.id == "residual" ? 3u : 1u) << f.id;  // residual: 2 nested panels
  }
  EXPECT_TRUE(fs::exists(out / "loss.svg"));
  EXPECT_TRUE(fs::exists(out / "lr.svg"));
  const std::string html = io::read_file((out / "index.html").string());
  EXPECT_EQ(html, r.html);
  // Self-contained: the only URL is the SVG namespace; no external scripts, styles or fonts.
  EXPECT_EQ(occurrences(html, "http"), occurrences(html, "xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_EQ(occurrences(html, "<script src"), 0u);
  EXPECT_EQ(occurrences(html, "@import"), 0u);
  EXPECT_EQ(occurrences(html, "<link"), 0u);
  // A run directory is never used as the report folder.
  io::write_file_atomic((dir / "config.json").string(), "{}");
  EXPECT_THROW(write_report(r, dir.string()), Error);
  fs::remove_all(dir);
}

TEST(Report, HostileTextCannotBreakThePage) {
  const std::string text = "</script><!--<b>&\"'";
  const CharTokenizer tok = CharTokenizer::build(text + " ab", {.boundary = false, .include_newline = false});
  auto m = small_gpt(tok.vocab_size(), PosKind::Learned, 32, 6);
  InspectOptions opt;
  opt.text = text;
  const Report r = build_report(collect(*m, tok, opt.text), nullptr, {.title = "<t>", .source = "a&b"}, opt);
  EXPECT_EQ(occurrences(r.html, "</script>"), 2u);  // the JSON block and the check script, nothing else
  EXPECT_EQ(occurrences(r.html, "<!--"), 0u);
  EXPECT_NE(r.html.find("&lt;/script&gt;&lt;!--&lt;b&gt;&amp;"), std::string::npos);  // shown, escaped
  EXPECT_NE(r.html.find("<title>&lt;t&gt; a&amp;b</title>"), std::string::npos);
  const nlohmann::json d = extract_data(r.html);
  EXPECT_EQ(d["input"]["text"], text);
  EXPECT_EQ(d["input"]["tokens"][0], "<");
  for (const Figure& f : r.figures) EXPECT_EQ(occurrences(f.svg, "<!--"), 0u) << f.id;
}

// Non-finite logits anywhere in the traced pass are refused with the message every command
// gives; the old report checked only the last position's row for NaN and +inf, so a -inf logit
// went into the figures.
TEST(Report, NonFiniteLogitsAreRefused) {
  const CharTokenizer tok = names_tokenizer();
  const int32_t v = tok.id_of(U'v');
  ASSERT_GE(v, 0);
  for (float row : {-3e38f, 3e38f, std::nanf("")}) {
    auto m = small_gpt(tok.vocab_size(), PosKind::Learned, 16, 4);
    atto::testing::break_logit(*m, v, row);
    try {
      collect(*m, tok, "emma");
      ADD_FAILURE() << "logit " << row << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                "the model produced non-finite logits while inspecting; the weights may be damaged");
    }
  }
}
