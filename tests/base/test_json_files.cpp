// base/json.h, base/files.h, base/output.h, base/limits.h: the one JSON parse, the one file rule,
// checked output and terminal-safe messages that every command, the server and the C API use.
#include <gmock/gmock.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "base/files.h"
#include "base/json.h"
#include "base/limits.h"
#include "base/output.h"
#include "support.h"

using namespace atto;
using ::testing::HasSubstr;
using ::testing::Not;
using atto::test::error_of;
using atto::test::TempDir;

namespace {

std::string nested(int depth, const std::string& inner = "1") {
  return std::string(static_cast<size_t>(depth), '[') + inner + std::string(static_cast<size_t>(depth), ']');
}

std::string write(const TempDir& d, const std::string& name, const std::string& bytes) {
  const std::string p = (d.path() / name).string();
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

}  // namespace

TEST(JsonUtil, DepthAtTheLimitParsesOneMoreIsRefusedWithWhereAndWhat) {
  EXPECT_EQ(json_util::parse(nested(json_util::kMaxDepth), "x.json").dump(), nested(json_util::kMaxDepth));
  const std::string msg = error_of([] { json_util::parse("{\"a\": " + nested(json_util::kMaxDepth), "r/config.json"); });
  EXPECT_THAT(msg, HasSubstr("r/config.json"));
  EXPECT_THAT(msg, HasSubstr("nested more than 64 levels"));
  EXPECT_THAT(msg, HasSubstr("line 1, column 70"));  // the 65th bracket, after '{"a": '
}

TEST(JsonUtil, DeepNestingOfAHundredThousandLevelsIsRefusedNotACrash) {
  EXPECT_THAT(error_of([] { json_util::parse(nested(100000), "body"); }), HasSubstr("nested more than"));
  EXPECT_THAT(error_of([] { json_util::parse_ordered(nested(100000), "header"); }), HasSubstr("header"));
  EXPECT_TRUE(json_util::parse_or_discard(nested(100000)).is_discarded());
  const std::string objects = [] {
    std::string s;
    for (int i = 0; i < 100000; ++i) s += "{\"a\":";
    return s + "1" + std::string(100000, '}');
  }();
  EXPECT_THAT(error_of([&] { json_util::parse(objects, "o"); }), HasSubstr("nested more than"));
}

TEST(JsonUtil, BracketsInsideStringsDoNotCount) {
  const std::string s = "{\"a\": \"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"}";
  EXPECT_EQ(json_util::parse(s, "s")["a"].get<std::string>().size(), 2001u);
}

TEST(JsonUtil, SyntaxAndRangeErrorsAreAttoErrorsNamingTheInput) {
  EXPECT_THAT(error_of([] { json_util::parse("{\n  \"a\": ,\n}", "f.json"); }), HasSubstr("f.json: not valid JSON (line 2"));
  EXPECT_THAT(error_of([] { json_util::parse("{\"lr\": 1e400}", "c.json"); }), HasSubstr("c.json"));
  EXPECT_TRUE(json_util::parse_or_discard("{\"a\": 1e400}").is_discarded());
  EXPECT_TRUE(json_util::parse_or_discard("{").is_discarded());
  EXPECT_EQ(json_util::parse_or_discard("{\"a\": 2}")["a"], 2);
}

TEST(JsonUtil, ExcerptIsBoundedAndEscaped) {
  const nlohmann::json big = std::string(200000, 'x');
  EXPECT_LE(json_util::excerpt(big).size(), 83u);
  EXPECT_THAT(json_util::excerpt(big), HasSubstr("..."));
  const nlohmann::json esc = std::string("a\x1b[31m\0b", 8);
  const std::string e = json_util::excerpt(esc);
  EXPECT_EQ(e.find('\x1b'), std::string::npos);
  EXPECT_EQ(e.find('\0'), std::string::npos);
  EXPECT_THAT(e, HasSubstr("\\u001b"));
  EXPECT_EQ(json_util::excerpt(nlohmann::json{{"a", 1}}), "{\"a\":1}");
  EXPECT_EQ(json_util::excerpt(nlohmann::json(std::string("\xff\xfe"))).find('\xff'), std::string::npos);  // not UTF-8
}

TEST(JsonUtil, PrintableEscapesControlAndInvalidBytesKeepsUtf8) {
  EXPECT_EQ(json_util::printable(std::string("a\x1b\0z", 4)), "\"a\\x1b\\x00z\"");
  EXPECT_EQ(json_util::printable("caf\xc3\xa9\n\"q\""), "\"caf\xc3\xa9\\n\\\"q\\\"\"");
  EXPECT_EQ(json_util::printable("\xc2\x9b"), "\"\\xc2\\x9b\"");  // C1 control (CSI) as bytes
  EXPECT_EQ(json_util::printable("\xe0\x80\x80"), "\"\\xe0\\x80\\x80\"");  // overlong
  EXPECT_EQ(json_util::printable(std::string(500, 'k'), 10), "\"kkkkkkkkkk...\"");
}

