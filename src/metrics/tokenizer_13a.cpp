#include "metrics/tokenizer_13a.h"

#include "metrics/text_ops.h"

namespace atto::metrics {

namespace {

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t start = 0;
  for (size_t hit; (hit = s.find(from, start)) != std::string::npos; start = hit + from.size()) {
    out.append(s, start, hit - start);
    out += to;
  }
  out.append(s, start);
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_period_or_comma(char c) { return c == '.' || c == ','; }

// The character class of step 4: [\{-\~\[-\` -\&\(-\+\:-\@\/].
bool is_split_symbol(char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') || (c >= '(' && c <= '+') ||
         (c >= ':' && c <= '@') || c == '/';
}

// re.sub of a two-character pattern (a)(b) -> replacement built from a and b, scanning left to
// right and resuming after each match, as Python does. Working on bytes gives the same result
// as on code points here: every class involved is ASCII or the negation of an ASCII class, and
// a UTF-8 continuation byte can never start a match.
template <typename Match, typename Replace>
std::string sub_pairs(const std::string& s, Match match, Replace replace) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && match(s[i], s[i + 1])) {
      replace(out, s[i], s[i + 1]);
      i += 2;
    } else {
      out += s[i++];
    }
  }
  return out;
}

}  // namespace

std::string tokenize_13a(std::string_view input) {
  std::string line(input);
  line = replace_all(std::move(line), "<skipped>", "");
  line = replace_all(std::move(line), "-\n", "");
  line = replace_all(std::move(line), "\n", " ");
  line = replace_all(std::move(line), "&quot;", "\"");
  line = replace_all(std::move(line), "&amp;", "&");
  line = replace_all(std::move(line), "&lt;", "<");
  line = replace_all(std::move(line), "&gt;", ">");

  std::string padded = " ";
  padded.reserve(line.size() * 2 + 2);
  for (char c : line) {  // step 4
    if (is_split_symbol(c)) {
      padded += ' ';
      padded += c;
      padded += ' ';
    } else {
      padded += c;
    }
  }
  padded += ' ';

  std::string s = sub_pairs(
      padded, [](char a, char b) { return !is_digit(a) && is_period_or_comma(b); },
      [](std::string& o, char a, char b) {
        o += a;
        o += ' ';
        o += b;
        o += ' ';
      });
  s = sub_pairs(
      s, [](char a, char b) { return is_period_or_comma(a) && !is_digit(b); },
      [](std::string& o, char a, char b) {
        o += ' ';
        o += a;
        o += ' ';
        o += b;
      });
  s = sub_pairs(
      s, [](char a, char b) { return is_digit(a) && b == '-'; },
      [](std::string& o, char a, char b) {
        o += a;
        o += ' ';
        o += b;
        o += ' ';
      });

  std::string out;
  out.reserve(s.size());
  for (std::string_view w : text::split(s)) {
    if (!out.empty()) out += ' ';
    out += w;
  }
  return out;
}

}  // namespace atto::metrics
