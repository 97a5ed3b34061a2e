#include "tokenize/utf8.h"

#include <algorithm>

#include "base/error.h"

namespace atto::utf8 {

namespace {

bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

std::string hex_bytes(std::string_view bytes, size_t pos, size_t n) {
  std::string s;
  for (size_t i = pos; i < pos + n && i < bytes.size(); ++i) {
    if (!s.empty()) s += ' ';
    s += fmt::format("0x{:02X}", static_cast<unsigned char>(bytes[i]));
  }
  return s;
}

// Length of the sequence announced by a start byte, or 0 for a byte that cannot start one.
int sequence_length(unsigned char b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// Checks the sequence at bytes[pos]. On success returns its length and sets cp; on failure
// returns 0 and sets reason.
int check_one(std::string_view bytes, size_t pos, char32_t& cp, std::string& reason) {
  const auto b0 = static_cast<unsigned char>(bytes[pos]);
  const int len = sequence_length(b0);
  if (len == 0) {
    reason = is_continuation(b0) ? fmt::format("unexpected continuation byte 0x{:02X}", b0)
                                 : fmt::format("invalid byte 0x{:02X}", b0);
    return 0;
  }
  if (len == 1) {
    cp = b0;
    return 1;
  }
  for (int k = 1; k < len; ++k) {
    if (pos + k >= bytes.size() || !is_continuation(static_cast<unsigned char>(bytes[pos + k]))) {
      const char* where = pos + k >= bytes.size() ? "the end of the input" : "a non-continuation byte";
      reason = fmt::format("truncated sequence {} (a {}-byte sequence cut short by {})", hex_bytes(bytes, pos, k), len,
                           where);
      return 0;
    }
  }
  char32_t v = b0 & (0x7F >> len);
  for (int k = 1; k < len; ++k) v = (v << 6) | (static_cast<unsigned char>(bytes[pos + k]) & 0x3F);
  static constexpr char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (v < kMin[len]) {
    reason = fmt::format("overlong encoding {} of U+{:04X}", hex_bytes(bytes, pos, len), static_cast<uint32_t>(v));
    return 0;
  }
  if (v >= 0xD800 && v <= 0xDFFF) {
    reason =
        fmt::format("encoded UTF-16 surrogate U+{:04X} ({})", static_cast<uint32_t>(v), hex_bytes(bytes, pos, len));
    return 0;
  }
  if (v > 0x10FFFF) {
    reason = fmt::format("code point U+{:X} above U+10FFFF ({})", static_cast<uint32_t>(v), hex_bytes(bytes, pos, len));
    return 0;
  }
  cp = v;
  return len;
}

bool is_printable(char32_t cp) {
  if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F)) return false;
  return cp != 0x2028 && cp != 0x2029 && cp != 0xFEFF;
}

}  // namespace

bool is_scalar_value(char32_t cp) { return cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF); }

std::optional<Issue> find_invalid(std::string_view bytes) {
  int64_t line = 1;
  size_t pos = 0;
  std::string reason;
  while (pos < bytes.size()) {
    const auto b = static_cast<unsigned char>(bytes[pos]);
    if (b < 0x80) {  // fast path for ASCII
      line += (b == '\n');
      ++pos;
      continue;
    }
    char32_t cp = 0;
    const int len = check_one(bytes, pos, cp, reason);
    if (len == 0) return Issue{pos, line, reason};
    pos += static_cast<size_t>(len);
  }
  return std::nullopt;
}

void validate(std::string_view bytes, std::string_view what) {
  if (auto issue = find_invalid(bytes)) {
    fail(
        "{} is not valid UTF-8: {} at byte offset {} (line {}); save it as UTF-8 "
        "(e.g. iconv -f latin1 -t utf-8)",
        what, issue->reason, issue->byte_offset, issue->line);
  }
}

std::vector<char32_t> decode(std::string_view bytes, std::string_view what) {
  validate(bytes, what);
  std::vector<char32_t> out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) out.push_back(next(bytes, pos));
  return out;
}

char32_t next(std::string_view valid, size_t& pos) {
  const auto b0 = static_cast<unsigned char>(valid[pos]);
  const int len = std::max(sequence_length(b0), 1);
  char32_t v = len == 1 ? b0 : (b0 & (0x7F >> len));
  for (int k = 1; k < len && pos + k < valid.size(); ++k) {
    v = (v << 6) | (static_cast<unsigned char>(valid[pos + k]) & 0x3F);
  }
  pos += static_cast<size_t>(len);
  return v;
}

size_t count(std::string_view valid) {
  size_t n = 0;
  for (char c : valid) n += !is_continuation(static_cast<unsigned char>(c));
  return n;
}

void append(std::string& out, char32_t cp) {
  ATTO_CHECK(is_scalar_value(cp), "cannot encode U+{:04X} as UTF-8: not a Unicode scalar value",
             static_cast<uint32_t>(cp));
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string encode(char32_t cp) {
  std::string s;
  append(s, cp);
  return s;
}

std::string encode(std::span<const char32_t> cps) {
  std::string s;
  s.reserve(cps.size());
  for (char32_t cp : cps) append(s, cp);
  return s;
}

std::string display(char32_t cp) {
  switch (cp) {
    case '\n': return "\\n";
    case '\t': return "\\t";
    case '\r': return "\\r";
    case '\\': return "\\\\";
    default: break;
  }
  if (!is_scalar_value(cp)) return fmt::format("\\u{{{:X}}}", static_cast<uint32_t>(cp));
  if (is_printable(cp)) return encode(cp);
  if (cp < 0x80) return fmt::format("\\x{:02X}", static_cast<uint32_t>(cp));
  return fmt::format("\\u{{{:X}}}", static_cast<uint32_t>(cp));
}

std::string describe(char32_t cp) { return fmt::format("'{}' (U+{:04X})", display(cp), static_cast<uint32_t>(cp)); }

std::string quote(std::string_view valid, size_t max_code_points) {
  std::string s = "\"";
  size_t pos = 0, n = 0;
  while (pos < valid.size()) {
    if (n == max_code_points) {
      s += "...";
      break;
    }
    s += display(next(valid, pos));
    ++n;
  }
  return s + "\"";
}

}  // namespace atto::utf8
