// viz building blocks: XML escaping, colour maps, ticks, PCA (Jacobi), heatmap cells and masks.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "base/error.h"
#include "tensor/rng.h"
#include "viz/figures.h"
#include "viz/pca.h"
#include "viz/svg.h"
#include "viz/viz_support.h"

using namespace atto;
using namespace atto::viz;
using atto::test::occurrences;

// ---- svg ------------------------------------------------------------------------------------

TEST(Svg, EscapesMarkupQuotesAndControlCharacters) {
  EXPECT_EQ(escape_xml("<eos>"), "&lt;eos&gt;");
  EXPECT_EQ(escape_xml("a&b \"q\" 'x'"), "a&amp;b &quot;q&quot; &apos;x&apos;");
  EXPECT_EQ(escape_xml("\\n"), "\\n");                      // the tokenizer's display form stays visible
  EXPECT_EQ(escape_xml(std::string("a\x01z")), "a\\x01z");  // invalid in XML 1.0: shown, not written
  EXPECT_EQ(escape_xml("\x7f"), "\\x7F");
  EXPECT_EQ(escape_xml("\xc3\xa9\xe2\x90\xa3"), "\xc3\xa9\xe2\x90\xa3");  // é ␣: UTF-8 passes through
}

TEST(Svg, TextAndAttributesAreEscapedInTheDocument) {
  Svg s(100, 50);
  s.text(1, 2, "</svg><script>alert(1)</script>");
  s.rect(0, 0, 1, 1, "#000", "", "tip <b>&");
  const std::string doc = s.document({.css_class = "a\"b", .data = {{"k", "<v>"}}, .title = "t&"});
  EXPECT_TRUE(doc.starts_with("<?xml"));
  EXPECT_EQ(occurrences(doc, "<script"), 0u);
  EXPECT_EQ(occurrences(doc, "</svg>"), 1u);
  EXPECT_NE(doc.find("&lt;/svg&gt;&lt;script&gt;"), std::string::npos);
  EXPECT_NE(doc.find("class=\"a&quot;b\""), std::string::npos);
  EXPECT_NE(doc.find("data-k=\"&lt;v&gt;\""), std::string::npos);
  EXPECT_NE(doc.find("<title>tip &lt;b&gt;&amp;</title>"), std::string::npos);
  EXPECT_EQ(strip_xml_declaration(doc).substr(0, 5), "<svg ");
}

TEST(Svg, ColourMapsAreOrderedAndBounded) {
  // viridis: dark purple at 0, yellow at 1, luminance increasing (perceptually ordered).
  // Within 2% per channel of matplotlib's end colours #440154 and #fde725 (a polynomial fit).
  auto near = [](const Rgb& c, int r, int g, int b) {
    return std::abs(c.r - r / 255.0) < 0.02 && std::abs(c.g - g / 255.0) < 0.02 && std::abs(c.b - b / 255.0) < 0.02;
  };
  EXPECT_TRUE(near(viridis(0.0), 0x44, 0x01, 0x54)) << hex(viridis(0.0));
  EXPECT_TRUE(near(viridis(0.5), 0x21, 0x91, 0x8c)) << hex(viridis(0.5));
  EXPECT_TRUE(near(viridis(1.0), 0xfd, 0xe7, 0x25)) << hex(viridis(1.0));
  double prev = -1;
  for (int i = 0; i <= 20; ++i) {
    const double l = luminance(viridis(i / 20.0));
    EXPECT_GT(l, prev) << "at t = " << i / 20.0;
    prev = l;
  }
  EXPECT_EQ(hex(viridis(-3)), hex(viridis(0)));  // clamped
  // diverging: white-ish at 0, blue below, red above; symmetric scale around 0.
  const Rgb zero = map_colour(ColourMap::Diverging, 0.0, -2.0, 1.0);
  EXPECT_GT(luminance(zero), 0.9);
  EXPECT_GT(diverging(-1).b, diverging(-1).r);
  EXPECT_GT(diverging(1).r, diverging(1).b);
  EXPECT_EQ(hex(map_colour(ColourMap::Diverging, 2.0, -2.0, 1.0)), hex(diverging(1.0)));
}

