#include "base/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace atto::files {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

void check_cap(const std::string& path, std::string_view what, uint64_t size, uint64_t cap) {
  if (cap != 0 && size > cap)
    fail("{} '{}' is {}, more than the {} atto reads for it; check that this is the file you meant", what, path,
         human_bytes(size), human_bytes(cap));
}

// Reads fd into out until EOF or `limit` bytes. Returns false when more than `limit` bytes were there.
bool read_into(int fd, const std::string& path, std::string_view what, std::string& out, uint64_t limit) {
  size_t len = 0;
  for (;;) {
    if (len == out.size()) out.resize(std::max<size_t>(4096, out.size() * 2));
    const size_t want = std::min<uint64_t>(out.size() - len, limit + 1 - len);
    const ssize_t n = ::read(fd, out.data() + len, want);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      fail("cannot read {} '{}': {}", what, path, errno_text(err));
    }
    len += static_cast<size_t>(n);
    if (len > limit) {
      ::close(fd);
      return false;
    }
  }
  out.resize(len);
  ::close(fd);
  return true;
}

}  // namespace

const char* special_kind(unsigned mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string human_bytes(uint64_t n) {
  if (n < 10 * 1024) return fmt::format("{} bytes", n);
  if (n < 10 * kMiB) return fmt::format("{} KiB", n >> 10);
  if (n < (uint64_t{10} << 30)) return fmt::format("{} MiB", n >> 20);
  return fmt::format("{} GiB", n >> 30);
}

int open_regular(const std::string& path, std::string_view what, uint64_t cap, uint64_t& size) {
  if (path.empty()) fail("{}: the path is empty", what);
  // stat before open: opening a FIFO blocks until a writer comes, and a device such as
  // /dev/zero never ends; both are refused here.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) fail("cannot read {} '{}': it is a directory, not a file", what, path);
    fail("cannot read {} '{}': it is {}, not a regular file; atto reads only regular files (save the data to a file "
         "and pass that)",
         what, path, special_kind(st.st_mode));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) fail("{} '{}' not found; check the path", what, path);
    fail("cannot read {} '{}': {}", what, path, errno_text(err));
  }
  // The path may have been replaced between stat and open: check what was opened.
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ::close(fd);
    if (err == 0 || !S_ISREG(st.st_mode)) fail("cannot read {} '{}': it is {}", what, path, special_kind(st.st_mode));
    fail("cannot read {} '{}': {}", what, path, errno_text(err));
  }
  // Back to blocking reads (O_NONBLOCK only kept open() from waiting on a FIFO swapped in).
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  size = static_cast<uint64_t>(st.st_size);
  if (cap != 0 && size > cap) {
    ::close(fd);
    check_cap(path, what, size, cap);
  }
  return fd;
}

std::string read(const std::string& path, uint64_t cap, std::string_view what) {
  uint64_t size = 0;
  const int fd = open_regular(path, what, cap, size);
  // Read straight into the result, sized from stat (+1 to see the end in one read); a file that
  // grows past the cap while it is read is refused all the same.
  std::string out(static_cast<size_t>(size) + 1, '\0');
  const uint64_t limit = cap == 0 ? UINT64_MAX - 1 : cap;
  if (!read_into(fd, path, what, out, limit)) check_cap(path, what, limit + 1, cap);
  return out;
}

std::string read_prefix(const std::string& path, size_t n, uint64_t& file_size, std::string_view what) {
  const int fd = open_regular(path, what, 0, file_size);
  std::string out(std::min<uint64_t>(n, file_size) + 1, '\0');
  if (!read_into(fd, path, what, out, n)) out.resize(n);
  return out;
}

std::string read_range(const std::string& path, uint64_t offset, uint64_t n, std::string_view what) {
  std::string out(static_cast<size_t>(n), '\0');
  read_range_into(out.data(), path, offset, n, what);
  return out;
}

void read_range_into(char* out, const std::string& path, uint64_t offset, uint64_t n, std::string_view what) {
  uint64_t size = 0;
  const int fd = open_regular(path, what, 0, size);
  uint64_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, out + got, static_cast<size_t>(n - got), static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      const int err = r < 0 ? errno : 0;
      ::close(fd);
      if (err != 0) fail("cannot read {} '{}': {}", what, path, errno_text(err));
      fail("{} '{}' ends at byte {}, before the bytes [{}, {}) atto reads from it: did the file change while atto "
           "read it? Run the command again once it is complete",
           what, path, offset + got, offset, offset + n);
    }
    got += static_cast<uint64_t>(r);
  }
  ::close(fd);
}

std::string read_stream(std::FILE* f, uint64_t cap, std::string_view what) {
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const size_t n = std::fread(buf, 1, sizeof buf, f);
    out.append(buf, n);
    if (out.size() > cap) fail("{} is more than the {} atto reads from it", what, human_bytes(cap));
    if (n < sizeof buf) break;
  }
  if (std::ferror(f)) fail("cannot read {}: {}", what, errno_text(errno));
  return out;
}

}  // namespace atto::files
