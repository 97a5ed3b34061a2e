#include "base/duration.h"

#include <cmath>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "base/error.h"

namespace atto {

double parse_duration(const std::string& text, const std::string& what) {
  double total = 0.0;
  size_t i = 0;
  bool any = false;
  while (i < text.size()) {
    size_t used = 0;
    double v = 0.0;
    try {
      v = std::stod(text.substr(i), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    ATTO_CHECK(used > 0 && std::isfinite(v) && v >= 0.0 && text[i] != '+' && text[i] != '-',
               "{} '{}' is not a duration: use seconds or units, e.g. 90, 90s, 5m, 1h30m", what, text);
    i += used;
    double unit = 1.0;
    if (i < text.size()) {
      const char u = text[i++];
      ATTO_CHECK(u == 's' || u == 'm' || u == 'h', "{} '{}': unknown unit '{}' (use s, m or h)", what, text, u);
      unit = u == 'h' ? 3600.0 : u == 'm' ? 60.0 : 1.0;
    } else {
      ATTO_CHECK(!any, "{} '{}': a number without a unit must stand alone (seconds)", what, text);
    }
    total += v * unit;
    any = true;
  }
  ATTO_CHECK(any && total > 0.0, "{} '{}' must be a positive duration, e.g. 5m", what, text);
  return total;
}

std::string format_duration(double s) {
  if (!(s >= 0)) return "?";
  if (s < 60) return fmt::format("{:.1f}s", s);
  const auto total = static_cast<int64_t>(s + 0.5);
  if (total < 3600) return fmt::format("{}m{:02}s", total / 60, total % 60);
  return fmt::format("{}h{:02}m", total / 3600, (total % 3600) / 60);
}

}  // namespace atto