TEST(Files, ReadsRegularFilesWithinTheCap) {
  TempDir d;
  const std::string p = write(d, "a.json", "{\"a\": 1}");
  EXPECT_EQ(files::read(p, 100, "config"), "{\"a\": 1}");
  EXPECT_EQ(files::read(p, 8, "config"), "{\"a\": 1}");  // exactly the cap
  const std::string msg = error_of([&] { files::read(p, 7, "config file"); });
  EXPECT_THAT(msg, HasSubstr("config file '" + p + "' is 8 bytes, more than the 7 bytes"));
}

TEST(Files, RefusesFifoDeviceDirectoryAndMissingWithoutBlocking) {
  TempDir d;
  const std::string fifo = (d.path() / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(error_of([&] { files::read(fifo, 0, "--api-key-file"); }),
              HasSubstr("--api-key-file '" + fifo + "': it is a FIFO"));
  uint64_t size = 0;
  EXPECT_THAT(error_of([&] { files::open_regular(fifo, "token file", 0, size); }), HasSubstr("FIFO"));
  EXPECT_THAT(error_of([] { files::read("/dev/zero", 1 << 20, "encoder"); }), HasSubstr("character device"));
  EXPECT_THAT(error_of([&] { files::read(d.path().string(), 0, "tokenizer"); }), HasSubstr("a directory"));
  EXPECT_THAT(error_of([&] { files::read((d.path() / "none").string(), 0, "data"); }), HasSubstr("not found"));
  const std::string link = (d.path() / "zero").string();
  ASSERT_EQ(::symlink("/dev/zero", link.c_str()), 0);
  EXPECT_THAT(error_of([&] { files::read(link, 0, "metrics"); }), HasSubstr("character device"));
}

TEST(Files, ReadStreamStopsAtTheCap) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  std::fputs(std::string(300000, 'z').c_str(), f);
  std::rewind(f);
  EXPECT_THAT(error_of([&] { files::read_stream(f, 100000, "stdin"); }), HasSubstr("stdin is more than"));
  std::rewind(f);
  EXPECT_EQ(files::read_stream(f, 300000, "stdin").size(), 300000u);
  std::fclose(f);
}

TEST(Output, TerminalSafeEscapesControlBytesAndBoundsLength) {
  EXPECT_EQ(terminal_safe("line one\n\tline two"), "line one\n\tline two");
  EXPECT_EQ(terminal_safe(std::string("a\x1b]0;x\x07\0", 8)), "a\\x1b]0;x\\x07\\x00");
  EXPECT_EQ(terminal_safe("\xe2\x82\xac \xff"), "\xe2\x82\xac \\xff");
  const std::string cut = terminal_safe(std::string(100000, 'm') + "END", 4096);
  EXPECT_LT(cut.size(), 4200u);
  EXPECT_THAT(cut, HasSubstr("bytes cut"));
  EXPECT_THAT(cut, HasSubstr("END"));
}

TEST(Output, CheckWrittenReportsAFullDevice) {
  std::FILE* f = std::fopen("/dev/full", "w");
  if (f == nullptr) GTEST_SKIP() << "no /dev/full";
  std::fputs("x", f);
  EXPECT_THAT(error_of([&] { check_written(f, "/dev/full"); }), HasSubstr("cannot write to /dev/full"));
  std::fclose(f);
}

TEST(Limits, ThreadsOneRange) {
  EXPECT_NO_THROW(check_threads(0, "--threads"));
  EXPECT_NO_THROW(check_threads(kMaxThreads, "--threads"));
  EXPECT_THAT(error_of([] { check_threads(kMaxThreads + 1, "--threads"); }), HasSubstr("--threads must be in [0, 256]"));
  EXPECT_THAT(error_of([] { check_threads(-5, "n_threads"); }), HasSubstr("n_threads"));
}

// A byte-level BPE sample may hold a byte no UTF-8 text has (0xFD) or end inside a character:
// output goes through json_util::dump, which writes U+FFFD for each bad byte (dump() threw, and
// `atto sample --json` stopped halfway through its output).
TEST(JsonUtil, DumpReplacesInvalidUtf8InsteadOfThrowing) {
  const nlohmann::json j = {{"text", std::string("ok \xFD then \xE2\x82")}, {"id", 3}};
  EXPECT_THROW((void)j.dump(), nlohmann::json::type_error);
  const std::string out = json_util::dump(j);
  EXPECT_EQ(out, "{\"id\":3,\"text\":\"ok \xEF\xBF\xBD then \xEF\xBF\xBD\"}");
  EXPECT_EQ(nlohmann::json::parse(out)["id"], 3);
}