TEST(Svg, NiceTicksCoverTheRangeWithRoundSteps) {
  const auto t = nice_ticks(0.13, 2.9, 6);
  ASSERT_GE(t.size(), 3u);
  EXPECT_DOUBLE_EQ(t.front(), 0.5);
  EXPECT_DOUBLE_EQ(t[1] - t[0], 0.5);
  EXPECT_LE(t.back(), 2.9);
  const auto [lo, hi] = nice_range(0.13, 2.9, 6);
  EXPECT_DOUBLE_EQ(lo, 0.0);
  EXPECT_DOUBLE_EQ(hi, 3.0);
  EXPECT_EQ(nice_ticks(-1, 1, 4), (std::vector<double>{-1, -0.5, 0, 0.5, 1}));
  const auto [a, b] = nice_range(5, 5);
  EXPECT_LT(a, 5);
  EXPECT_GT(b, 5);
}

// ---- pca ------------------------------------------------------------------------------------

TEST(Pca, SymmetricEigenOfAKnownMatrix) {
  const Eigen e = symmetric_eigen({2, 1, 0, 1, 2, 0, 0, 0, 0.5}, 3);
  ASSERT_EQ(e.values.size(), 3u);
  EXPECT_NEAR(e.values[0], 3.0, 1e-12);
  EXPECT_NEAR(e.values[1], 1.0, 1e-12);
  EXPECT_NEAR(e.values[2], 0.5, 1e-12);
  const double r = std::sqrt(0.5);
  EXPECT_NEAR(e.vectors[0][0], r, 1e-12);
  EXPECT_NEAR(e.vectors[0][1], r, 1e-12);
  EXPECT_NEAR(e.vectors[1][0], r, 1e-12);  // sign: largest entry (tie: first) positive
  EXPECT_NEAR(e.vectors[1][1], -r, 1e-12);
  EXPECT_NEAR(std::abs(e.vectors[2][2]), 1.0, 1e-12);
}

// Points spread widely along u = (3, 4, 0, 0) / 5 and narrowly along v = (0, 0, 1, 0), plus an
// offset, built so that the spreads are exactly uncorrelated: each a on a grid appears with
// b = +0.5 and b = -0.5. PCA must find u then v, whatever the offset.
Matrix exact_line_data(int pairs) {
  Matrix x(2 * pairs, 4);
  for (int k = 0; k < pairs; ++k)
    for (int s = 0; s < 2; ++s) {
      const double a = -5.0 + 10.0 * k / (pairs - 1), b = s ? 0.5 : -0.5;
      x.at(2 * k + s, 0) = static_cast<float>(5 + a * 0.6);
      x.at(2 * k + s, 1) = static_cast<float>(-2 + a * 0.8);
      x.at(2 * k + s, 2) = static_cast<float>(7 + b);
      x.at(2 * k + s, 3) = 1.0f;
    }
  return x;
}

// Random points near the same plane (for comparing two routes on the same data).
Matrix line_data(int n, uint64_t seed) {
  Rng rng(seed);
  Matrix x(n, 4);
  for (int i = 0; i < n; ++i) {
    const double a = 10.0 * (rng.uniform() - 0.5), b = 1.0 * (rng.uniform() - 0.5);
    x.at(i, 0) = static_cast<float>(5 + a * 0.6);
    x.at(i, 1) = static_cast<float>(-2 + a * 0.8);
    x.at(i, 2) = static_cast<float>(7 + b);
    x.at(i, 3) = 1.0f;
  }
  return x;
}

