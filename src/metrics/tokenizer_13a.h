// atto/metrics/tokenizer_13a.h: sacreBLEU's default BLEU tokenizer "13a" (mteval-v13a.pl).
//
//   atto::metrics::tokenize_13a("It wasn't surprising.");   // "It wasn't surprising ."
//   atto::metrics::tokenize_13a("3.14, 1,000 and 5-4");     // "3.14 , 1,000 and 5 - 4"
//
// The steps, in sacreBLEU's order (sacrebleu/tokenizers/tokenizer_13a.py and tokenizer_re.py):
//   1. remove "<skipped>"; join "-\n" (remove it); every other '\n' becomes a space;
//   2. unescape, one entity after the other: &quot; -> "   &amp; -> &   &lt; -> <   &gt; -> >
//   3. pad the line with one space on each side;
//   4. regex ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> " \1 ": split off ASCII symbols
//      { | } ~ [ \ ] ^ _ ` space ! " # $ % & ( ) * + : ; < = > ? @ /
//      (not ' , - . which the next steps handle);
//   5. regex ([^0-9])([\.,]) -> "\1 \2 ": period and comma unless preceded by a digit;
//   6. regex ([\.,])([^0-9]) -> " \1 \2": period and comma unless followed by a digit;
//   7. regex ([0-9])(-) -> "\1 \2 ": a dash after a digit;
//   8. collapse whitespace: words joined by single spaces, no leading or trailing space.
// Each regex is applied as Python's re.sub: left to right, non-overlapping matches. Whitespace in
// step 8 is Python's (see text_ops.h). The BLEU metric also right-strips each segment (and
// lowercases it when asked) before calling this, as sacreBLEU does.
#pragma once

#include <string>
#include <string_view>

namespace atto::metrics {

// Tokenizes one segment of valid UTF-8 text (no validation here).
std::string tokenize_13a(std::string_view line);

}  // namespace atto::metrics
