#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "support.h"
#include "tokenize/utf8.h"

using namespace atto;
using atto::test::error_of;

TEST(Utf8, DecodesOneToFourByteSequences) {
  // $ (1 byte), é (2), € (3), 𐍈 (4)
  const std::string s = "$\xC3\xA9\xE2\x82\xAC\xF0\x90\x8D\x88";
  EXPECT_EQ(utf8::decode(s), (std::vector<char32_t>{0x24, 0xE9, 0x20AC, 0x10348}));
  EXPECT_EQ(utf8::count(s), 4u);
  EXPECT_FALSE(utf8::find_invalid(s).has_value());
}

TEST(Utf8, BoundaryCodePointsRoundTrip) {
  const std::vector<char32_t> cps = {0x0, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFD, 0xFFFF, 0x10000, 0x10FFFF};
  const std::string s = utf8::encode(cps);
  EXPECT_EQ(s.size(), 1u + 1 + 2 + 2 + 3 + 3 + 3 + 3 + 3 + 4 + 4);
  EXPECT_EQ(utf8::decode(s), cps);
}

TEST(Utf8, EncodeRejectsNonScalarValues) {
  EXPECT_THROW(utf8::encode(char32_t{0xD800}), Error);
  EXPECT_THROW(utf8::encode(char32_t{0xDFFF}), Error);
  EXPECT_THROW(utf8::encode(char32_t{0x110000}), Error);
}

struct BadCase {
  const char* name;
  std::string bytes;
  size_t offset;
  int64_t line;
  const char* reason_part;
};

TEST(Utf8, RejectsInvalidSequencesWithOffsetAndLine) {
  const std::vector<BadCase> cases = {
      {"stray continuation", "ab\x80", 2, 1, "continuation"},
      {"invalid byte 0xFF", "a\nb\xFF", 3, 2, "0xFF"},
      {"0xC0 start byte", "\xC0\xAF", 0, 1, "0xC0"},
      {"overlong 3-byte slash", "x\xE0\x80\xAF", 1, 1, "overlong"},
      {"overlong 4-byte", "\xF0\x80\x80\x80", 0, 1, "overlong"},
      {"truncated at end", "ok\n\n\xE2\x82", 4, 3, "truncated"},
      {"truncated by ASCII",
       "\xC3"
       "a",
       0, 1, "truncated"},
      {"high surrogate", "\xED\xA0\x80", 0, 1, "surrogate U+D800"},
      {"low surrogate", "ab\xED\xBF\xBF", 2, 1, "surrogate U+DFFF"},
      {"above U+10FFFF", "\xF4\x90\x80\x80", 0, 1, "above U+10FFFF"},
      {"0xF5 start byte", "\xF5\x80\x80\x80", 0, 1, "0xF5"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto issue = utf8::find_invalid(c.bytes);
    ASSERT_TRUE(issue.has_value());
    EXPECT_EQ(issue->byte_offset, c.offset);
    EXPECT_EQ(issue->line, c.line);
    EXPECT_NE(issue->reason.find(c.reason_part), std::string::npos) << issue->reason;
    const std::string msg = error_of([&] { utf8::decode(c.bytes, "file 'x.txt'"); });
    EXPECT_NE(msg.find("file 'x.txt'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("byte offset " + std::to_string(c.offset)), std::string::npos) << msg;
    EXPECT_NE(msg.find("line " + std::to_string(c.line)), std::string::npos) << msg;
  }
}

TEST(Utf8, ValidInputAfterMultiByteKeepsCorrectOffsets) {
  // The bad byte follows a 2-byte and a 3-byte character: offset counts bytes, not characters.
  const std::string s = "\xC3\xA9\xE2\x82\xAC\n\x80";
  auto issue = utf8::find_invalid(s);
  ASSERT_TRUE(issue.has_value());
  EXPECT_EQ(issue->byte_offset, 6u);
  EXPECT_EQ(issue->line, 2);
}

TEST(Utf8, DescribeAndQuoteEscapeControlCharacters) {
  EXPECT_EQ(utf8::describe(U'\n'), "'\\n' (U+000A)");
  EXPECT_EQ(utf8::describe(0xE9), "'\xC3\xA9' (U+00E9)");
  EXPECT_EQ(utf8::describe(0x07), "'\\x07' (U+0007)");
  EXPECT_EQ(utf8::display(0x85), "\\u{85}");
  EXPECT_EQ(utf8::quote("a\tb"), "\"a\\tb\"");
  EXPECT_EQ(utf8::quote("abcdef", 3), "\"abc...\"");
}
