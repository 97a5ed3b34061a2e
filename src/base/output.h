// atto/base/output.h: what atto prints is checked, and what it echoes is safe for a terminal.
//
//   atto::check_stdout();                       // throws if any write to stdout failed
//   fputs(atto::terminal_safe(msg).c_str(), stderr);
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace atto {

// Flushes stdout (C stdio and std::cout) and throws atto::Error ("cannot write to standard
// output: No space left on device") when that or any earlier write to it failed.
void check_stdout();

// Flushes `f` and throws atto::Error naming `what` (a path) when that or an earlier write failed.
void check_written(std::FILE* f, std::string_view what);

// The length of the valid UTF-8 sequence of 2-4 bytes starting at s[p] (not overlong, not a
// surrogate, at most U+10FFFF, not a C1 control), or 0.
size_t utf8_run(std::string_view s, size_t p);

// A message made safe to print: every control byte but newline and tab escaped (\x1b, \x00...),
// invalid UTF-8 bytes escaped, and at most max_bytes (the middle cut out, marked).
std::string terminal_safe(std::string_view msg, size_t max_bytes = 4096);

}  // namespace atto
