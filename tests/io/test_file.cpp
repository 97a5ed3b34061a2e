#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>

#include "io/file.h"
#include "io_test_util.h"
#include "support.h"

using namespace atto;
using atto::io::testing::expect_error;
using atto::io::testing::ScratchDir;

TEST(IoFile, WriteAtomicCreatesAndReplaces) {
  ScratchDir dir;
  const std::string p = dir.file("a.txt");
  io::write_file_atomic(p, "first version, longer than the second\n");
  EXPECT_EQ(io::read_file(p), "first version, longer than the second\n");
  io::write_file_atomic(p, std::string("v2\0x", 4));  // shorter, with a NUL byte
  EXPECT_EQ(io::read_file(p), std::string("v2\0x", 4));
  io::write_file_atomic(p, "");
  EXPECT_EQ(io::read_file(p), "");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.txt"});  // no temporary files left
}

TEST(IoFile, WriteAtomicBareFileNameUsesCurrentFolder) {
  ScratchDir dir;
  const auto old = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  io::write_file_atomic("bare.txt", "x");
  std::filesystem::current_path(old);
  EXPECT_EQ(io::read_file(dir.file("bare.txt")), "x");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"bare.txt"});
}

TEST(IoFile, WriteAtomicOntoDirectoryFailsAndLeavesNothing) {
  ScratchDir dir;
  std::filesystem::create_directory(dir.file("sub"));
  io::write_file_atomic(dir.file("sub/keep.txt"), "keep");
  expect_error([&] { io::write_file_atomic(dir.file("sub"), "data"); }, {dir.file("sub"), "directory"});
  EXPECT_TRUE(std::filesystem::is_directory(dir.file("sub")));
  EXPECT_EQ(io::read_file(dir.file("sub/keep.txt")), "keep");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"sub"});
}

TEST(IoFile, WriteAtomicIntoMissingFolderFails) {
  ScratchDir dir;
  expect_error([&] { io::write_file_atomic(dir.file("nope/x.txt"), "data"); },
               {dir.file("nope/x.txt"), "No such file or directory"});
  EXPECT_TRUE(dir.entries().empty());
}

// A write that fails half-way (here: the file size limit, EFBIG) must leave the old file intact
// and remove the temporary file. This works even as root, unlike a read-only folder.
TEST(IoFile, FailedWriteKeepsOldFileAndRemovesTemp) {
  ScratchDir dir;
  const std::string p = dir.file("ckpt.bin");
  io::write_file_atomic(p, "old contents");
  rlimit old_limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old_limit;
  small.rlim_cur = 1000;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string msg;
  try {
    io::write_file_atomic(p, std::string(5000, 'n'));
  } catch (const Error& e) {
    msg = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(msg.find(p), std::string::npos) << msg;
  EXPECT_NE(msg.find("File too large"), std::string::npos) << msg;
  EXPECT_EQ(io::read_file(p), "old contents");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"ckpt.bin"});
}

TEST(IoFile, WriteAtomicIntoReadOnlyFolderFails) {
  ScratchDir dir;
  const std::string p = dir.file("x.txt");
  io::write_file_atomic(p, "old");
  atto::test::open_to_others(dir.path());
  ASSERT_EQ(::chmod(dir.path().c_str(), 0555), 0);
  // As the user nobody where the tests run as root.
  EXPECT_TRUE(atto::test::run_unprivileged([&] {
    try {
      io::write_file_atomic(p, "new");
    } catch (const atto::Error& e) {
      const std::string m = e.what();
      return m.find(p) != std::string::npos && m.find("Permission denied") != std::string::npos;
    }
    return false;
  }));
  ::chmod(dir.path().c_str(), 0755);
  EXPECT_EQ(io::read_file(p), "old");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"x.txt"});
}

