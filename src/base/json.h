// atto/base/json.h: the one way atto parses JSON, and the one way a JSON value goes into a message.
//
//   nlohmann::json j = atto::json_util::parse(text, "r/config.json");          // depth <= 64
//   fail("key 'lr' = {}: not a number", atto::json_util::excerpt(j["lr"]));    // at most 80 chars
//
// - parse() refuses nesting deeper than kMaxDepth (before nlohmann builds anything: a pass over
//   the bytes that counts brackets outside strings), so that no value atto holds can overflow
//   the stack when it is copied, printed or destroyed. A syntax error names `what`, the line and
//   the column. nlohmann's exceptions never leave it: every failure is an atto::Error.
// - excerpt() is how a value is echoed back: compact JSON, invalid UTF-8 replaced, every control
//   byte escaped, cut to max_chars with "..." (so a 200 KB string or a key with ESC or NUL prints
//   as a short, harmless line).
// - printable() does the same for raw bytes (a GGUF key, a file's first bytes).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace atto::json_util {

inline constexpr int kMaxDepth = 64;

// Throws atto::Error naming `what` when `text` nests arrays/objects deeper than max_depth.
void check_depth(std::string_view text, std::string_view what, int max_depth = kMaxDepth);

// check_depth, then nlohmann's parser; any failure is an atto::Error that names `what`.
nlohmann::json parse(std::string_view text, std::string_view what, int max_depth = kMaxDepth);
nlohmann::ordered_json parse_ordered(std::string_view text, std::string_view what, int max_depth = kMaxDepth);

// Parses text that may be invalid; a discarded value (is_discarded()) instead of an error. The
// depth limit holds: too deep is discarded too. For lines of metrics.jsonl and the like.
nlohmann::json parse_or_discard(std::string_view text, int max_depth = kMaxDepth);

// A value for a message: compact, control bytes escaped, at most max_chars (then "...").
std::string excerpt(const nlohmann::json& v, size_t max_chars = 80);
std::string excerpt(const nlohmann::ordered_json& v, size_t max_chars = 80);

// Compact JSON for output that carries text a model or a user made: a string that is not valid
// UTF-8 (a byte-level BPE sample may hold a byte no UTF-8 text has, or end inside a character)
// has each bad byte replaced by U+FFFD instead of throwing (nlohmann's dump() throws).
std::string dump(const nlohmann::json& v);

// Raw bytes for a message, in double quotes: printable ASCII as is, valid UTF-8 as is, every
// other byte as \xNN (\n, \t, \r, \\, \" escaped), cut to max_chars with "...".
std::string printable(std::string_view bytes, size_t max_chars = 80);

}  // namespace atto::json_util
