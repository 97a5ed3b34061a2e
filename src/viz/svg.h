// atto/viz/svg.h: a tiny SVG writer, XML escaping, computed colour maps and axis ticks.
//
//   viz::Svg s(300, 200);                                  // width, height in px (user units)
//   s.rect(10, 10, 50, 20, "#3b528b");
//   s.text(35, 20, "<eos>", {.size = 12, .anchor = "middle"});   // escaped: &lt;eos&gt;
//   s.line(0, 190, 300, 190, "#888");
//   std::string file = s.document({.css_class = "atto-attn", .data = {{"layer", "0"}}});
//   std::string inline_markup = s.element({...});         // the same without the XML declaration
//
// Conventions
// - Coordinates are SVG user units (px), origin top-left, y grows downwards. Coordinates are
//   written with at most one decimal ("12", "12.5"): figures are pictures, the exact numbers
//   live elsewhere (the report's JSON).
// - Every string that becomes text or an attribute goes through escape_xml: &, <, >, " and '
//   become entities, and control characters (invalid in XML 1.0) become visible escapes
//   ("\x0B"), so a token label can never break the document.
// - Colour maps are computed, not tabulated from a file: viridis() is a polynomial fit of
//   matplotlib's viridis (perceptually uniform, dark purple at 0, yellow at 1); diverging() runs
//   blue (-1) -> white (0) -> red (+1) for signed values.
// - An element that needs a document-unique id (a hatch pattern) takes a prefix from the
//   caller, so many SVGs can be inlined into one HTML page without clashing ids.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace atto::viz {

// ---- text -----------------------------------------------------------------------------------

// XML-escapes s (UTF-8 passes through; control characters become visible "\xNN").
std::string escape_xml(std::string_view s);
// A number with `digits` significant digits, no trailing zeros, no exponent for common ranges:
// 0.5, 12.3, 1.2e-05.
std::string format_number(double v, int digits = 3);

// ---- colours --------------------------------------------------------------------------------

struct Rgb {
  double r = 0, g = 0, b = 0;  // each in [0, 1]
};
Rgb viridis(double t);           // t in [0, 1] (clamped)
Rgb diverging(double t);         // t in [-1, 1] (clamped): blue, white, red
std::string hex(const Rgb& c);   // "#rrggbb"
double luminance(const Rgb& c);  // relative luminance in [0, 1]; > 0.45 wants dark text
// Categorical colours for lines and series (Tableau 10), cycling.
std::string palette(size_t i);

enum class ColourMap { Viridis, Diverging };
// Value v on the scale [lo, hi]: viridis maps lo..hi to 0..1; diverging maps
// -max(|lo|, |hi|)..+max(|lo|, |hi|) to -1..1 so that 0 is white.
Rgb map_colour(ColourMap cmap, double v, double lo, double hi);

// ---- ticks ----------------------------------------------------------------------------------

// "Nice" tick values (steps of 1, 2 or 5 x 10^k) covering [lo, hi], at most about max_ticks.
std::vector<double> nice_ticks(double lo, double hi, int max_ticks = 6);
// Widens [lo, hi] to the outer nice ticks (and to a unit range when lo == hi).
std::pair<double, double> nice_range(double lo, double hi, int max_ticks = 6);

// ---- the writer ---------------------------------------------------------------------------

struct TextStyle {
  double size = 11;
  const char* anchor = "start";  // start | middle | end
  const char* fill = "#222";
  bool bold = false;
  bool mono = false;     // monospace (token labels)
  double rotate = 0;     // degrees, around (x, y)
  bool centre_v = true;  // vertically centred on y (dy = 0.35em) instead of on the baseline
};

struct RootAttrs {
  std::string css_class;                                  // class="..." on the root <svg>
  std::vector<std::pair<std::string, std::string>> data;  // data-<key>="value"
  std::string title;                                      // <title> (tooltip, accessibility)
};

class Svg {
 public:
  Svg(double width, double height);

  double width() const { return w_; }
  double height() const { return h_; }

  // extra: raw attributes appended to the element (caller-escaped), e.g. "class=\"cell\"".
  // tooltip: shown on hover (a <title> child), escaped here; empty = none.
  void rect(double x, double y, double w, double h, std::string_view fill, std::string_view extra = "",
            std::string_view tooltip = "");
  void text(double x, double y, std::string_view s, const TextStyle& st = {});
  void line(double x1, double y1, double x2, double y2, std::string_view stroke, double width = 1,
            std::string_view extra = "");
  void polyline(const std::vector<std::pair<double, double>>& pts, std::string_view stroke, double width = 1.5);
  void circle(double x, double y, double r, std::string_view fill, std::string_view extra = "",
              std::string_view tooltip = "");
  // A diagonal hatch pattern with the given id (for masked cells): fill="url(#id)".
  void hatch_pattern(std::string_view id);
  // A complete SVG (from element()) placed at (x, y) as a nested <svg>.
  void embed(double x, double y, std::string_view svg_element);
  void raw(std::string_view markup) { body_ += markup; }

  // The root <svg> element (xmlns, size, viewBox, font) with defs and body.
  std::string element(const RootAttrs& root = {}) const;
  // element() with the XML declaration: a standalone .svg file.
  std::string document(const RootAttrs& root = {}) const;

 private:
  double w_, h_;
  std::string defs_, body_;
};

// Strips a leading "<?xml ...?>" declaration (to inline a standalone SVG into HTML).
std::string_view strip_xml_declaration(std::string_view svg);

}  // namespace atto::viz
