#include "viz/svg.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

namespace atto::viz {

// ---- text -----------------------------------------------------------------------------------

std::string escape_xml(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 forbids C0 controls (but tab, LF, CR) and DEL is unreadable: show them.
        if (c < 0x20 || c == 0x7F)
          out += fmt::format("\\x{:02X}", c);
        else
          out += ch;
    }
  }
  return out;
}

std::string format_number(double v, int digits) {
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  if (v == 0.0) return "0";
  return fmt::format("{:.{}g}", v, digits);
}

// ---- colours --------------------------------------------------------------------------------

namespace {
double clamp01(double t) { return std::isnan(t) ? 0.0 : std::clamp(t, 0.0, 1.0); }

Rgb lerp(const Rgb& a, const Rgb& b, double t) {
  return {a.r + (b.r - a.r) * t, a.g + (b.g - a.g) * t, a.b + (b.b - a.b) * t};
}
}  // namespace

Rgb viridis(double t) {
  // Degree-6 polynomial fit of matplotlib's viridis (per channel, Horner form).
  static constexpr std::array<std::array<double, 3>, 7> c = {{
      {0.2777273272234177, 0.005407344544966578, 0.3340998053353061},
      {0.1050930431085774, 1.404613529898575, 1.384590162594685},
      {-0.3308618287255563, 0.214847559468213, 0.09509516302823659},
      {-4.634230498983486, -5.799100973351585, -19.33244095627987},
      {6.228269936347081, 14.17993336680509, 56.69055260068105},
      {4.776384997670288, -13.74514537774601, -65.35303263337234},
      {-5.435455855934631, 4.645852612178535, 26.3124352495832},
  }};
  t = clamp01(t);
  std::array<double, 3> v{};
  for (int ch = 0; ch < 3; ++ch) {
    double acc = c[6][ch];
    for (int k = 5; k >= 0; --k) acc = c[k][ch] + t * acc;
    v[ch] = clamp01(acc);
  }
  return {v[0], v[1], v[2]};
}

Rgb diverging(double t) {
  // ColorBrewer RdBu (5 stops), reversed so that negative is blue, interpolated linearly.
  static const std::array<Rgb, 5> stops = {{
      {0x21 / 255.0, 0x66 / 255.0, 0xac / 255.0},
      {0x92 / 255.0, 0xc5 / 255.0, 0xde / 255.0},
      {0xf7 / 255.0, 0xf7 / 255.0, 0xf7 / 255.0},
      {0xf4 / 255.0, 0xa5 / 255.0, 0x82 / 255.0},
      {0xb2 / 255.0, 0x18 / 255.0, 0x2b / 255.0},
  }};
  const double u = clamp01((std::isnan(t) ? 0.0 : t + 1.0) / 2.0) * 4.0;  // [0, 4]
  const int i = std::min(3, static_cast<int>(u));
  return lerp(stops[i], stops[i + 1], u - i);
}

std::string hex(const Rgb& c) {
  auto byte = [](double v) { return static_cast<int>(std::lround(clamp01(v) * 255.0)); };
  return fmt::format("#{:02x}{:02x}{:02x}", byte(c.r), byte(c.g), byte(c.b));
}

double luminance(const Rgb& c) {
  auto lin = [](double v) { return v <= 0.04045 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4); };
  return 0.2126 * lin(c.r) + 0.7152 * lin(c.g) + 0.0722 * lin(c.b);
}

std::string palette(size_t i) {
  static constexpr std::array<const char*, 10> p = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return p[i % p.size()];
}

Rgb map_colour(ColourMap cmap, double v, double lo, double hi) {
  if (cmap == ColourMap::Viridis) return viridis(hi > lo ? (v - lo) / (hi - lo) : 0.5);
  const double m = std::max(std::abs(lo), std::abs(hi));
  return diverging(m > 0 ? v / m : 0.0);
}

// ---- ticks ----------------------------------------------------------------------------------

namespace {
double nice_step(double range, int max_ticks) {
  const double raw = range / std::max(1, max_ticks);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0) * mag;
}
}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int max_ticks) {
  if (!(std::isfinite(lo) && std::isfinite(hi))) return {};
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) return {lo};
  const double step = nice_step(hi - lo, max_ticks);
  std::vector<double> t;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    t.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  return t;
}

std::pair<double, double> nice_range(double lo, double hi, int max_ticks) {
  if (!(std::isfinite(lo) && std::isfinite(hi))) return {0.0, 1.0};
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {
    const double d = lo == 0.0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= d, hi += d;
  }
  const double step = nice_step(hi - lo, max_ticks);
  return {std::floor(lo / step + 1e-9) * step, std::ceil(hi / step - 1e-9) * step};
}

// ---- the writer ---------------------------------------------------------------------------

