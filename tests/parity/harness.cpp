#include "parity/harness.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include "base/error.h"
#include "io/file.h"
#include "support.h"

extern char** environ;

namespace atto::test {

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string quote(const std::string& s) {
  if (!s.empty() && s.find_first_of(" \t\n'\"\\$`*?;&|<>()") == std::string::npos) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += quote(a);
  }
  return out;
}

// Runs argv (argv[0] looked up in PATH if it has no '/') with stdout and stderr both going to
// `log_path`; returns the wait status. Throws if the program cannot be started.
int run_process(const std::vector<std::string>& argv, const std::string& log_path) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    fail("cannot run '{}': {} (set ATTO_PYTHON to a python3 with torch and numpy)", argv[0], std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) fail("waiting for '{}' failed: {}", argv[0], std::strerror(errno));
  }
  return status;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exit status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return fmt::format("killed by signal {} ({})", WTERMSIG(status), ::strsignal(WTERMSIG(status)));
  return fmt::format("wait status {}", status);
}

std::string tail_of_file(const std::string& path, size_t max_bytes) {
  std::string s;
  try {
    s = io::read_file(path);
  } catch (const Error& e) {
    return std::string("(no output: ") + e.what() + ")";
  }
  if (s.size() > max_bytes) s = "...\n" + s.substr(s.size() - max_bytes);
  return s.empty() ? "(no output)" : s;
}

}  // namespace

// ============================================================================================
// Environment
// ============================================================================================
std::string python_executable() { return env_or("ATTO_PYTHON", "/usr/bin/python3"); }

std::string source_dir() {
  const char* env = std::getenv("ATTO_SOURCE_DIR");
  if (env && *env) return env;
#ifdef ATTO_SOURCE_DIR
  return ATTO_SOURCE_DIR;
#else
  // This file is compiled as <source>/tests/parity/harness.cpp (CMake passes absolute paths).
  const std::string self = __FILE__;
  const std::string suffix = "/tests/parity/harness.cpp";
  if (self.size() > suffix.size() && self.ends_with(suffix)) {
    const std::string root = self.substr(0, self.size() - suffix.size());
    if (is_dir(root + "/tests/parity")) return root;
  }
  return ".";
#endif
}

bool allow_no_torch() { return env_or("ATTO_ALLOW_NO_TORCH", "") == "1"; }

bool torch_available() {
  static std::map<std::string, bool> cache;  // per interpreter path
  const std::string py = python_executable();
  auto it = cache.find(py);
  if (it != cache.end()) return it->second;
  bool ok = false;
  try {
    const int status = run_process(
        {py, "-c", "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('torch') else 1)"}, "/dev/null");
    ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  } catch (const Error&) {
    ok = false;  // the interpreter itself cannot be run
  }
  cache[py] = ok;
  return ok;
}

std::string no_torch_message() {
  return fmt::format(
      "PyTorch is not available to '{}' (ATTO_PYTHON): parity tests need it. Install Debian's "
      "python3-torch, point ATTO_PYTHON at a python3 with torch and numpy, or set "
      "ATTO_ALLOW_NO_TORCH=1 to skip these tests.",
      python_executable());
}

// ============================================================================================
// Running a reference script
// ============================================================================================
io::SafetensorsFile run_reference(const std::string& script, const std::string& case_name,
                                  const std::vector<std::string>& extra_args) {
  const std::string script_path = source_dir() + "/tests/parity/" + script;
  ATTO_CHECK(is_file(script_path), "reference script '{}' not found (set ATTO_SOURCE_DIR to the atto source folder)",
             script_path);
  TempDir tmp("parity");
  const std::string out = tmp / "reference.safetensors";
  const std::string log = tmp / "output.txt";
  std::vector<std::string> argv = {python_executable(), script_path, "--case", case_name, "--out", out};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  const int status = run_process(argv, log);
  const std::string what = fmt::format("reference '{}' case '{}'", script, case_name);
  constexpr size_t kTail = 6000;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail("{} failed ({})\n  command: {}\n--- script output ---\n{}", what, describe_status(status), command_line(argv),
         tail_of_file(log, kTail));
  if (!is_file(out))
    fail("{} exited 0 but wrote no file to --out\n  command: {}\n--- script output ---\n{}", what, command_line(argv),
         tail_of_file(log, kTail));
  try {
    return io::load_safetensors(out);
  } catch (const Error& e) {
    fail("{} wrote a file atto cannot load: {}\n  command: {}", what, e.what(), command_line(argv));
  }
}

// ============================================================================================
// Comparing tensors
// ============================================================================================
namespace {

// |a - b|, with equal values (also equal infinities) at 0 and NaN anywhere at +inf.
double elem_diff(float a, float b) {
  if (a == b) return 0.0;
  const double d = std::fabs(static_cast<double>(a) - static_cast<double>(b));
  return std::isnan(d) ? INFINITY : d;
}

std::string index_str(const Shape& shape, int64_t linear) {
  Shape idx(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = shape[d] ? linear % shape[d] : 0;
    linear = shape[d] ? linear / shape[d] : 0;
  }
  return shape_str(idx);
}

}  // namespace

void expect_close(const Tensor& got, const Tensor& want, float tol, const std::string& what) {
  if (!got.defined() || !want.defined()) {
    ADD_FAILURE() << what << ": " << (got.defined() ? "want" : "got") << " is an undefined tensor";
    return;
  }
  if (got.shape() != want.shape()) {
    ADD_FAILURE() << what << ": shape " << shape_str(got.shape()) << " differs from expected "
                  << shape_str(want.shape());
    return;
  }
  const std::vector<float> g = got.to_vector(), w = want.to_vector();
  double max_diff = 0.0;
  size_t at = 0, n_bad = 0;
  std::vector<size_t> first_bad;
  for (size_t i = 0; i < g.size(); ++i) {
    const double d = elem_diff(g[i], w[i]);
    if (d > max_diff) {
      max_diff = d;
      at = i;
    }
    if (d > tol) {
      ++n_bad;
      if (first_bad.size() < 5) first_bad.push_back(i);
    }
  }
  if (n_bad == 0) return;
  const Shape& shape = got.shape();
  std::string msg = fmt::format(
      "{}: max |got - want| = {:.6g} at index {} (got {}, want {}), tolerance {:.3g}; "
      "{} of {} elements differ by more than the tolerance. First ones:",
      what, max_diff, index_str(shape, static_cast<int64_t>(at)), g[at], w[at], tol, n_bad, g.size());
  for (size_t i : first_bad)
    msg += fmt::format("\n  {} got {} want {} (diff {:.3g})", index_str(shape, static_cast<int64_t>(i)), g[i], w[i],
                       elem_diff(g[i], w[i]));
  ADD_FAILURE() << msg;
}

float compare(const Tensor& got, const Tensor& want, float tol, const std::string& what) {
  expect_close(got, want, tol, what);
  return got.shape() == want.shape() ? max_abs_diff(got, want) : INFINITY;
}

std::string num(double v) {
  std::ostringstream s;
  s.precision(9);
  s << v;
  return s.str();
}

std::set<std::string> split_names(const io::SafetensorsFile& ref, const std::string& key) {
  auto it = ref.metadata.find(key);
  if (it == ref.metadata.end()) fail("the reference script wrote no '{}' metadata", key);
  std::set<std::string> out;
  std::stringstream s(it->second);
  for (std::string n; std::getline(s, n, ',');)
    if (!n.empty()) out.insert(n);
  return out;
}

}  // namespace atto::test
