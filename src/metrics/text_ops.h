// atto/metrics/text_ops.h: the few Python string operations that sacreBLEU's metrics rely on,
// reproduced on UTF-8 text so that scores match sacreBLEU's to the last digit.
//
//   auto words = atto::metrics::text::split("  a\u00A0b  c ");   // {"a", "b", "c"}
//   std::string s = atto::metrics::text::lower("ÉCOLE");          // "école"
//
// Conventions
// - Inputs are valid UTF-8 (the metrics validate their inputs first); views returned point
//   into the input.
// - "Whitespace" is Python's str.isspace() set, which str.split(), str.strip() and
//   str.rstrip() use: U+0009-U+000D, U+001C-U+001F, U+0020, U+0085, U+00A0, U+1680,
//   U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
// - lower() is glibc's simple lowercase mapping (C.UTF-8 locale) plus Python's one
//   multi-character rule U+0130 'İ' -> "i̇" (U+0069 U+0307). Python's final-sigma rule
//   (word-final 'Σ' -> 'ς') is not applied: such text lowercases to 'σ' here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace atto::metrics::text {

// Python's str.isspace() for one code point.
bool is_space(char32_t cp);

// Python's str.split() with no argument: the runs of non-whitespace, in order.
std::vector<std::string_view> split(std::string_view valid);

// Python's str.rstrip() with no argument.
std::string_view rstrip(std::string_view valid);

// Python's "".join(s.split()): the text with every whitespace character removed.
std::string remove_whitespace(std::string_view valid);

// Python's str.lower(), with the exception noted above.
std::string lower(std::string_view valid);

// Byte offsets of the code points of `valid`, plus valid.size() at the end
// (so code point i is valid.substr(b[i], b[i + 1] - b[i])).
std::vector<size_t> code_point_offsets(std::string_view valid);

}  // namespace atto::metrics::text