TEST(IoFile, NewFilesHonourUmask) {
  ScratchDir dir;
  const mode_t old = ::umask(022);
  io::write_file_atomic(dir.file("m.txt"), "x");
  ::umask(old);
  struct stat st {};
  ASSERT_EQ(::stat(dir.file("m.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST(IoFile, ReadFileErrorsNameTheFile) {
  ScratchDir dir;
  expect_error([&] { io::read_file(dir.file("missing.txt")); }, {dir.file("missing.txt"), "not found"});
  expect_error([&] { io::read_file(dir.path()); }, {dir.path(), "directory"});
  if (::geteuid() != 0) {
    io::write_file_atomic(dir.file("secret"), "x");
    ::chmod(dir.file("secret").c_str(), 0);
    expect_error([&] { io::read_file(dir.file("secret")); }, {dir.file("secret"), "Permission denied"});
  }
}

TEST(IoFile, JsonRoundTripAndParseErrors) {
  ScratchDir dir;
  const std::string p = dir.file("c.json");
  nlohmann::json j = {{"n_layers", 2}, {"name", "caf\xc3\xa9"}, {"dims", {1, 2, 3}}};
  io::write_json_atomic(p, j);
  EXPECT_EQ(io::read_json(p), j);
  EXPECT_EQ(io::read_file(p).back(), '\n');

  io::write_file_atomic(p, "{\n  \"a\": 1,\n  \"b\": ]\n}\n");
  expect_error([&] { io::read_json(p); }, {p, "line 3, column 8"});
  io::write_file_atomic(p, "");
  expect_error([&] { io::read_json(p); }, {p, "not valid JSON"});
  expect_error([&] { io::read_json(dir.file("none.json")); }, {"none.json", "not found"});
  // A string that is not UTF-8 cannot be written as JSON; the old file stays.
  expect_error([&] { io::write_json_atomic(p, {{"bad", "\xff"}}); }, {p});
  EXPECT_EQ(io::read_file(p), "");
}

// A device or a FIFO is refused before it is opened: /dev/zero would be read forever, and
// opening a FIFO blocks until a writer comes (this test would hang on the old read_file).
TEST(IoFile, ReadFileRefusesDevicesAndFifos) {
  ScratchDir dir;
  expect_error([] { io::read_file("/dev/zero"); }, {"'/dev/zero'", "character device", "not a regular file"});
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_error([&] { io::read_json(fifo); }, {fifo, "FIFO", "not a regular file"});
  uint64_t size = 0;
  expect_error([&] { io::read_file_prefix(fifo, 8, size); }, {fifo, "FIFO"});
}

TEST(IoFile, ReadFilePrefixReadsOnlyTheStart) {
  ScratchDir dir;
  const std::string p = dir.file("f.bin");
  io::write_file_atomic(p, "0123456789");
  uint64_t size = 0;
  EXPECT_EQ(io::read_file_prefix(p, 4, size), "0123");
  EXPECT_EQ(size, 10u);
  EXPECT_EQ(io::read_file_prefix(p, 100, size), "0123456789");
  EXPECT_EQ(io::read_file_prefix(p, 0, size), "");
  expect_error([&] { io::read_file_prefix(dir.file("none"), 4, size); }, {dir.file("none"), "not found"});
}

TEST(IoFile, AtomicTempNamesAreRecognised) {
  EXPECT_EQ(io::atomic_temp_pid("model.safetensors.tmp.4242.0"), 4242);
  EXPECT_EQ(io::atomic_temp_pid("train_state.safetensors.tmp.7.12"), 7);
  EXPECT_EQ(io::atomic_temp_pid("a.tmp.tmp.5.1"), 5);
  for (const char* other :
       {"model.safetensors", ".tmp.5.1", "x.tmp.5", "x.tmp.5.", "x.tmp..1", "x.tmp.5.1a", "x.tmp.-5.1", "x.tmp.+5.1",
        "x.tmp.0.1", "x.tmp.99999999999999999999.1", "notes.tmp.txt", "x.tmpl.5.1"})
    EXPECT_FALSE(io::atomic_temp_pid(other).has_value()) << other;
}

namespace {

// A process id that no longer runs: a child that exited and was reaped.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

}  // namespace

// Leftovers of killed saves go; a file another live process may be writing stays, as do this
// process's own, names of other patterns, and folders.
TEST(IoFile, RemoveStaleTempFilesKeepsLiveWriters) {
  ScratchDir dir;
  const pid_t dead = dead_pid();
  const pid_t live = ::fork();
  if (live == 0) {
    ::pause();  // until killed below
    ::_exit(0);
  }
  const std::string stale = fmt::format("model.safetensors.tmp.{}.0", dead);
  const std::string stale2 = fmt::format("train_state.safetensors.tmp.{}.3", dead);
  const std::string other = fmt::format("model.safetensors.tmp.{}.1", live);
  const std::string mine = fmt::format("config.json.tmp.{}.2", ::getpid());
  const std::string folder = fmt::format("sub.tmp.{}.0", dead);
  for (const std::string& n :
       {stale, stale2, other, mine, std::string("model.safetensors"), std::string("notes.tmp.txt")})
    io::write_file_atomic(dir.file(n), "x");
  std::filesystem::create_directory(dir.file(folder));

  std::vector<std::string> removed = io::remove_stale_temp_files(dir.path());
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, (std::vector<std::string>{stale, stale2}));
  std::vector<std::string> kept{other, mine, "model.safetensors", "notes.tmp.txt", folder};
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(dir.entries(), kept);

  ::kill(live, SIGKILL);  // once its writer is gone, its file is stale too
  ::waitpid(live, nullptr, 0);
  EXPECT_EQ(io::remove_stale_temp_files(dir.path()), std::vector<std::string>{other});
  EXPECT_TRUE(io::remove_stale_temp_files(dir.file("missing")).empty());  // never throws
}