namespace {
// A coordinate with at most one decimal and no trailing ".0" (files stay small: a heatmap of
// 64 x 64 cells writes 4096 rects).
std::string n1(double v) {
  std::string s = fmt::format("{:.1f}", v);
  if (s.ends_with(".0")) s.resize(s.size() - 2);
  if (s == "-0") s = "0";
  return s;
}
}  // namespace

Svg::Svg(double width, double height) : w_(width), h_(height) {}

void Svg::rect(double x, double y, double w, double h, std::string_view fill, std::string_view extra,
               std::string_view tooltip) {
  body_ +=
      fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"", n1(x), n1(y), n1(w), n1(h), fill);
  if (!extra.empty()) body_ += fmt::format(" {}", extra);
  if (tooltip.empty())
    body_ += "/>";
  else
    body_ += fmt::format("><title>{}</title></rect>", escape_xml(tooltip));
}

void Svg::text(double x, double y, std::string_view s, const TextStyle& st) {
  body_ += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"{}\" fill=\"{}\"", n1(x), n1(y), st.size, st.fill);
  if (std::string_view(st.anchor) != "start") body_ += fmt::format(" text-anchor=\"{}\"", st.anchor);
  if (st.centre_v) body_ += " dy=\"0.35em\"";
  if (st.bold) body_ += " font-weight=\"bold\"";
  if (st.mono) body_ += " font-family=\"DejaVu Sans Mono, Menlo, Consolas, monospace\"";
  if (st.rotate != 0) body_ += fmt::format(" transform=\"rotate({} {} {})\"", st.rotate, n1(x), n1(y));
  body_ += fmt::format(">{}</text>", escape_xml(s));
}

void Svg::line(double x1, double y1, double x2, double y2, std::string_view stroke, double width,
               std::string_view extra) {
  body_ += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"{}\"", n1(x1),
                       n1(y1), n1(x2), n1(y2), stroke, width);
  if (!extra.empty()) body_ += fmt::format(" {}", extra);
  body_ += "/>";
}

void Svg::polyline(const std::vector<std::pair<double, double>>& pts, std::string_view stroke, double width) {
  body_ += "<polyline fill=\"none\" stroke-linejoin=\"round\" points=\"";
  for (size_t i = 0; i < pts.size(); ++i)
    body_ += fmt::format("{}{},{}", i ? " " : "", n1(pts[i].first), n1(pts[i].second));
  body_ += fmt::format("\" stroke=\"{}\" stroke-width=\"{}\"/>", stroke, width);
}

void Svg::circle(double x, double y, double r, std::string_view fill, std::string_view extra,
                 std::string_view tooltip) {
  body_ += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\"", n1(x), n1(y), r, fill);
  if (!extra.empty()) body_ += fmt::format(" {}", extra);
  if (tooltip.empty())
    body_ += "/>";
  else
    body_ += fmt::format("><title>{}</title></circle>", escape_xml(tooltip));
}

void Svg::hatch_pattern(std::string_view id) {
  defs_ += fmt::format(
      "<pattern id=\"{}\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
      "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f3f3f3\"/>"
      "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#c8c8c8\" stroke-width=\"2\"/></pattern>",
      escape_xml(id));
}

void Svg::embed(double x, double y, std::string_view svg_element) {
  svg_element = strip_xml_declaration(svg_element);
  // Insert the position into the nested root: "<svg " -> "<svg x=.. y=.. ".
  constexpr std::string_view open = "<svg ";
  if (svg_element.substr(0, open.size()) != open) {
    body_ += svg_element;
    return;
  }
  body_ += fmt::format("<svg x=\"{}\" y=\"{}\" ", n1(x), n1(y));
  body_ += svg_element.substr(open.size());
}

std::string Svg::element(const RootAttrs& root) const {
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" "
      "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\"",
      w_, h_);
  if (!root.css_class.empty()) s += fmt::format(" class=\"{}\"", escape_xml(root.css_class));
  for (const auto& [k, v] : root.data) s += fmt::format(" data-{}=\"{}\"", escape_xml(k), escape_xml(v));
  s += ">";
  if (!root.title.empty()) s += fmt::format("<title>{}</title>", escape_xml(root.title));
  if (!defs_.empty()) s += "<defs>" + defs_ + "</defs>";
  s += fmt::format("<rect width=\"{:.0f}\" height=\"{:.0f}\" fill=\"#ffffff\"/>", w_, h_);
  s += body_;
  s += "</svg>";
  return s;
}

std::string Svg::document(const RootAttrs& root) const {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + element(root) + "\n";
}

std::string_view strip_xml_declaration(std::string_view svg) {
  if (svg.substr(0, 5) == "<?xml") {
    const size_t end = svg.find("?>");
    if (end != std::string_view::npos) svg.remove_prefix(end + 2);
  }
  while (!svg.empty() && (svg.front() == '\n' || svg.front() == ' ')) svg.remove_prefix(1);
  while (!svg.empty() && svg.back() == '\n') svg.remove_suffix(1);
  return svg;
}

}  // namespace atto::viz
