#include "generate/stop_strings.h"

#include "base/error.h"

namespace atto::gen {

StopStrings::StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (size_t i = 0; i < stops_.size(); ++i)
    ATTO_CHECK(!stops_[i].empty(), "stop string {} is empty (a stop string needs at least one character)", i);
}

std::string StopStrings::push(std::string_view piece, bool& done) {
  done = false;
  held_ += piece;
  // The earliest complete stop string ends the text where it begins.
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    done = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Hold back the longest tail of the text that is a proper prefix of a stop string.
  size_t keep = 0;
  for (const std::string& s : stops_)
    for (size_t len = std::min(s.size() - 1, held_.size()); len > keep; --len)
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopStrings::finish() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace atto::gen
