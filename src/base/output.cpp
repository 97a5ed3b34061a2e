#include "base/output.h"

#include <cerrno>
#include <cstring>
#include <iostream>

#include "base/error.h"

namespace atto {

namespace {

void escape_into(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7F)) {
      out += static_cast<char>(c);
    } else if (const size_t n = c >= 0x80 ? utf8_run(s, i) : 0; n > 0) {
      out.append(s.substr(i, n));
      i += n - 1;
    } else {
      ((out += "\\x") += kHex[c >> 4]) += kHex[c & 15];
    }
  }
}

}  // namespace

size_t utf8_run(std::string_view s, size_t p) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(p);
  const size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
  if (n == 0 || p + n > s.size()) return 0;
  for (size_t i = 1; i < n; ++i)
    if ((b(p + i) & 0xC0) != 0x80) return 0;
  if ((c == 0xE0 && b(p + 1) < 0xA0) || (c == 0xED && b(p + 1) >= 0xA0) || (c == 0xF0 && b(p + 1) < 0x90) ||
      (c == 0xF4 && b(p + 1) >= 0x90) || (c == 0xC2 && b(p + 1) < 0xA0))  // overlong, surrogate, > U+10FFFF, C1
    return 0;
  return n;
}

void check_written(std::FILE* f, std::string_view what) {
  errno = 0;
  const bool flushed = std::fflush(f) == 0;
  const int err = errno;
  if (flushed && !std::ferror(f)) return;
  std::clearerr(f);
  // An earlier failed write (whose errno is gone) leaves the error flag: say what it usually is.
  fail("cannot write to {}: {}", what,
       err != 0 ? std::strerror(err) : "a write failed (a full disk, a closed pipe or a device that refuses it)");
}

void check_stdout() {
  std::cout.flush();
  const bool cout_ok = !std::cout.fail();
  check_written(stdout, "standard output");
  if (!cout_ok) fail("cannot write to standard output: a write failed");
}

std::string terminal_safe(std::string_view msg, size_t max_bytes) {
  std::string out;
  if (msg.size() <= max_bytes) {
    escape_into(out, msg);
    return out;
  }
  // Keep the start (what failed) and the end (what to do), cut on UTF-8 boundaries.
  size_t head = max_bytes / 2, tail = msg.size() - max_bytes / 2;
  while (head > 0 && (static_cast<unsigned char>(msg[head]) & 0xC0) == 0x80) --head;
  while (tail < msg.size() && (static_cast<unsigned char>(msg[tail]) & 0xC0) == 0x80) ++tail;
  escape_into(out, msg.substr(0, head));
  out += fmt::format(" [... {} bytes cut ...] ", tail - head);
  escape_into(out, msg.substr(tail));
  return out;
}

}  // namespace atto
