#include "metrics/text_ops.h"

#include <locale.h>
#include <wctype.h>

#include "tokenize/utf8.h"

namespace atto::metrics::text {

bool is_space(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

std::vector<std::string_view> split(std::string_view s) {
  std::vector<std::string_view> out;
  size_t pos = 0, start = std::string_view::npos;
  while (pos < s.size()) {
    const size_t here = pos;
    const bool space = is_space(utf8::next(s, pos));
    if (space && start != std::string_view::npos) {
      out.push_back(s.substr(start, here - start));
      start = std::string_view::npos;
    } else if (!space && start == std::string_view::npos) {
      start = here;
    }
  }
  if (start != std::string_view::npos) out.push_back(s.substr(start));
  return out;
}

std::string_view rstrip(std::string_view s) {
  size_t pos = 0, end = 0;
  while (pos < s.size()) {
    if (!is_space(utf8::next(s, pos))) end = pos;
  }
  return s.substr(0, end);
}

std::string remove_whitespace(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::string_view w : split(s)) out += w;
  return out;
}

namespace {

// The C.UTF-8 locale for towlower_l, created once (nullptr if the C library lacks it).
locale_t utf8_locale() {
  static const locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
  return loc;
}

}  // namespace

std::string lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const locale_t loc = utf8_locale();
  size_t pos = 0;
  while (pos < s.size()) {
    const char32_t cp = utf8::next(s, pos);
    if (cp < 0x80) {
      out += static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
    } else if (cp == 0x130) {  // Python: 'İ'.lower() == 'i\u0307'
      out += 'i';
      utf8::append(out, 0x307);
    } else {
      const auto low = loc ? static_cast<char32_t>(towlower_l(static_cast<wint_t>(cp), loc)) : cp;
      utf8::append(out, utf8::is_scalar_value(low) ? low : cp);
    }
  }
  return out;
}

std::vector<size_t> code_point_offsets(std::string_view s) {
  std::vector<size_t> b;
  b.reserve(s.size() + 1);
  size_t pos = 0;
  while (pos < s.size()) {
    b.push_back(pos);
    utf8::next(s, pos);
  }
  b.push_back(s.size());
  return b;
}

}  // namespace atto::metrics::text
