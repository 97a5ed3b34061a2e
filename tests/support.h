// What many test files need: a temporary folder that cleans itself up and the message of the
// atto::Error a call throws. One copy here (they were copied into 13 test files, each a little
// different). Check a message with GoogleMock's matchers, which print it when they fail:
// EXPECT_THAT(error_of(f), HasSubstr("...")) (using ::testing::HasSubstr).
#pragma once

#include <gmock/gmock.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <utility>

#include "base/error.h"

namespace atto::test {

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
