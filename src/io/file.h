// atto/io/file.h: whole-file reads and crash-safe (atomic) writes.
//
//   atto::io::write_file_atomic("run/config.json.txt", "hello\n");
//   std::string s = atto::io::read_file("run/config.json.txt");        // "hello\n"
//   atto::io::write_json_atomic("run/config.json", {{"n_layer", 2}});
//   nlohmann::json j = atto::io::read_json("run/config.json");        // j["n_layer"] == 2
//
// Conventions
// - An atomic write goes to a temporary file in the same folder as the target
//   ("<path>.tmp.<pid>.<n>"), is fsync'ed, renamed over the target, and then the folder is
//   fsync'ed. A crash at any point leaves either the old file or the new one under the real name,
//   never a half-written one. On failure the temporary file is removed, the target is untouched,
//   and atto::Error names the path and the system's reason (errno text).
// - New files get mode 0666 minus the process umask, as with fopen().
// - Readers throw atto::Error naming the file for: missing, a directory, unreadable; read_json
//   also for a parse error, with the line and column.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace atto::io {

// Replaces (or creates) `path` with exactly `bytes`, atomically (see above).
void write_file_atomic(const std::string& path, std::string_view bytes);

// The whole contents of a regular file.
std::string read_file(const std::string& path);

// Writes `j` pretty-printed (2-space indent, trailing newline) with write_file_atomic.
void write_json_atomic(const std::string& path, const nlohmann::json& j);

// Parses a JSON file; a syntax error names the file, the line and the column.
nlohmann::json read_json(const std::string& path);

}  // namespace atto::io
