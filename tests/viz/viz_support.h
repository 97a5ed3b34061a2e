// Helpers shared by the report and figure tests.
#pragma once

#include <string>

namespace atto::test {

// How many times what occurs in s (occurrences that do not overlap).
inline size_t occurrences(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

}  // namespace atto::test
