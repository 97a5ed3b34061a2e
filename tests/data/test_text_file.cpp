// Reading and validating data files; the auto mode rule; the bad-input cases of the issue.
#include <gmock/gmock.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "base/error.h"
#include "data/dataset.h"
#include "data/text_file.h"
#include "support.h"

using namespace atto;
namespace fs = std::filesystem;

namespace {

using atto::test::error_of;
using atto::test::TempDir;
using ::testing::HasSubstr;

std::string repeat_lines(const std::string& line, int n, const std::string& sep = "\n") {
  std::string s;
  for (int i = 0; i < n; ++i) s += line + sep;
  return s;
}

}  // namespace

TEST(TextFile, ReadsUtf8AndHandlesCrlfBomAndMissingFinalNewline) {
  TempDir tmp;
  const std::string p = tmp.write("names.txt",
                                  "\xEF\xBB\xBF"
                                  "emma\r\nzo\xC3\xAB\r\nava");
  TextFile f = read_text_file(p);
  EXPECT_EQ(f.path, p);
  EXPECT_EQ(f.text, "emma\nzo\xC3\xAB\nava");  // BOM dropped, CRLF -> LF, nothing appended
  const auto lines = split_lines(f.text);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2].text, "ava");
  EXPECT_EQ(lines[2].number, 3);
  // A lone '\r' inside a line is kept as a character.
  EXPECT_EQ(make_text_file("x", "a\rb\r\n").text, "a\rb\n");
}

TEST(TextFile, SplitLinesKeepsEmptyLinesAndNumbers) {
  const auto lines = split_lines("a\n\nbc\n");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1].text, "");
  EXPECT_EQ(lines[2].text, "bc");
  EXPECT_EQ(lines[2].number, 3);
  EXPECT_EQ(split_lines("a\nb").size(), 2u);
}

TEST(TextFileBadInput, MissingPath) {
  TempDir tmp;
  const std::string p = tmp / "nope.txt";
  const std::string msg = error_of([&] { read_text_file(p); });
  EXPECT_THAT(msg, HasSubstr(p));
  EXPECT_THAT(msg, HasSubstr("does not exist"));
  EXPECT_THAT(msg, HasSubstr("check the path"));
}

TEST(TextFileBadInput, Directory) {
  TempDir tmp;
  const std::string p = tmp / "";
  const std::string msg = error_of([&] { read_text_file(p); });
  EXPECT_THAT(msg, HasSubstr(p));
  EXPECT_THAT(msg, HasSubstr("is a directory"));
  EXPECT_THAT(msg, HasSubstr("text file"));
}

// A device never ends (/dev/zero grew atto past 3.7 GB in 10 s) and opening a FIFO blocks until a
// writer comes: both are refused from stat, before any open (the old reader hung on the FIFO).
TEST(TextFileBadInput, DevicesAndFifosAreRefusedBeforeOpening) {
  TempDir tmp;
  std::string msg = error_of([] { read_text_file("/dev/zero"); });
  EXPECT_THAT(msg, HasSubstr("data file '/dev/zero'"));
  EXPECT_THAT(msg, HasSubstr("character device"));
  EXPECT_THAT(msg, HasSubstr("not a regular file"));
  EXPECT_THAT(msg, HasSubstr("save the text to a file"));
  const std::string fifo = tmp / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  msg = error_of([&] { read_text_file(fifo); });
  EXPECT_THAT(msg, HasSubstr(fifo));
  EXPECT_THAT(msg, HasSubstr("FIFO"));
  msg = error_of([&] { read_user_file(fifo, "--input"); });
  EXPECT_THAT(msg, HasSubstr("--input file '" + fifo + "'"));
  fs::create_symlink(tmp.write("real.txt", "ab\ncd\n"), tmp / "link.txt");  // a link to a file is fine
  EXPECT_EQ(read_text_file(tmp / "link.txt").text, "ab\ncd\n");
}

TEST(TextFileBadInput, EmptyFile) {
  TempDir tmp;
  const std::string p = tmp.write("empty.txt", "");
  const std::string msg = error_of([&] { read_text_file(p); });
  EXPECT_THAT(msg, HasSubstr(p));
  EXPECT_THAT(msg, HasSubstr("is empty"));
  EXPECT_THAT(msg, HasSubstr("one sample per line"));
}

TEST(TextFileBadInput, OnlyNewlines) {
  TempDir tmp;
  for (const std::string bytes : {"\n", "\n\n\n", "\r\n\r\n"}) {
    const std::string p = tmp.write("blank.txt", bytes);
    const std::string msg = error_of([&] { read_text_file(p); });
    EXPECT_THAT(msg, HasSubstr(p));
    EXPECT_THAT(msg, HasSubstr("no text"));
    EXPECT_THAT(msg, HasSubstr("non-empty line"));
  }
}

