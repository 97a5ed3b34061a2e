// A GPT's SentencePiece tokenizer rebuilt from its pieces (a GGUF vocabulary of llama's form):
// spm_proto writes SentencePiece's model file without its generated protobuf code.
#include <gmock/gmock.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "support.h"
#include "tokenize/spm_tokenizer.h"

using namespace atto;

namespace {

using atto::test::error_of;
using ::testing::HasSubstr;

std::string training_text() {
  std::string t;
  const char* lines[] = {"the cat sat on the mat, 1234 times.", "  two  spaces   and tabs\there",
                         "über café naïve — déjà vu", "RED green Blue 42 7 99", "the dog ran under the table"};
  for (int i = 0; i < 60; ++i) t += std::string(lines[i % 5]) + "\n";
  return t;
}

const SpmGptTokenizer& trained() {
  static const SpmGptTokenizer tok = SpmGptTokenizer::train(training_text(), 400, /*boundary=*/false);
  return tok;
}

// Texts with runs of spaces, digits, characters training never saw (byte fallback), newlines.
const std::vector<std::string> kTexts = {"the cat sat", "  two  spaces ", "1234567 42", "über ☃ 日本 x",
                                         "a\nb\n\nc",   " leading",       "trailing  ", "déjà\tvu"};

TEST(SpmGptTokenizer, RebuiltFromItsPiecesItEncodesAsTrained) {
  const SpmGptTokenizer& tok = trained();
  EXPECT_FALSE(tok.add_dummy_prefix());
  const std::vector<SpmPiece> pieces = tok.pieces();
  ASSERT_EQ(static_cast<int64_t>(pieces.size()), tok.vocab_size());
  EXPECT_EQ(pieces[0].type, 2);  // <unk>
  EXPECT_EQ(pieces[2].piece, "</s>");
  EXPECT_EQ(pieces[3].piece, "<0x00>");
  EXPECT_EQ(pieces[3].type, 6);
  const SpmGptTokenizer again = SpmGptTokenizer::from_pieces(pieces, false, false, "test");
  EXPECT_FALSE(again.add_dummy_prefix());
  for (const std::string& s : kTexts) {
    EXPECT_EQ(again.encode(s), tok.encode(s)) << s;
    EXPECT_EQ(again.decode(again.encode(s)), s);
  }
  EXPECT_EQ(again.pieces().size(), pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_EQ(again.pieces()[i].piece, pieces[i].piece);
    EXPECT_EQ(again.pieces()[i].score, pieces[i].score);
    EXPECT_EQ(again.pieces()[i].type, pieces[i].type);
  }
}

// Llama's own tokenizer puts a space before the text (add_dummy_prefix, llama.cpp's
// add_space_prefix): the first word is encoded as it is after a space, and decoding drops it.
TEST(SpmGptTokenizer, DummyPrefixPutsASpaceBeforeTheText) {
  const SpmGptTokenizer prefixed = SpmGptTokenizer::from_pieces(trained().pieces(), false, true, "test");
  EXPECT_TRUE(prefixed.add_dummy_prefix());
  EXPECT_EQ(prefixed.encode("the cat"), trained().encode(" the cat"));
  EXPECT_NE(prefixed.encode("the cat"), trained().encode("the cat"));
  EXPECT_EQ(prefixed.decode(prefixed.encode("the cat")), "the cat");
}

TEST(SpmGptTokenizer, BadPiecesAreNamed) {
  auto err = [](std::vector<SpmPiece> p) {
    return error_of([&] { SpmGptTokenizer::from_pieces(p, false, false, "f.gguf"); });
  };
  std::vector<SpmPiece> p = trained().pieces();
  auto dup = p;
  dup[300].piece = dup[301].piece;
  EXPECT_THAT(err(dup), HasSubstr("tokens 300 and 301 are both"));
  auto no_byte = p;
  no_byte[10].type = 1;
  EXPECT_THAT(err(no_byte), HasSubstr("255 byte pieces"));
  auto bad_byte = p;
  bad_byte[10].piece = "<0xZZ>";
  EXPECT_THAT(err(bad_byte), HasSubstr("not of the form <0xNN>"));
  auto special = p;
  special[1].type = 1;
  EXPECT_THAT(err(special), HasSubstr("<s> 1 and </s> 2 (type 3)"));
  auto empty = p;
  empty[300].piece.clear();
  EXPECT_THAT(err(empty), HasSubstr("token 300"));
  auto nan = p;
  nan[300].score = NAN;
  EXPECT_THAT(err(nan), HasSubstr("finite score"));
  EXPECT_THAT(err(std::vector<SpmPiece>(p.begin(), p.begin() + 200)), HasSubstr("200 pieces"));
  EXPECT_THAT(error_of([] { spm_proto::add_dummy_prefix("\x1a\xff"); }), HasSubstr("SentencePiece model"));
}

}  // namespace
