#include "base/json.h"

#include <algorithm>

#include "base/error.h"
#include "base/output.h"

namespace atto::json_util {

namespace {

// Line and column (1-based) of byte offset pos in text.
std::pair<size_t, size_t> line_col(std::string_view text, size_t pos) {
  pos = std::min(pos, text.size());
  size_t line = 1, col = 1;
  for (size_t i = 0; i < pos; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

// The first byte offset at which the nesting passes max_depth, or npos.
size_t too_deep_at(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped byte cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > max_depth) return i;
        break;
      case ']':
      case '}':
        --depth;  // unbalanced text is the parser's error to report
        break;
      default:
        break;
    }
  }
  return std::string_view::npos;
}

template <typename J>
J parse_as(std::string_view text, std::string_view what, int max_depth) {
  check_depth(text, what, max_depth);
  try {
    return J::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is the 1-based position of the error.
    const auto [line, col] = line_col(text, e.byte == 0 ? 0 : e.byte - 1);
    fail("{}: not valid JSON (line {}, column {}): {}", what, line, col, e.what());
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for a double
    fail("{}: not valid JSON: {}", what, e.what());
  }
}

template <typename J>
std::string excerpt_of(const J& v, size_t max_chars) {
  std::string s;
  try {
    s = v.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
  } catch (const std::exception&) {
    s = "(a value that cannot be shown)";
  }
  // dump() escapes control bytes inside strings; keys and everything else are printable, so the
  // only work left is the length (cut on a UTF-8 boundary).
  if (s.size() <= max_chars) return s;
  size_t cut = max_chars;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "...";
}

}  // namespace

void check_depth(std::string_view text, std::string_view what, int max_depth) {
  const size_t at = too_deep_at(text, max_depth);
  if (at == std::string_view::npos) return;
  const auto [line, col] = line_col(text, at);
  fail("{}: JSON nested more than {} levels deep (line {}, column {}); atto's files and requests never need that "
       "many: check that this is the file you meant",
       what, max_depth, line, col);
}

nlohmann::json parse(std::string_view text, std::string_view what, int max_depth) {
  return parse_as<nlohmann::json>(text, what, max_depth);
}

nlohmann::ordered_json parse_ordered(std::string_view text, std::string_view what, int max_depth) {
  return parse_as<nlohmann::ordered_json>(text, what, max_depth);
}

nlohmann::json parse_or_discard(std::string_view text, int max_depth) {
  if (too_deep_at(text, max_depth) != std::string_view::npos) return nlohmann::json(nlohmann::json::value_t::discarded);
  try {
    return nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  } catch (const nlohmann::json::exception&) {
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
}

std::string dump(const nlohmann::json& v) {
  return v.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

std::string excerpt(const nlohmann::json& v, size_t max_chars) { return excerpt_of(v, max_chars); }
std::string excerpt(const nlohmann::ordered_json& v, size_t max_chars) { return excerpt_of(v, max_chars); }

std::string printable(std::string_view bytes, size_t max_chars) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  size_t shown = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (shown >= max_chars) {
      out += "...";
      break;
    }
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c == '\\' || c == '"') {
      (out += '\\') += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else if (const size_t n = c >= 0x80 ? utf8_run(bytes, i) : 0; n > 0) {
      out.append(bytes.substr(i, n));
      i += n - 1;
    } else {
      ((out += "\\x") += kHex[c >> 4]) += kHex[c & 15];
    }
    ++shown;
  }
  return out + "\"";
}

}  // namespace atto::json_util