TEST(TextFileBadInput, InvalidUtf8GivesByteOffsetAndLine) {
  TempDir tmp;
  // Latin-1 'ï' (0xEF) in "naïve" on line 2, at byte 8 of the file.
  const std::string p = tmp.write("latin1.txt", "caf\xC3\xA9\nna\xEFve\n");
  const std::string msg = error_of([&] { read_text_file(p); });
  EXPECT_THAT(msg, HasSubstr(p));
  EXPECT_THAT(msg, HasSubstr("not valid UTF-8"));
  EXPECT_THAT(msg, HasSubstr("byte offset 8"));
  EXPECT_THAT(msg, HasSubstr("line 2"));
  EXPECT_THAT(msg, HasSubstr("iconv"));
}

TEST(TextFileBadInput, Utf16FileIsRejected) {
  TempDir tmp;
  const std::string p = tmp.write("utf16.txt", std::string("a\0b\0\n\0", 6));
  const std::string msg = error_of([&] { read_text_file(p); });
  EXPECT_THAT(msg, HasSubstr(p));
  EXPECT_THAT(msg, HasSubstr("NUL byte at byte offset 1"));
  EXPECT_THAT(msg, HasSubstr("UTF-16"));
  // With a byte-order mark it is caught as invalid UTF-8 at byte 0.
  const std::string q = tmp.write("utf16bom.txt", std::string("\xFF\xFE"
                                                              "a\0",
                                                              4));
  EXPECT_THAT(error_of([&] { read_text_file(q); }), HasSubstr("byte offset 0"));
}

TEST(TextFileBadInput, StreamFileShorterThanOneBlock) {
  TempDir tmp;
  const std::string p = tmp.write("short.txt", "To be, or not to be: that is the question.\n");  // 43 chars
  TextFile f = read_text_file(p);
  auto data = make_dataset(f, build_tokenizer(f, DataMode::Stream), DataMode::Stream, {.min_holdout_tokens = 2});
  // train 38 tokens, val 5 tokens: the largest block size is 4.
  EXPECT_NO_THROW(data->check_block_size(4));
  const std::string msg = error_of([&] { data->check_block_size(64); });
  EXPECT_THAT(msg, HasSubstr(p));
  EXPECT_THAT(msg, HasSubstr("38 for training"));
  EXPECT_THAT(msg, HasSubstr("5 for validation"));
  EXPECT_THAT(msg, HasSubstr("--block-size 4 or less"));
  Rng rng(0);
  EXPECT_THROW(data->sample_batch(rng, 2, 64), Error);  // also caught where batches are made
  // By default a stream this short is not split: all 43 tokens train, and validation scores them.
  auto whole = make_dataset(f, build_tokenizer(f, DataMode::Stream), DataMode::Stream);
  EXPECT_TRUE(whole->val_is_train());
  EXPECT_EQ(whole->size(Split::Train), 43);
  EXPECT_EQ(whole->size(Split::Val), 43);
  EXPECT_EQ(whole->max_block_size(), 42);
  const std::string m2 = error_of([&] { whole->check_block_size(64); });
  EXPECT_THAT(m2, HasSubstr("too few to hold any out"));
  EXPECT_THAT(m2, HasSubstr("--block-size 42 or less"));
}

TEST(TextFileBadInput, StreamFileTooShortForAnyBlock) {
  TextFile f = make_text_file("tiny.txt", "h");  // one token: no block fits
  auto data = make_dataset(f, build_tokenizer(f, DataMode::Stream), DataMode::Stream);
  const std::string msg = error_of([&] { data->check_block_size(1); });
  EXPECT_THAT(msg, HasSubstr("tiny.txt"));
  EXPECT_THAT(msg, HasSubstr("too short for stream mode"));
}

TEST(TextFileBadInput, LineLongerThanBlockInLinesMode) {
  TempDir tmp;
  const std::string p = tmp.write("names.txt", "emma\nbartholomew\nava\nmaximiliano\n");
  TextFile f = read_text_file(p);
  auto data = make_dataset(f, build_tokenizer(f, DataMode::Lines), DataMode::Lines);
  EXPECT_EQ(data->min_block_size(), 12);  // "bartholomew": 11 characters + <eos>
  EXPECT_NO_THROW(data->check_block_size(12));
  const std::string msg = error_of([&] { data->check_block_size(8); });
  EXPECT_THAT(msg, HasSubstr(p));
  EXPECT_THAT(msg, HasSubstr("line 2 of"));  // the first line that does not fit
  EXPECT_THAT(msg, HasSubstr("has 11 characters"));
  EXPECT_THAT(msg, HasSubstr("2 line(s) are too long"));
  EXPECT_THAT(msg, HasSubstr("--block-size to at least 12"));
  // A line of exactly T characters does not fit either (it needs T + 1 positions).
  EXPECT_THROW(data->check_block_size(11), Error);
}

