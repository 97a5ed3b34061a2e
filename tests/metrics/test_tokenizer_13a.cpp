#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "metrics/text_ops.h"
#include "metrics/tokenizer_13a.h"

using namespace atto::metrics;

// Expected outputs: sacreBLEU's Tokenizer13a steps (tokenizer_13a.py + tokenizer_re.py, the
// same regexes and replacement order) run through Python 3's `re` on each input.
TEST(Tokenizer13a, MatchesSacrebleuOnTrickyInputs) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"The dog bit the man.", "The dog bit the man ."},
      {"It wasn't surprising.", "It wasn't surprising ."},  // apostrophe is not split
      {"3.14, 1,000 and 5-4", "3.14 , 1,000 and 5 - 4"},    // digits guard . and ,
      {"&quot;Hi&quot; &amp; bye&lt;3&gt;", "\" Hi \" & bye < 3 >"},
      {"<skipped> foo-\nbar\nbaz", "foobar baz"},  // <skipped> removed, "-\n" joins
      {"a/b (c) [d] {e} $5 @x #y ~z ^w |v _u `t", "a / b ( c ) [ d ] { e } $ 5 @ x # y ~ z ^ w | v _ u ` t"},
      {"well-known 1990-2000 x-1 1-2-3", "well-known 1990 - 2000 x-1 1 - 2 - 3"},
      {"U.S.A. e.g., etc.,", "U . S . A . e . g . , etc . ,"},
      {"a..b ,,c .5 5. 5.a a.5", "a . . b , , c . 5 5 . 5 . a a . 5"},
      {"é. .é ü,ü 日本.語", "é . . é ü , ü 日本 . 語"},  // multi-byte neighbours
      {"x\u00a0y\u3000z\u2028w", "x y z w"},             // Python whitespace, not just ASCII
      {"&amp;lt; &amp;amp;", "< & amp ;"},               // entities unescaped in order, once
      {"tab\there\t", "tab here"},
      {"Preis: 3,50€ – günstig!", "Preis : 3,50€ – günstig !"},
      {"'quote' \"dq\"", "'quote' \" dq \""},
      {"1.2.3-4,5", "1.2.3 - 4,5"},
      {"a-\n-\nb", "ab"},
      {"", ""},
      {"   ", ""},
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(tokenize_13a(in), want) << "input: " << in;
}

TEST(TextOps, SplitUsesPythonWhitespace) {
  const auto w = text::split(" a\u00a0b\u0085c\u200bd\u3000 ");
  ASSERT_EQ(w.size(), 3u);  // U+200B (zero width space) is not whitespace in Python
  EXPECT_EQ(w[0], "a");
  EXPECT_EQ(w[1], "b");
  EXPECT_EQ(w[2], "c\u200bd");
  EXPECT_EQ(text::rstrip("ab \t\u00a0"), "ab");
  EXPECT_EQ(text::rstrip("  "), "");
  EXPECT_EQ(text::remove_whitespace(" a b\tc\n"), "abc");
}

TEST(TextOps, LowerCoversNonAsciiLikePython) {
  EXPECT_EQ(text::lower("ÉCOLE Straße ЖУК ΑΒΓ"), "école straße жук αβγ");
  EXPECT_EQ(text::lower("\u0130"), "i\u0307");  // Python's 'İ'.lower()
  EXPECT_EQ(text::lower("ABC xyz 123"), "abc xyz 123");
}
