// TextStream over byte-level BPE: a token may be part of a character; pieces never split one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "generate/generate.h"
#include "tokenize/bpe.h"
#include "tokenize/utf8.h"

using namespace atto;
using namespace atto::gen;

TEST(TextStream, PiecesNeverEndInsideAUtf8Character) {
  const std::string_view corpus[] = {"plain ascii words only, words, words"};
  const BpeTokenizer tok = BpeTokenizer::train(corpus, {.vocab_size = 300, .end_of_text = false});
  const std::string text = "a\xE2\x82\xAC b \xF0\x9F\x98\x80!\xC3\xA9";  // €, 😀 and é: bytes of their own
  const std::vector<int32_t> ids = tok.encode(text);
  ASSERT_GT(ids.size(), 8u);  // the multi-byte characters are several byte tokens each
  for (const std::vector<std::string>& stops : {std::vector<std::string>{}, std::vector<std::string>{"!"}}) {
    std::vector<std::string> pieces;
    TextStream ts(tok, 1, stops, [&](int64_t, const std::string& piece, int32_t, bool) {
      pieces.push_back(piece);
      return true;
    });
    bool going = true;
    for (size_t i = 0; i < ids.size() && going; ++i) going = ts.on_token(0, ids[i]);
    ts.finish(0, Sample{});
    std::string joined;
    for (const std::string& p : pieces) {
      EXPECT_FALSE(utf8::find_invalid(p).has_value()) << "a piece splits a character";
      joined += p;
    }
    const std::string want = stops.empty() ? text : text.substr(0, text.find('!'));
    EXPECT_EQ(joined, want);
    EXPECT_EQ(ts.take()[0].text, want);
  }
}
