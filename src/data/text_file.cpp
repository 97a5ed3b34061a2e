#include "data/text_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "base/files.h"
#include "tokenize/utf8.h"

namespace atto {

namespace {

int64_t line_of(std::string_view text, size_t offset) {
  return 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
}

// Drops a leading byte-order mark and the '\r' of every "\r\n".
std::string normalise(std::string bytes) {
  size_t start = bytes.starts_with("\xEF\xBB\xBF") ? 3 : 0;
  std::string out;
  out.reserve(bytes.size() - start);
  for (size_t i = start; i < bytes.size(); ++i) {
    if (bytes[i] == '\r' && i + 1 < bytes.size() && bytes[i + 1] == '\n') continue;
    out += bytes[i];
  }
  return out;
}

// "a character device" for a file type atto will not read.
const char* kind_of(std::filesystem::file_type t) {
  using std::filesystem::file_type;
  switch (t) {
    case file_type::character: return "a character device";
    case file_type::block: return "a block device";
    case file_type::fifo: return "a FIFO (named pipe)";
    case file_type::socket: return "a socket";
    default: return "not a regular file";
  }
}

}  // namespace

void check_user_file(const std::string& path, std::string_view role) {
  namespace fs = std::filesystem;
  ATTO_CHECK(!path.empty(), "no {} file given; pass the path of a UTF-8 text file", role);
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);  // stat, before anything opens the file
  ATTO_CHECK(fs::exists(st),
             "{} file '{}' does not exist; check the path (relative paths are taken from the current "
             "directory, {})",
             role, path, fs::current_path(ec).string());
  ATTO_CHECK(!fs::is_directory(st), "{} file '{}' is a directory; pass the path of a UTF-8 text file", role, path);
  ATTO_CHECK(fs::is_regular_file(st),
             "{} file '{}' is {}, not a regular file: atto reads text only from regular "
             "files (a device or a pipe can stream without end, and opening a FIFO waits for a writer); save the "
             "text to a file and pass that",
             role, path, kind_of(st.type()));
}

std::string read_user_file(const std::string& path, std::string_view role) {
  check_user_file(path, role);
  return files::read(path, files::kTextCap, fmt::format("{} file", role));
}

TextFile read_text_file(const std::string& path) { return make_text_file(path, read_user_file(path, "data")); }

TextFile make_text_file(std::string path, std::string bytes) {
  ATTO_CHECK(!bytes.empty(),
             "data file '{}' is empty (0 bytes); it needs UTF-8 text: one sample "
             "per line (--mode lines) or running text (--mode stream)",
             path);
  utf8::validate(bytes, fmt::format("data file '{}'", path));
  const size_t nul = bytes.find('\0');
  ATTO_CHECK(nul == std::string::npos,
             "data file '{}' contains a NUL byte at byte offset {} "
             "(line {}); it looks like a binary or UTF-16 file; save it as UTF-8 text",
             path, nul, line_of(bytes, nul));
  std::string text = normalise(std::move(bytes));
  const bool only_breaks = text.find_first_not_of("\r\n") == std::string::npos;
  ATTO_CHECK(!only_breaks,
             "data file '{}' has no text, only {} line break(s); it needs at least "
             "one non-empty line",
             path, std::count(text.begin(), text.end(), '\n'));
  return TextFile{std::move(path), std::move(text)};
}

std::vector<Line> split_lines(std::string_view text) {
  std::vector<Line> lines;
  size_t start = 0;
  int64_t number = 1;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(Line{text.substr(start, end - start), number++});
    start = end + 1;
  }
  return lines;
}

DataMode parse_data_mode(std::string_view name) {
  if (name == "auto") return DataMode::Auto;
  if (name == "lines") return DataMode::Lines;
  if (name == "stream") return DataMode::Stream;
  throw UsageError(fmt::format("unknown data mode '{}'; use auto, lines or stream", name));
}

const char* to_string(DataMode mode) {
  switch (mode) {
    case DataMode::Auto: return "auto";
    case DataMode::Lines: return "lines";
    case DataMode::Stream: return "stream";
  }
  return "?";
}

LineStats line_stats(std::string_view text) {
  LineStats s;
  std::vector<int64_t> lengths;
  for (const Line& line : split_lines(text)) {
    ++s.lines;
    const auto n = static_cast<int64_t>(utf8::count(line.text));
    if (n == 0) {
      ++s.empty_lines;
      continue;
    }
    lengths.push_back(n);
    if (n > s.max_length) {
      s.max_length = n;
      s.longest_line = line.number;
    }
  }
  if (!lengths.empty()) {
    auto mid = lengths.begin() + static_cast<std::ptrdiff_t>((lengths.size() - 1) / 2);
    std::nth_element(lengths.begin(), mid, lengths.end());
    s.median_length = *mid;
  }
  return s;
}

DataMode auto_mode(const LineStats& s) {
  const int64_t non_empty = s.lines - s.empty_lines;
  const bool short_lines = s.median_length <= kAutoMaxMedianLength;
  const bool few_empty = static_cast<double>(s.empty_lines) <= kAutoMaxEmptyFraction * static_cast<double>(s.lines);
  return non_empty >= 2 && short_lines && few_empty ? DataMode::Lines : DataMode::Stream;
}

DataMode resolve_mode(const TextFile& file, DataMode requested) {
  return requested != DataMode::Auto ? requested : auto_mode(line_stats(file.text));
}

std::string explain_auto_mode(const LineStats& s) {
  const DataMode m = auto_mode(s);
  return fmt::format(
      "auto chose {} mode: {} lines ({} empty), median line {} characters, longest {} (lines mode "
      "needs >= 2 non-empty lines, median <= {} and <= {:g}% empty lines); override with --mode {}",
      to_string(m), s.lines, s.empty_lines, s.median_length, s.max_length, kAutoMaxMedianLength,
      100 * kAutoMaxEmptyFraction, m == DataMode::Lines ? "stream" : "lines");
}

}  // namespace atto