TEST(Pca, RecoversTheKnownPrincipalAxis) {
  const Matrix x = exact_line_data(100);
  const Pca p = pca(x, 2);
  ASSERT_EQ(p.components.size(), 2u);
  EXPECT_NEAR(p.components[0][0], 0.6, 1e-5);
  EXPECT_NEAR(p.components[0][1], 0.8, 1e-5);
  EXPECT_NEAR(p.components[0][2], 0.0, 1e-5);
  EXPECT_NEAR(std::abs(p.components[1][2]), 1.0, 1e-5);
  EXPECT_GT(p.explained[0], 0.95);
  EXPECT_NEAR(p.explained[0] + p.explained[1], 1.0, 1e-6);  // the data is exactly 2-D
  // The projection is the centred data times the component.
  for (int i : {0, 57, 199}) {  // (float inputs: agreement to float precision)
    double s = 0;
    for (int c = 0; c < 4; ++c) s += (x.at(i, c) - p.mean[c]) * p.components[0][c];
    EXPECT_NEAR(p.projected.at(i, 0), s, 1e-4);
  }
  // Deterministic: the same data gives bit-identical output.
  const Pca q = pca(x, 2);
  EXPECT_EQ(p.projected.data, q.projected.data);
}

TEST(Pca, FewerPointsThanDimensionsUsesTheGramMatrixAndAgrees) {
  // 5 points in 4-D (covariance route) vs the same points padded with zero dims to 8-D (Gram
  // route, N < C): the same components (padded) and projections.
  const Matrix x = line_data(5, 3);
  Matrix wide(5, 8);
  for (int i = 0; i < 5; ++i)
    for (int c = 0; c < 4; ++c) wide.at(i, c) = x.at(i, c);
  const Pca a = pca(x, 2), b = pca(wide, 2);
  for (int j = 0; j < 2; ++j) {
    EXPECT_NEAR(a.variances[j], b.variances[j], 1e-9);
    for (int c = 0; c < 4; ++c) EXPECT_NEAR(a.components[j][c], b.components[j][c], 1e-6) << j << "," << c;
    for (int c = 4; c < 8; ++c) EXPECT_NEAR(b.components[j][c], 0.0, 1e-9);
    for (int i = 0; i < 5; ++i) EXPECT_NEAR(a.projected.at(i, j), b.projected.at(i, j), 1e-5);
  }
}

TEST(Pca, RejectsBadShapes) {
  EXPECT_THROW(pca(Matrix(0, 3), 1), Error);
  EXPECT_THROW(pca(Matrix(4, 3), 4), Error);
  EXPECT_THROW(Matrix(2, 2, {1, 2, 3}), Error);
}

// ---- heatmap --------------------------------------------------------------------------------

TEST(Heatmap, CausalMaskMarksKeysAfterTheQuery) {
  EXPECT_EQ(causal_mask(3, 3), (std::vector<uint8_t>{0, 1, 1, 0, 0, 1, 0, 0, 0}));
  // 2 queries that are the last 2 of 4 positions (2 and 3).
  EXPECT_EQ(causal_mask(2, 4), (std::vector<uint8_t>{0, 0, 0, 1, 0, 0, 0, 0}));
}

