// The heatmap figure: a grid of coloured cells with row/column labels and a colour bar.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "base/error.h"
#include "viz/figures.h"

namespace atto::viz {

Matrix::Matrix(int64_t r, int64_t c, std::vector<float> d) : rows(r), cols(c), data(std::move(d)) {
  ATTO_CHECK(r >= 0 && c >= 0 && static_cast<int64_t>(data.size()) == r * c,
             "viz::Matrix: {} values for a {} x {} matrix", data.size(), r, c);
}

std::vector<uint8_t> causal_mask(int64_t rows, int64_t cols) {
  std::vector<uint8_t> m(static_cast<size_t>(rows * cols), 0);
  const int64_t shift = cols - rows;  // row r is position shift + r
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = shift + r + 1; c < cols; ++c) m[static_cast<size_t>(r * cols + c)] = 1;
  return m;
}

double text_width(std::string_view s, double size) {
  size_t n = 0, widest = 0;  // code points of the longest line (bytes not continuing a UTF-8 sequence)
  for (char ch : s) {
    if (ch == '\n')
      n = 0;
    else
      n += (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
    widest = std::max(widest, n);
  }
  return 0.62 * size * static_cast<double>(widest);
}

double draw_title(Svg& s, const std::string& title, const std::string& subtitle) {
  double y = 6;
  if (!title.empty()) {
    s.text(10, y + 10, title, {.size = 14, .bold = true});
    y += 20;
  }
  size_t a = 0;  // one line per '\n'-separated part of the subtitle
  while (a < subtitle.size()) {
    const size_t b = std::min(subtitle.find('\n', a), subtitle.size());
    s.text(10, y + 7, std::string_view(subtitle).substr(a, b - a), {.size = 11, .fill = "#555"});
    y += 15;
    a = b + 1;
  }
  return y + 6;
}

namespace {

struct HeatLayout {
  double cw, ch, font, top, left, label_w, label_h;  // cell width and height in px
  int64_t row_step, col_step;                        // draw every n-th label
  double room;                                       // px a column label may take across
  bool write_values;
};

double max_label_width(const std::vector<std::string>& labels, double font) {
  double w = 0;
  for (const auto& l : labels) w = std::max(w, text_width(l, font));
  return std::min(w, 140.0);
}

HeatLayout layout(const Heatmap& h, double title_h) {
  HeatLayout L{};
  const double rows = static_cast<double>(std::max<int64_t>(1, h.values.rows));
  const double cols = static_cast<double>(std::max<int64_t>(1, h.values.cols));
  if (h.target_height > 0) {  // free aspect: fill target_size x target_height
    L.cw = std::clamp(std::floor(h.target_size / cols * 2) / 2, h.min_cell, h.max_cell);
    L.ch = std::clamp(std::floor(h.target_height / rows * 2) / 2, h.min_cell, h.max_cell);
  } else {  // square cells, the longer side at target_size
    L.cw = L.ch = std::clamp(std::floor(h.target_size / std::max(rows, cols)), h.min_cell, h.max_cell);
  }
  L.font = std::clamp(std::min(L.cw, L.ch) * 0.75, 8.0, 11.0);
  L.row_step = static_cast<int64_t>(std::ceil((L.font + 1) / L.ch));
  L.col_step = static_cast<int64_t>(std::ceil((L.font + 1) / L.cw));
  // A column label is written across when it fits its column, else rotated (reads upwards).
  L.room = L.cw * static_cast<double>(L.col_step) - 2;
  double col_h = L.font;
  for (const auto& l : h.col_labels) col_h = std::max(col_h, std::min(140.0, text_width(l, L.font)));
  L.label_h = h.col_labels.empty() ? 0 : (col_h > L.room ? col_h : L.font) + 8;
  L.label_w = h.row_labels.empty() ? 0 : max_label_width(h.row_labels, L.font) + 8;
  L.left = 10 + (h.row_axis.empty() ? 0 : 18) + L.label_w;
  L.top = title_h + (h.col_axis.empty() ? 0 : 18) + L.label_h;
  L.write_values = L.cw >= 26 && L.ch >= 16;
  return L;
}

std::pair<double, double> value_range(const Heatmap& h) {
  double lo = h.vmin, hi = h.vmax;
  if (std::isnan(lo) || std::isnan(hi)) {
    double mn = INFINITY, mx = -INFINITY;
    for (size_t i = 0; i < h.values.data.size(); ++i) {
      const double v = h.values.data[i];
      if ((!h.masked.empty() && h.masked[i]) || !std::isfinite(v)) continue;
      mn = std::min(mn, v), mx = std::max(mx, v);
    }
    if (!std::isfinite(mn)) mn = 0, mx = 1;
    if (std::isnan(lo)) lo = mn;
    if (std::isnan(hi)) hi = mx;
  }
  return {lo, hi};
}

std::string cell_text(double v, int decimals) {
  std::string s = fmt::format("{:.{}f}", v, decimals);
  if (s.starts_with("0."))
    s.erase(0, 1);  // ".87": fits a small cell
  else if (s.starts_with("-0."))
    s.erase(1, 1);  // "-.87"
  return s;
}

void draw_labels(Svg& s, const Heatmap& h, const HeatLayout& L) {
  const TextStyle row_st{.size = L.font, .anchor = "end", .mono = h.mono_labels};
  for (int64_t r = 0; r < h.values.rows && r < static_cast<int64_t>(h.row_labels.size()); r += L.row_step)
    s.text(L.left - 4, L.top + (static_cast<double>(r) + 0.5) * L.ch, h.row_labels[r], row_st);
  for (int64_t c = 0; c < h.values.cols && c < static_cast<int64_t>(h.col_labels.size()); c += L.col_step) {
    const double x = L.left + (static_cast<double>(c) + 0.5) * L.cw;
    if (text_width(h.col_labels[c], L.font) > L.room)
      s.text(x, L.top - 4, h.col_labels[c], {.size = L.font, .mono = h.mono_labels, .rotate = -90});
    else
      s.text(x, L.top - 4 - L.font / 2, h.col_labels[c], {.size = L.font, .anchor = "middle", .mono = h.mono_labels});
  }
  const double gw = L.cw * static_cast<double>(h.values.cols), gh = L.ch * static_cast<double>(h.values.rows);
  if (!h.col_axis.empty())
    s.text(L.left + gw / 2, L.top - L.label_h - 9, h.col_axis, {.size = 11, .anchor = "middle", .fill = "#555"});
  if (!h.row_axis.empty())
    s.text(18, L.top + gh / 2, h.row_axis, {.size = 11, .anchor = "middle", .fill = "#555", .rotate = -90});
}

void draw_cells(Svg& s, const Heatmap& h, const HeatLayout& L, double lo, double hi, const std::string& hatch) {
  const bool tooltips = !L.write_values && h.values.rows * h.values.cols <= 1600;
  const double gap = std::min(L.cw, L.ch) >= 8 ? 0.5 : 0.0;  // a hairline between cells when they are big enough
  for (int64_t r = 0; r < h.values.rows; ++r) {
    for (int64_t c = 0; c < h.values.cols; ++c) {
      const size_t i = static_cast<size_t>(r * h.values.cols + c);
      const double x = L.left + static_cast<double>(c) * L.cw, y = L.top + static_cast<double>(r) * L.ch;
      const double v = h.values.data[i];
      std::string tip;
      if (tooltips) {
        const std::string rl = r < static_cast<int64_t>(h.row_labels.size()) ? h.row_labels[r] : std::to_string(r);
        const std::string cl = c < static_cast<int64_t>(h.col_labels.size()) ? h.col_labels[c] : std::to_string(c);
        tip = fmt::format("{} {} '{}' -> {} {} '{}': {}", h.row_axis, r + h.row_offset, rl, h.col_axis,
                          c + h.col_offset, cl, format_number(v, 4));
      }
      if (!h.masked.empty() && h.masked[i]) {
        s.rect(x, y, L.cw - gap, L.ch - gap, "url(#" + hatch + ")", "class=\"cell masked\"",
               tooltips ? tip.substr(0, tip.rfind(':')) + ": masked" : "");
        continue;
      }
      const Rgb col = map_colour(h.cmap, v, lo, hi);
      s.rect(x, y, L.cw - gap, L.ch - gap, hex(col), "class=\"cell\"", tip);
      if (L.write_values)
        s.text(x + (L.cw - gap) / 2, y + (L.ch - gap) / 2, cell_text(v, h.value_decimals),
               {.size = std::min({10.0, L.cw * 0.36, L.ch * 0.6}),
                .anchor = "middle",
                .fill = luminance(col) > 0.4 ? "#111" : "#fff"});
    }
  }
  const double gw = L.cw * static_cast<double>(h.values.cols), gh = L.ch * static_cast<double>(h.values.rows);
  s.rect(L.left - 0.5, L.top - 0.5, gw + 0.5, gh + 0.5, "none", "stroke=\"#999\" stroke-width=\"0.5\"");
}

// A vertical colour bar (x, y .. y + height) with ticks.
void draw_colour_bar(Svg& s, const Heatmap& h, double x, double y, double height, double lo, double hi) {
  double a = lo, b = hi;
  if (h.cmap == ColourMap::Diverging) b = std::max(std::abs(lo), std::abs(hi)), a = -b;
  if (!(b > a)) b = a + 1;
  constexpr int kSteps = 48;
  for (int i = 0; i < kSteps; ++i) {
    const double v = b - (b - a) * (i + 0.5) / kSteps;
    s.rect(x, y + height * i / kSteps, 12, height / kSteps + 0.3, hex(map_colour(h.cmap, v, lo, hi)));
  }
  s.rect(x, y, 12, height, "none", "stroke=\"#999\" stroke-width=\"0.5\"");
  for (double t : nice_ticks(a, b, 5)) {
    const double ty = y + height * (b - t) / (b - a);
    s.line(x + 12, ty, x + 15, ty, "#666");
    s.text(x + 17, ty, format_number(t, 3), {.size = 9, .fill = "#444"});
  }
}

}  // namespace

std::string heatmap_svg(const Heatmap& h) {
  ATTO_CHECK(h.masked.empty() || h.masked.size() == h.values.data.size(),
             "heatmap '{}': mask has {} entries for a {} x {} matrix", h.title, h.masked.size(), h.values.rows,
             h.values.cols);
  Svg probe(0, 0);
  const double title_h = draw_title(probe, h.title, h.subtitle);
  const HeatLayout L = layout(h, title_h);
  const double gw = L.cw * static_cast<double>(h.values.cols), gh = L.ch * static_cast<double>(h.values.rows);
  const double bar_x = L.left + gw + 16;
  const double title_w = std::max(text_width(h.title, 14) * 0.9, text_width(h.subtitle, 11)) + 20;
  Svg s(std::max(bar_x + 50, title_w), L.top + std::max(gh, 60.0) + 12);
  draw_title(s, h.title, h.subtitle);
  const std::string hatch = (h.id.empty() ? std::string("hm") : h.id) + "-hatch";
  if (!h.masked.empty()) s.hatch_pattern(hatch);
  const auto [lo, hi] = value_range(h);
  draw_labels(s, h, L);
  draw_cells(s, h, L, lo, hi, hatch);
  draw_colour_bar(s, h, bar_x, L.top, std::max(gh, 60.0), lo, hi);
  return s.document(h.root);
}

}  // namespace atto::viz