TEST(TextFileBadInput, LinesModeNeedsTwoLines) {
  TextFile f = make_text_file("one.txt", "\nemma\n\n");
  const std::string msg = error_of([&] { make_dataset(f, build_tokenizer(f, DataMode::Lines), DataMode::Lines); });
  EXPECT_THAT(msg, HasSubstr("one.txt"));
  EXPECT_THAT(msg, HasSubstr("at least 2 non-empty lines"));
}

TEST(TextFileBadInput, UnknownCharactersAgainstALoadedVocabulary) {
  // A run's tokenizer meets a changed file (e.g. on resume): every new character is named
  // with its line and column.
  TextFile old_file = make_text_file("names.txt", "emma\nava\n");
  CharTokenizer tok = build_tokenizer(old_file, DataMode::Lines);
  TextFile new_file = make_text_file("names.txt", "emma\nzoe\nava\nzed\n");
  const std::string msg = error_of([&] { make_dataset(new_file, tok, DataMode::Lines); });
  EXPECT_THAT(msg, HasSubstr("names.txt"));
  EXPECT_THAT(msg, HasSubstr("'z' (U+007A) at line 2 column 1, line 4 column 1"));
  EXPECT_THAT(msg, HasSubstr("'o' (U+006F) at line 2 column 2"));
  EXPECT_THAT(msg, HasSubstr("'d' (U+0064) at line 4 column 3"));
  // A lines-mode tokenizer has no newline: stream mode cannot use it.
  EXPECT_THAT(error_of([&] { make_dataset(old_file, tok, DataMode::Stream); }),
              HasSubstr("'\\n' (U+000A) at line 1 column 5"));
  // And a stream tokenizer has no <eos>: lines mode cannot use it.
  CharTokenizer stream_tok = build_tokenizer(old_file, DataMode::Stream);
  EXPECT_THAT(error_of([&] { make_dataset(old_file, stream_tok, DataMode::Lines); }), HasSubstr("<eos>"));
}

TEST(DataMode, ParseAndPrint) {
  EXPECT_EQ(parse_data_mode("lines"), DataMode::Lines);
  EXPECT_EQ(parse_data_mode("stream"), DataMode::Stream);
  EXPECT_EQ(parse_data_mode("auto"), DataMode::Auto);
  EXPECT_THROW(parse_data_mode("words"), UsageError);
  EXPECT_STREQ(to_string(DataMode::Stream), "stream");
}

TEST(DataMode, AutoRule) {
  auto mode_of = [](const std::string& text) { return resolve_mode(make_text_file("f.txt", text), DataMode::Auto); };
  EXPECT_EQ(mode_of("emma\nolivia\nava\nisabella\nsophia\n"), DataMode::Lines);
  // Prose: long lines -> stream.
  EXPECT_EQ(mode_of(repeat_lines("Before we proceed any further, hear me speak.", 50)), DataMode::Stream);
  // Short lines separated by blank lines (speeches, verse) -> stream.
  EXPECT_EQ(mode_of(repeat_lines("All:\nSpeak, speak.\n", 50)), DataMode::Stream);
  // The median threshold is inclusive: 32 -> lines, 33 -> stream.
  EXPECT_EQ(mode_of(repeat_lines(std::string(32, 'x'), 9) + std::string(200, 'y')), DataMode::Lines);
  EXPECT_EQ(mode_of(repeat_lines(std::string(33, 'x'), 9) + "y"), DataMode::Stream);
  // The empty-line threshold is inclusive: 1 empty line in 100 -> lines; 2 in 101 -> stream.
  EXPECT_EQ(mode_of(repeat_lines("ab", 99) + "\n"), DataMode::Lines);
  EXPECT_EQ(mode_of(repeat_lines("ab", 99) + "\n\n"), DataMode::Stream);
  // A single line cannot be split into train and val lines -> stream.
  EXPECT_EQ(mode_of("hello\n"), DataMode::Stream);
  // An explicit mode is kept.
  EXPECT_EQ(resolve_mode(make_text_file("f", "hello\n"), DataMode::Lines), DataMode::Lines);
  // Lengths count characters, not bytes: "éé" (4 bytes) is a 2-character line.
  const LineStats s = line_stats("\xC3\xA9\xC3\xA9\n\nabc\n");
  EXPECT_EQ(s.lines, 3);
  EXPECT_EQ(s.empty_lines, 1);
  EXPECT_EQ(s.median_length, 2);
  EXPECT_EQ(s.max_length, 3);
  EXPECT_EQ(s.longest_line, 3);
  EXPECT_THAT(explain_auto_mode(s), HasSubstr("stream"));
}
