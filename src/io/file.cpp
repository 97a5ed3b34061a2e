#include "io/file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <limits>

#include "base/error.h"
#include "base/files.h"
#include "base/json.h"

namespace atto::io {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

// The folder holding `path` ("." for a bare file name), for creating the temp file and fsync.
std::string parent_dir(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

constexpr std::string_view kTempInfix = ".tmp.";  // "<path>.tmp.<pid>.<n>"

// Creates a fresh temporary file next to `path`; returns its fd and sets `tmp` to its name.
int create_temp_next_to(const std::string& path, std::string& tmp) {
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    tmp = fmt::format("{}{}{}.{}", path, kTempInfix, ::getpid(), counter++);
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return fd;
    if (errno != EEXIST) {
      const int err = errno;
      fail("cannot write '{}': creating the temporary file '{}' failed: {}", path, tmp, errno_text(err));
    }
  }
  fail("cannot write '{}': no free temporary file name next to it", path);
}

// Writes all of `bytes` to fd; returns 0 or the errno of the failure.
int write_all(int fd, std::string_view bytes) {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return 0;
}

// fsync a folder so that a rename inside it is durable. Some file systems cannot fsync a
// folder (EINVAL); that is not an error of the write.
void fsync_dir(const std::string& path, const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    fail("wrote '{}' but could not open its folder '{}' to sync it: {}", path, dir, errno_text(err));
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL) fail("wrote '{}' but syncing its folder '{}' failed: {}", path, dir, errno_text(err));
}

// A decimal number that fills all of `s`.
std::optional<long> parse_decimal(std::string_view s) {
  long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || s[0] == '+' || s[0] == '-') return std::nullopt;
  return v;
}

// False only when no process `pid` exists; a process of another user (EPERM) is alive.
bool process_alive(long pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH; }

}  // namespace

void write_file_atomic(const std::string& path, std::string_view bytes) {
  ATTO_CHECK(!path.empty(), "cannot write a file with an empty path");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) fail("cannot write '{}': it is a directory", path);

  std::string tmp;
  const int fd = create_temp_next_to(path, tmp);
  // From here on, every failure removes the temporary file before throwing.
  int err = write_all(fd, bytes);
  const char* step = "writing";
  if (err == 0 && ::fsync(fd) != 0) {
    err = errno;
    step = "syncing";
  }
  if (::close(fd) != 0 && err == 0) {
    err = errno;
    step = "closing";
  }
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    step = "renaming the temporary file over";
  }
  if (err != 0) {
    ::unlink(tmp.c_str());
    fail("cannot write '{}': {} '{}' failed: {}", path, step, tmp, errno_text(err));
  }
  fsync_dir(path, parent_dir(path));
}

std::string read_file(const std::string& path) { return files::read(path, 0, "file"); }

std::string read_file_prefix(const std::string& path, size_t n, uint64_t& file_size) {
  return files::read_prefix(path, n, file_size, "file");
}

std::optional<long> atomic_temp_pid(std::string_view name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || !parse_decimal(name.substr(dot + 1))) return std::nullopt;
  const size_t infix = name.substr(0, dot).rfind(kTempInfix);
  if (infix == std::string_view::npos || infix == 0) return std::nullopt;
  const size_t first = infix + kTempInfix.size();
  const std::optional<long> pid = parse_decimal(name.substr(first, dot - first));
  if (!pid || *pid <= 0 || *pid > std::numeric_limits<pid_t>::max()) return std::nullopt;
  return pid;
}

std::vector<std::string> remove_stale_temp_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> removed;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::optional<long> pid = atomic_temp_pid(name);
    std::error_code kind_ec;
    if (!pid || !it->is_regular_file(kind_ec) || process_alive(*pid)) continue;
    std::error_code rm_ec;
    if (fs::remove(it->path(), rm_ec) && !rm_ec) removed.push_back(name);
  }
  return removed;
}

void write_json_atomic(const std::string& path, const nlohmann::json& j) {
  std::string text;
  try {
    text = j.dump(2) + "\n";
  } catch (const nlohmann::json::exception& e) {  // e.g. a string that is not UTF-8
    fail("cannot write JSON to '{}': {}", path, e.what());
  }
  write_file_atomic(path, text);
}

nlohmann::json read_json(const std::string& path) {
  return json_util::parse(files::read(path, files::kJsonCap, "JSON file"), path);
}

}  // namespace atto::io
