// atto/base/duration.h: wall-clock durations as people write them (--time 1h30m) and read them.
#pragma once

#include <string>

namespace atto {

std::string format_duration(double seconds);  // "1h02m", "3m05s", "12.3s"
// "90", "90s", "5m", "1h30m", "2.5m" -> seconds (> 0); anything else throws atto::Error naming `what`.
double parse_duration(const std::string& text, const std::string& what);

}  // namespace atto