TEST(Heatmap, OneCellPerEntryAndMaskedCellsHatched) {
  Heatmap h;
  h.title = "t";
  h.row_labels = {"<eos>", "a", "b"};
  h.col_labels = {"<eos>", "a", "b", "\\n"};
  h.values = Matrix(3, 4, {1, 0, 0, 0, .5f, .5f, 0, 0, .2f, .3f, .5f, 0});  // zeros at (0,1) (1,2) (2,3)
  h.masked = causal_mask(3, 4);  // queries = positions 1..3 of 4: row 0 sees keys 0-1, row 1 keys 0-2
  h.vmin = 0, h.vmax = 1;
  h.id = "hm1";
  h.root = {.css_class = "atto-attn", .data = {{"layer", "0"}}, .title = ""};
  const std::string svg = heatmap_svg(h);
  EXPECT_EQ(h.masked, (std::vector<uint8_t>{0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(occurrences(svg, "class=\"cell\""), 9u);
  EXPECT_EQ(occurrences(svg, "class=\"cell masked\""), 3u);
  EXPECT_EQ(occurrences(svg, "fill=\"url(#hm1-hatch)\""), 3u);
  EXPECT_EQ(occurrences(svg, "<pattern id=\"hm1-hatch\""), 1u);
  // Masked cells are drawn hatched, never in the colour of 0 (viridis(0)), while the zero-valued
  // unmasked entries are.
  for (size_t p = svg.find("class=\"cell masked\""); p != std::string::npos;
       p = svg.find("class=\"cell masked\"", p + 1)) {
    const std::string rect = svg.substr(svg.rfind("<rect", p), p - svg.rfind("<rect", p));
    EXPECT_NE(rect.find("fill=\"url(#hm1-hatch)\""), std::string::npos) << rect;
  }
  EXPECT_EQ(occurrences(svg, "fill=\"" + hex(viridis(0)) + "\" class=\"cell\""), 3u);  // the three unmasked zeros
  // Labels escaped; values written in the (large) cells; root attributes present.
  EXPECT_NE(svg.find("&lt;eos&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("<eos>"), std::string::npos);
  EXPECT_NE(svg.find(">\\n</text>"), std::string::npos);
  EXPECT_NE(svg.find(">.50</text>"), std::string::npos);
  EXPECT_NE(svg.find("class=\"atto-attn\" data-layer=\"0\""), std::string::npos);
}

TEST(Heatmap, SmallCellsDropTheNumbersAndThinTheLabels) {
  Heatmap h;
  const int n = 64;
  h.values = Matrix(n, n);
  for (int i = 0; i < n; ++i) {
    h.row_labels.push_back(std::to_string(i));
    h.col_labels.push_back(std::to_string(i));
  }
  h.target_size = 384;
  const std::string svg = heatmap_svg(h);
  EXPECT_EQ(occurrences(svg, "class=\"cell\""), static_cast<size_t>(n * n));
  EXPECT_EQ(occurrences(svg, ">0.00</text>") + occurrences(svg, ">.00</text>"), 0u);  // no room for numbers
  // Labels are thinned so they do not overlap: fewer than n per axis, but some.
  const size_t labels = occurrences(svg, "font-family=\"DejaVu Sans Mono");
  EXPECT_GT(labels, 20u);
  EXPECT_LT(labels, static_cast<size_t>(2 * n));
  Heatmap bad = h;
  bad.masked = {1, 0};
  EXPECT_THROW(heatmap_svg(bad), Error);
}

TEST(Figures, PlotsEscapeLabelsAndCheckLengths) {
  Scatter sc;
  sc.x = {0, 1, 2};
  sc.y = {0, 1, 0};
  sc.labels = {"<eos>", "\\n", "&"};
  const std::string s = scatter_svg(sc);
  EXPECT_EQ(occurrences(s, "class=\"point\""), 3u);
  EXPECT_NE(s.find(">&lt;eos&gt;</text>"), std::string::npos);
  EXPECT_NE(s.find(">&amp;</text>"), std::string::npos);
  sc.labels.pop_back();
  EXPECT_THROW(scatter_svg(sc), Error);

  BarChart b;
  b.labels = {"a", "b", "c"};
  b.panels = {{"raw", {0.5, 0.3, 0.2}, {}}, {"top-k 2", {0.625, 0.375, 0.0}, {0, 0, 1}}};
  const std::string bars = bar_chart_svg(b);
  EXPECT_EQ(occurrences(bars, "class=\"bar\""), 5u);  // the removed one is a cross, not a bar
  b.panels[1].values.pop_back();
  EXPECT_THROW(bar_chart_svg(b), Error);

  LinePlot p;
  p.series = {{"s", {0, 1, 2}, {1, NAN, 3}, "", false}};
  EXPECT_NE(line_plot_svg(p).find("<polyline"), std::string::npos);
  p.series[0].y.pop_back();
  EXPECT_THROW(line_plot_svg(p), Error);
}
