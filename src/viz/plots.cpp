// Line plots, bar charts, scatter plots and grids of small multiples.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "base/error.h"
#include "viz/figures.h"

namespace atto::viz {

namespace {

// A plot area in px and the data ranges it shows.
struct Frame {
  double x0, y0, w, h;
  double xlo, xhi, ylo, yhi;
  double px(double x) const { return x0 + (xhi > xlo ? (x - xlo) / (xhi - xlo) : 0.5) * w; }
  double py(double y) const { return y0 + h - (yhi > ylo ? (y - ylo) / (yhi - ylo) : 0.5) * h; }
};

void draw_axes(Svg& s, const Frame& f, const std::string& x_label, const std::string& y_label) {
  for (double t : nice_ticks(f.ylo, f.yhi, 5)) {
    const double y = f.py(t);
    s.line(f.x0, y, f.x0 + f.w, y, "#e6e6e6");
    s.text(f.x0 - 5, y, format_number(t, 4), {.size = 10, .anchor = "end", .fill = "#444"});
  }
  for (double t : nice_ticks(f.xlo, f.xhi, std::max(2, static_cast<int>(f.w / 70)))) {
    const double x = f.px(t);
    s.line(x, f.y0 + f.h, x, f.y0 + f.h + 4, "#666");
    s.text(x, f.y0 + f.h + 14, format_number(t, 6), {.size = 10, .anchor = "middle", .fill = "#444"});
  }
  s.rect(f.x0, f.y0, f.w, f.h, "none", "stroke=\"#999\" stroke-width=\"0.8\"");
  if (!x_label.empty())
    s.text(f.x0 + f.w / 2, f.y0 + f.h + 30, x_label, {.size = 11, .anchor = "middle", .fill = "#333"});
  if (!y_label.empty())
    s.text(13, f.y0 + f.h / 2, y_label, {.size = 11, .anchor = "middle", .fill = "#333", .rotate = -90});
}

// Min and max of the finite values of v, widened by lo0/hi0 (NaN = nothing to widen).
void extend(double& lo, double& hi, const std::vector<double>& v) {
  for (double x : v)
    if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
}

double legend_row(Svg& s, const std::vector<Series>& series, double x, double y) {
  for (size_t i = 0; i < series.size(); ++i) {
    const std::string col = series[i].colour.empty() ? palette(i) : series[i].colour;
    s.line(x, y, x + 18, y, col, 2.5);
    if (series[i].markers) s.circle(x + 9, y, 3, col);
    s.text(x + 23, y, series[i].name, {.size = 11});
    x += 23 + text_width(series[i].name, 11) + 16;
  }
  return x;
}

}  // namespace

std::string line_plot_svg(const LinePlot& p) {
  Svg s(p.width, p.height);
  double top = draw_title(s, p.title, p.subtitle);
  if (p.legend && !p.series.empty()) {
    legend_row(s, p.series, 64, top + 4);
    top += 18;
  }
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (const Series& sr : p.series) {
    ATTO_CHECK(sr.x.size() == sr.y.size(), "line plot '{}': series '{}' has {} x and {} y values", p.title, sr.name,
               sr.x.size(), sr.y.size());
    extend(xlo, xhi, sr.x), extend(ylo, yhi, sr.y);
  }
  if (!std::isfinite(xlo)) xlo = 0, xhi = 1, ylo = 0, yhi = 1;
  if (p.y_from_zero) ylo = std::min(ylo, 0.0), yhi = std::max(yhi, 0.0);
  auto [ya, yb] = nice_range(ylo, yhi, 5);
  if (!std::isnan(p.ymin)) ya = p.ymin;
  if (!std::isnan(p.ymax)) yb = p.ymax;
  if (xhi == xlo) xhi = xlo + 1;
  double tick_w = 0;  // room for the y tick labels ("0.0015" needs more than "1")
  for (double t : nice_ticks(ya, yb, 5)) tick_w = std::max(tick_w, text_width(format_number(t, 4), 10));
  const double x0 = std::max(58.0, 30 + tick_w);
  Frame f{x0, top + 4, p.width - x0 - 16, p.height - top - 4 - 40, xlo, xhi, ya, yb};
  draw_axes(s, f, p.x_label, p.y_label);
  for (size_t i = 0; i < p.series.size(); ++i) {
    const Series& sr = p.series[i];
    const std::string col = sr.colour.empty() ? palette(i) : sr.colour;
    std::vector<std::pair<double, double>> pts;
    for (size_t k = 0; k < sr.x.size(); ++k)
      if (std::isfinite(sr.x[k]) && std::isfinite(sr.y[k])) pts.emplace_back(f.px(sr.x[k]), f.py(sr.y[k]));
    if (pts.size() > 1) s.polyline(pts, col, sr.markers ? 1.5 : 1.8);
    if (sr.markers || pts.size() == 1)
      for (size_t k = 0; k < sr.x.size(); ++k)
        if (std::isfinite(sr.x[k]) && std::isfinite(sr.y[k]))
          s.circle(f.px(sr.x[k]), f.py(sr.y[k]), 3, col, "",
                   fmt::format("{}: {} at {}", sr.name, format_number(sr.y[k], 5), format_number(sr.x[k], 6)));
  }
  return s.document(p.root);
}

namespace {

void bar_panel(Svg& s, const BarChart& b, const BarPanel& p, double x0, double y0, double ymax) {
  const double h = b.panel_height;
  s.text(x0, y0 - 8, p.name, {.size = 12, .fill = "#333", .bold = true});
  const Frame f{x0, y0, b.bar_width * static_cast<double>(b.labels.size()), h, 0, 1, 0, ymax};
  for (double t : nice_ticks(0, ymax, 4)) {
    s.line(f.x0, f.py(t), f.x0 + f.w, f.py(t), "#e6e6e6");
    s.text(f.x0 - 5, f.py(t), format_number(t, 3), {.size = 9, .anchor = "end", .fill = "#555"});
  }
  for (size_t i = 0; i < b.labels.size(); ++i) {
    const double cx = x0 + b.bar_width * (static_cast<double>(i) + 0.5);
    const double v = i < p.values.size() ? p.values[i] : 0.0;
    const bool gone = !p.removed.empty() && p.removed[i];
    if (gone) {  // a small grey cross on the baseline
      const double d = 4, by = y0 + h - 6;
      s.line(cx - d, by - d, cx + d, by + d, "#b0b0b0", 1.5);
      s.line(cx - d, by + d, cx + d, by - d, "#b0b0b0", 1.5);
    } else {
      const double top = f.py(std::max(0.0, v));
      s.rect(cx - b.bar_width * 0.36, top, b.bar_width * 0.72, y0 + h - top, palette(0), "class=\"bar\"",
             fmt::format("{}: {}", b.labels[i], format_number(v, 4)));
      if (v >= 0.005) s.text(cx, top - 6, fmt::format("{:.2f}", v), {.size = 9, .anchor = "middle", .fill = "#333"});
    }
    s.text(cx, y0 + h + 10, b.labels[i], {.size = 11, .anchor = "middle", .mono = true});
  }
  s.line(x0, y0 + h, x0 + f.w, y0 + h, "#666");
}

}  // namespace

std::string bar_chart_svg(const BarChart& b) {
  double ymax = 0;
  for (const BarPanel& p : b.panels) {
    ATTO_CHECK(p.values.size() == b.labels.size() && (p.removed.empty() || p.removed.size() == b.labels.size()),
               "bar chart '{}': panel '{}' has {} values for {} labels", b.title, p.name, p.values.size(),
               b.labels.size());
    for (double v : p.values)
      if (std::isfinite(v)) ymax = std::max(ymax, v);
  }
  ymax = nice_range(0, ymax > 0 ? ymax * 1.12 : 1, 4).second;  // headroom for the value labels
  const double x0 = 58, step = b.panel_height + 48;
  Svg probe(0, 0);
  const double top = draw_title(probe, b.title, b.subtitle) + 14;
  const double w =
      std::max(x0 + b.bar_width * static_cast<double>(b.labels.size()) + 20, text_width(b.subtitle, 11) + 24);
  Svg s(w, top + step * static_cast<double>(b.panels.size()) + 4);
  draw_title(s, b.title, b.subtitle);
  for (size_t i = 0; i < b.panels.size(); ++i)
    bar_panel(s, b, b.panels[i], x0, top + 6 + step * static_cast<double>(i), ymax);
  if (!b.y_label.empty())
    s.text(13, top + step * static_cast<double>(b.panels.size()) / 2, b.y_label,
           {.size = 11, .anchor = "middle", .fill = "#333", .rotate = -90});
  return s.document(b.root);
}

std::string scatter_svg(const Scatter& sc) {
  ATTO_CHECK(sc.x.size() == sc.y.size() && sc.labels.size() == sc.x.size(), "scatter '{}': {} x, {} y and {} labels",
             sc.title, sc.x.size(), sc.y.size(), sc.labels.size());
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  extend(xlo, xhi, sc.x), extend(ylo, yhi, sc.y);
  if (!std::isfinite(xlo)) xlo = ylo = -1, xhi = yhi = 1;
  // Equal scales on both axes (distances in the plot are distances in the projection).
  const double half = std::max({xhi - xlo, yhi - ylo, 1e-12}) / 2 * 1.08;
  const double cx = (xlo + xhi) / 2, cy = (ylo + yhi) / 2;
  Svg probe(0, 0);
  const double top = draw_title(probe, sc.title, sc.subtitle) + 4;
  Svg s(std::max(58 + sc.size + 40, text_width(sc.subtitle, 11) + 24), top + sc.size + 44);
  draw_title(s, sc.title, sc.subtitle);
  const Frame f{58, top, sc.size, sc.size, cx - half, cx + half, cy - half, cy + half};
  draw_axes(s, f, sc.x_label, sc.y_label);
  for (size_t i = 0; i < sc.x.size(); ++i) {
    if (!std::isfinite(sc.x[i]) || !std::isfinite(sc.y[i])) continue;
    const double x = f.px(sc.x[i]), y = f.py(sc.y[i]);
    s.circle(x, y, 3.2, palette(0), "fill-opacity=\"0.75\" class=\"point\"",
             fmt::format("{} ({}, {})", sc.labels[i], format_number(sc.x[i], 3), format_number(sc.y[i], 3)));
    s.text(x + 5, y - 5, sc.labels[i], {.size = 11, .mono = true});
  }
  return s.document(sc.root);
}

std::string grid_svg(const Grid& g) {
  const int cols = std::max(1, std::min<int>(g.columns, static_cast<int>(g.panels.size())));
  const int rows = (static_cast<int>(g.panels.size()) + cols - 1) / cols;
  Svg probe(0, 0);
  const double top = draw_title(probe, g.title, g.subtitle);
  const double w = std::max(cols * g.panel_width, text_width(g.subtitle, 11) + 24);
  Svg s(w, top + rows * g.panel_height);
  draw_title(s, g.title, g.subtitle);
  for (size_t i = 0; i < g.panels.size(); ++i)
    s.embed(static_cast<double>(i % cols) * g.panel_width, top + static_cast<double>(i / cols) * g.panel_height,
            g.panels[i]);
  return s.document(g.root);
}

}  // namespace atto::viz
