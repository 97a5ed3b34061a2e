// atto/io/file.h: whole-file reads and crash-safe (atomic) writes.
//
//   atto::io::write_file_atomic("run/config.json.txt", "hello\n");
//   std::string s = atto::io::read_file("run/config.json.txt");        // "hello\n"
//   atto::io::write_json_atomic("run/config.json", {{"n_layers", 2}});
//   nlohmann::json j = atto::io::read_json("run/config.json");        // j["n_layers"] == 2
//
// Conventions
// - An atomic write goes to a temporary file in the same folder as the target
//   ("<path>.tmp.<pid>.<n>"), is fsync'ed, renamed over the target, and then the folder is
//   fsync'ed. A crash at any point leaves either the old file or the new one under the real name,
//   never a half-written one. On failure the temporary file is removed, the target is untouched,
//   and atto::Error names the path and the system's reason (errno text).
// - New files get mode 0666 minus the process umask, as with fopen().
// - Readers throw atto::Error naming the file for: missing, a directory, not a regular file (a
//   device such as /dev/zero, a FIFO or a socket, which could stream forever or block: checked
//   with stat before opening), unreadable; read_json also for a parse error, with the line and
//   column.
// - A write killed between creating its temporary file and the rename leaves that file behind.
//   remove_stale_temp_files(dir) deletes such leftovers: names of exactly that pattern whose
//   process <pid> no longer runs (a live process may be writing the file right now). Callers run
//   it when they open a folder they write into (atto's run directory).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace atto::io {

// Replaces (or creates) `path` with exactly `bytes`, atomically (see above).
void write_file_atomic(const std::string& path, std::string_view bytes);

// The whole contents of a regular file.
std::string read_file(const std::string& path);
// Its first n bytes (fewer when the file is shorter), with read_file's checks; sets file_size
// to the file's size from stat. Reads a header without the data after it.
std::string read_file_prefix(const std::string& path, size_t n, uint64_t& file_size);

// The <pid> of a name write_file_atomic gives its temporary files, "<name>.tmp.<pid>.<n>" (a
// non-empty <name>, decimal <pid> > 0 and <n>); nullopt for any other name.
std::optional<long> atomic_temp_pid(std::string_view filename);

// Deletes the temporary files of interrupted atomic writes directly inside `dir`: regular files
// named "<name>.tmp.<pid>.<n>" whose process <pid> is not running (kill(pid, 0) fails with
// ESRCH); this process's own and other live processes' files are kept. Best effort: never
// throws (an unreadable or read-only folder removes nothing). Returns the names removed.
std::vector<std::string> remove_stale_temp_files(const std::string& dir);

// Writes `j` pretty-printed (2-space indent, trailing newline) with write_file_atomic.
void write_json_atomic(const std::string& path, const nlohmann::json& j);

// Parses a JSON file (at most files::kJsonCap, nesting at most json_util::kMaxDepth: base/json.h);
// a syntax error names the file, the line and the column.
nlohmann::json read_json(const std::string& path);

}  // namespace atto::io
