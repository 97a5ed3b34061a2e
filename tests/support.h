// What many test files need: a temporary folder that cleans itself up and the message of the
// atto::Error a call throws. One copy here (they were copied into 13 test files, each a little
// different). Check a message with GoogleMock's matchers, which print it when they fail:
// EXPECT_THAT(error_of(f), HasSubstr("...")) (using ::testing::HasSubstr).
#pragma once

#include <gmock/gmock.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "base/error.h"

namespace atto::test {

// Whether two lists of float arrays (a model's gradients, say) agree bit for bit.
inline bool same_bits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0)
      return false;
  return true;
}

// A fresh folder under $TMPDIR (mkdtemp: unique even when tests run in parallel), removed with
// everything in it when the object goes out of scope. Failures throw atto::Error.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / ("atto_" + tag + "_XXXXXX")).string();
    if (!::mkdtemp(tmpl.data()))
      throw Error("cannot create a temporary folder '" + tmpl + "': " + std::strerror(errno));
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  // The path of `name` inside the folder, as a string (what atto's functions take).
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  // Writes `bytes` to `name` inside the folder and returns its path.
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string p = *this / name;
    std::ofstream out(p, std::ios::binary);
    out << bytes;
    if (!out) throw Error("cannot write '" + p + "'");
    return p;
  }

 private:
  std::filesystem::path path_;
};

// Runs check() where file permissions hold, and returns what it returned: here when the tests
// run as another user than root, else in a child process that first becomes the user nobody
// (root ignores permissions: a read-only folder would not stop it). The files check() reads or
// writes must be open to others (`open_to_others`). Any exception counts as false. A check that
// runs kernels sets one thread first (omp_set_num_threads(1)): an OpenMP team does not survive
// fork.
inline bool run_unprivileged(const std::function<bool()>& check) {
  if (::geteuid() != 0) return check();
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    bool ok = false;
    try {
      ok = ::setgroups(0, nullptr) == 0 && ::setresgid(65534, 65534, 65534) == 0 &&
           ::setresuid(65534, 65534, 65534) == 0 && ::geteuid() == 65534 && check();
    } catch (...) {
      ok = false;
    }
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Lets other users (nobody, for run_unprivileged) into `path` and every folder above it and read
// what is below it (the test's temporary folders are the owner's alone).
inline void open_to_others(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  const auto read = fs::perms::others_read | fs::perms::group_read;
  const auto enter = fs::perms::others_exec | fs::perms::group_exec;
  for (fs::path p = fs::absolute(path); !p.empty() && p != p.root_path(); p = p.parent_path())
    fs::permissions(p, enter, fs::perm_options::add);
  if (fs::is_directory(path)) {
    fs::permissions(path, read | enter, fs::perm_options::add);
    for (const auto& e : fs::recursive_directory_iterator(path))
      fs::permissions(e.path(), e.is_directory() ? read | enter : read, fs::perm_options::add);
  }
}

// The message of the atto::Error that f() throws; a test failure (and "") when it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an atto::Error";
  return "";
}

}  // namespace atto::test
