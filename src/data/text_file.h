// atto/data/text_file.h: reading a training text file, and choosing how to cut it into samples.
//
//   atto::TextFile file = atto::read_text_file("data/names.txt");   // validated, or atto::Error
//   atto::DataMode mode = atto::resolve_mode(file, atto::parse_data_mode("auto"));
//   for (const atto::Line& line : file.lines()) { ... line.number, line.text ... }
//
// Conventions
// - read_text_file() checks, in this order, and throws atto::Error naming the file: the path
//   exists, is not a directory, is a regular file (stat before opening: a device such as
//   /dev/zero never ends, and opening a FIFO blocks until a writer comes), can be read, is not
//   empty, is valid UTF-8 (the message gives the byte offset and line of the first bad byte),
//   holds no NUL byte (binary or UTF-16 files), and is not made only of line breaks.
// - Normalisation: a leading UTF-8 byte-order mark is dropped; "\r\n" becomes "\n" (a lone '\r'
//   elsewhere stays a character). A missing final newline is fine: the last line still counts,
//   and no newline is added to the text.
// - Lines are numbered from 1 as in an editor; a final newline does not start an extra line.
// - Lengths are in code points (characters), not bytes.
//
// Modes (see docs/data.md)
// - lines: each non-empty line is one sample framed by <eos> (makemore; names, words).
// - stream: the whole text is one token stream cut into windows (nanoGPT; prose).
// - auto picks lines when ALL of: the file has >= 2 non-empty lines, the median length of the
//   non-empty lines is <= 32 characters, and at most 1% of the lines are empty. Otherwise stream.
//   (names.txt: median 6, no empty lines -> lines. tinyshakespeare: median 39, 18% empty
//   -> stream.)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace atto {

struct TextFile {
  std::string path;  // as given, for messages
  std::string text;  // valid UTF-8, normalised as described above
};

struct Line {
  std::string_view text;  // without the '\n'; a view into TextFile::text
  int64_t number = 0;     // 1-based line number in the file
};

// Reads and validates a text file (see the checks above).
TextFile read_text_file(const std::string& path);
// The bytes of a file the user named, after the path checks above; errors call it "<role> file
// '<path>'" (role: "data", "source", "--input", ...). Every text input atto opens by path goes
// through here, so none can be a device or a pipe.
std::string read_user_file(const std::string& path, std::string_view role);
// Those path checks alone (for a file read in pieces).
void check_user_file(const std::string& path, std::string_view role);
// The same checks on text already in memory; `path` is only used in messages.
TextFile make_text_file(std::string path, std::string bytes);

// All lines of valid text, empty ones included. Views stay valid while `text` lives.
std::vector<Line> split_lines(std::string_view text);

enum class DataMode { Auto, Lines, Stream };

// "auto", "lines", "stream" -> DataMode; anything else throws atto::UsageError.
DataMode parse_data_mode(std::string_view name);
const char* to_string(DataMode mode);

struct LineStats {
  int64_t lines = 0;  // all lines, empty ones included
  int64_t empty_lines = 0;
  int64_t median_length = 0;  // lower median of the non-empty lines' lengths (characters)
  int64_t max_length = 0;     // longest line (characters)
  int64_t longest_line = 0;   // 1-based number of the first line of max_length (0: none)
};
LineStats line_stats(std::string_view text);

// The thresholds of the auto rule.
inline constexpr int64_t kAutoMaxMedianLength = 32;
inline constexpr double kAutoMaxEmptyFraction = 0.01;

// The auto rule applied to statistics (never returns Auto).
DataMode auto_mode(const LineStats& stats);
// `requested` unless it is Auto, else auto_mode(line_stats(file.text)).
DataMode resolve_mode(const TextFile& file, DataMode requested);
// One sentence for the user: "auto chose lines mode: 32033 lines, median 6 characters, ...".
std::string explain_auto_mode(const LineStats& stats);

}  // namespace atto
