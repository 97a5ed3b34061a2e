// atto/viz/figures.h: the figure kinds of the report, each a function from plain data to an
// SVG string. No model types here: a figure sees labels, numbers and matrices only, so the same
// heatmap draws self-attention (tokens x tokens), cross-attention (target x source tokens) or a
// positional-encoding table (positions x dimensions).
//
//   viz::Heatmap h;
//   h.title = "Layer 0, head 1";
//   h.row_labels = {"<eos>", "e", "m"};               // queries (rows, top to bottom)
//   h.col_labels = {"<eos>", "e", "m"};               // keys (columns, left to right)
//   h.values = viz::Matrix(3, 3, weights);            // [rows, cols] row-major
//   h.masked = viz::causal_mask(3, 3);                // 1 = masked: drawn hatched, not coloured
//   h.vmin = 0, h.vmax = 1;
//   std::string svg = viz::heatmap_svg(h);            // a standalone SVG document
//
// Conventions
// - Every function returns a complete SVG document (with the XML declaration); inline it into
//   HTML with strip_xml_declaration().
// - Heatmap cells are <rect class="cell"> (masked ones class="cell masked", hatched), exactly
//   one per entry, row-major; the root carries the caller's class and data-* attributes
//   (the report marks attention maps with class "atto-attn", data-layer, data-head).
// - Sizes adapt to the data: heatmap cells shrink with the number of rows/columns (between
//   min_cell and max_cell px); values are written in the cells only when a cell is at least
//   26 x 16 px; labels are thinned when they would overlap. Callers cap the data itself
//   (the report keeps at most 64 tokens per attention map, 128 x 128 PE entries).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "viz/svg.h"

namespace atto::viz {

// A dense row-major matrix of floats: element (r, c) is data[r * cols + c].
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<float> data;

  Matrix() = default;
  Matrix(int64_t r, int64_t c, std::vector<float> d);  // checks d.size() == r * c
  Matrix(int64_t r, int64_t c) : rows(r), cols(c), data(static_cast<size_t>(r * c), 0.0f) {}
  float at(int64_t r, int64_t c) const { return data[static_cast<size_t>(r * cols + c)]; }
  float& at(int64_t r, int64_t c) { return data[static_cast<size_t>(r * cols + c)]; }
};

// 1 where key c comes after query r (the causal triangle), [rows * cols]; with rows < cols the
// queries are the last `rows` positions (row r is position cols - rows + r).
std::vector<uint8_t> causal_mask(int64_t rows, int64_t cols);

constexpr double kAuto = std::numeric_limits<double>::quiet_NaN();

struct Heatmap {
  std::string title;
  std::string subtitle;                 // a note under the title (caps, scales); may be empty
  std::vector<std::string> row_labels;  // [rows]; empty = none
  std::vector<std::string> col_labels;  // [cols]
  std::string row_axis, col_axis;       // axis names ("query", "key")
  Matrix values;
  std::vector<uint8_t> masked;        // [rows * cols], 1 = masked; empty = none
  double vmin = kAuto, vmax = kAuto;  // colour scale; kAuto = from the unmasked values
  ColourMap cmap = ColourMap::Viridis;
  int value_decimals = 2;                  // digits written in cells (when they fit)
  bool mono_labels = true;                 // token labels in monospace
  double min_cell = 3, max_cell = 34;      // cell size bounds in px
  double target_size = 520;                // square cells: the grid's longer side aims at this (px)
  double target_height = 0;                // > 0: free aspect, grid width target_size, height this
  int64_t row_offset = 0, col_offset = 0;  // index of the first row/column (for tooltips)
  std::string id;                          // document-unique prefix for ids (hatch pattern)
  RootAttrs root;                          // class / data-* on the root <svg>
};
std::string heatmap_svg(const Heatmap& h);

struct Series {
  std::string name;
  std::vector<double> x, y;  // same length; non-finite points are skipped
  std::string colour;        // empty = palette(series index)
  bool markers = false;      // dots at the points (for sparse series such as validation loss)
};

struct LinePlot {
  std::string title, subtitle, x_label, y_label;
  std::vector<Series> series;
  double width = 560, height = 300;
  bool y_from_zero = false;           // include 0 in the y range
  double ymin = kAuto, ymax = kAuto;  // fixed y range; kAuto = from the data (rounded to ticks)
  bool legend = true;
  RootAttrs root;
};
std::string line_plot_svg(const LinePlot& p);

// Stacked panels of bars over the same labels (one panel per stage of a pipeline).
struct BarPanel {
  std::string name;              // e.g. "after top-k = 5"
  std::vector<double> values;    // [labels]
  std::vector<uint8_t> removed;  // [labels], 1 = filtered out (drawn as a cross); empty = none
};
struct BarChart {
  std::string title, subtitle, y_label;
  std::vector<std::string> labels;
  std::vector<BarPanel> panels;
  double bar_width = 34, panel_height = 130;
  RootAttrs root;
};
std::string bar_chart_svg(const BarChart& b);

struct Scatter {
  std::string title, subtitle, x_label, y_label;
  std::vector<double> x, y;
  std::vector<std::string> labels;  // one per point, drawn next to it
  double size = 520;                // plot area side in px
  RootAttrs root;
};
std::string scatter_svg(const Scatter& s);

// Lays complete SVGs (same size each) out in a grid under a title: small multiples in one file.
struct Grid {
  std::string title, subtitle;
  std::vector<std::string> panels;  // SVG documents or elements
  double panel_width = 300, panel_height = 200;
  int columns = 3;
  RootAttrs root;
};
std::string grid_svg(const Grid& g);

// Shared by the figure kinds: the title block at the top of a figure (the subtitle may hold
// several lines separated by '\n'); returns its height.
double draw_title(Svg& s, const std::string& title, const std::string& subtitle);
// Estimated width of s (its longest line) in px at font size `size` (no font metrics: 0.62 em
// per code point).
double text_width(std::string_view s, double size);

}  // namespace atto::viz
