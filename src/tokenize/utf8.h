// atto/tokenize/utf8.h: strict UTF-8 decoding and encoding of Unicode code points.
//
//   std::vector<char32_t> cps = atto::utf8::decode("café", "prompt");   // {'c','a','f',U+00E9}
//   std::string s = atto::utf8::encode(cps);                            // "café" again
//   atto::utf8::validate(bytes, "data file 'names.txt'");               // throws atto::Error
//   atto::utf8::describe(U'\n');                                        // "'\n' (U+000A)"
//
// Conventions
// - Strict (RFC 3629): rejected are stray continuation bytes, the bytes 0xC0, 0xC1, 0xF5-0xFF,
//   overlong encodings, UTF-16 surrogates (U+D800-U+DFFF), code points above U+10FFFF and
//   sequences cut short (by the end of the input or by a byte that is not a continuation byte).
// - Errors name the input (the `what` argument), the byte offset of the first bad byte
//   (0-based, in the bytes given) and its line (1-based; lines end at '\n').
// - Positions in decoded text are code-point indices, 0-based.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace atto::utf8 {

// The first problem found in a byte string.
struct Issue {
  size_t byte_offset = 0;  // 0-based offset of the first byte of the bad sequence
  int64_t line = 1;        // 1-based line of that byte
  std::string reason;      // e.g. "overlong encoding 0xC0 0xAF of U+002F"
};

// True for Unicode scalar values: <= U+10FFFF and not a surrogate.
bool is_scalar_value(char32_t cp);

// The first invalid sequence of `bytes`, or nothing when they are valid UTF-8.
std::optional<Issue> find_invalid(std::string_view bytes);

// Throws atto::Error "<what> is not valid UTF-8: <reason> at byte offset N (line L); ..." on the
// first invalid sequence.
void validate(std::string_view bytes, std::string_view what);

// Decodes valid UTF-8 into code points; throws like validate() otherwise.
std::vector<char32_t> decode(std::string_view bytes, std::string_view what = "text");

// Decodes one code point starting at bytes[pos] of VALID UTF-8 and advances pos.
// (For loops over text already checked by validate(); no checks beyond bounds.)
char32_t next(std::string_view valid, size_t& pos);

// Number of code points of valid UTF-8.
size_t count(std::string_view valid);

// Appends the UTF-8 encoding of cp; throws atto::Error if cp is not a scalar value.
void append(std::string& out, char32_t cp);
std::string encode(char32_t cp);
std::string encode(std::span<const char32_t> cps);

// Printable form of one code point for messages: "'é' (U+00E9)", "'\n' (U+000A)",
// "'\x07' (U+0007)".
std::string describe(char32_t cp);

// The code point as shown inside quotes: itself when printable, else an escape ("\n", "\t",
// "\r", "\\", "\x07", "\u{85}"). Used for display of vocabularies and quoted text.
std::string display(char32_t cp);

// Valid UTF-8 text quoted for a message: "\"café\"", escaped as display() does, cut to
// max_code_points with "..." appended when longer.
std::string quote(std::string_view valid, size_t max_code_points = 80);

}  // namespace atto::utf8
