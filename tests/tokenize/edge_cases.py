#!/usr/bin/env python3
"""tests/tokenize/edge_cases.py OUT: writes OUT, a UTF-8 text (about 40 KB) of edge cases for GPT-2's
pre-tokeniser, for tests/cli/test_gpt2_tokenizer.sh to encode with atto and with tiktoken.

GPT-2's split pattern is
    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
so what matters is where letters (L), numbers (N), other characters and Unicode White_Space meet:
scripts and their marks, digits of every kind, the (lower-case, ASCII-apostrophe only)
contractions, whitespace that is and is not \\s (U+180E, U+200B and U+FEFF are not), runs of
spaces before words, newlines and the end of the text, and characters outside the BMP.

The text is valid UTF-8 (Python refuses to encode lone surrogates), deterministic (no random
module: a fixed LCG) and starts and ends with whitespace. Noncharacters (U+FFFF, U+10FFFF...),
NUL and other control characters are included: they are Unicode scalar values, valid in UTF-8.
"""
import sys


def sections():
    s = []
    # Whitespace at the very start (a space, a tab, spaces) before the first word.
    s.append(" \t  Leading whitespace, then text.\n")

    s.append("== Latin with diacritics ==\n"
             "Café naïve façade coöperate résumé Ångström Øresund Łódź Dvořák Straße Ærø ŒUVRE œuvre "
             "Ĳssel ĳs Ǆemal ǅ ǆ ﬁnance ﬂow Iñtërnâtiônàlizætiøn. Ça va? Être ou ne pas être.\n"
             "Decomposed: Cafe\u0301 nai\u0308ve A\u030angstro\u0308m e\u0301\u0301\u0301 "
             "o\u0302\u0323 Z\u0351\u0359\u0300a\u036f\u0350l\u0353g\u0308o\u0301 \u0301leading mark\n"
             "Vietnamese: Tiếng Việt có dấu: Nguyễn Thị Minh Khai, Hà Nội, phở bò.\n")
    s.append("== Greek, Cyrillic ==\n"
             "Ελληνικά: Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο; ΑΒΓΔ αβγδ ϐϑϕ ς.\n"
             "Русский: Съешь же ещё этих мягких французских булок, да выпей чаю. ЁЛКА ёлка Ѣ ѣ.\n"
             "Українська: Ґанок, їжак, є. Қазақша: Әә Ғғ Ққ Ңң Өө Ұұ Үү Һһ Іі.\n")
    s.append("== Arabic, Hebrew (right to left) ==\n"
             "العربية: مرحبا بالعالم! هذا نصٌّ عَرَبِيٌّ مُشَكَّل، وأرقام ٠١٢٣٤٥٦٧٨٩ و ۰۱۲۳۴۵۶۷۸۹.\n"
             "فارسی: سلام دنیا؛ ۱۴۰۳ ـــــ كشیدہ\u200cها (ZWNJ inside).\n"
             "עברית: שָׁלוֹם עוֹלָם! \u05d0\u05b8\u05d1\u05b8\u05bc\u05d0 ״ציטוט״ ׳גרש׳ 123.\n"
             "Mixed: abc \u202eevil\u202c \u200fRLM\u200e LRM \u2066isolate\u2069 end.\n")
    s.append("== Devanagari, Bengali, Tamil ==\n"
             "हिन्दी: नमस्ते दुनिया। क्षत्रिय ज्ञान श्री अंग्रेज़ी ॐ ०१२३४५६७८९ ।।\n"
             "বাংলা: আমার সোনার বাংলা ০১২৩৪৫৬৭৮৯। தமிழ்: வணக்கம் உலகம் ௦௧௨௩௰௱௲.\n")
    s.append("== Thai, Lao, Khmer, Tibetan ==\n"
             "ภาษาไทย: สวัสดีชาวโลก ๐๑๒๓๔๕๖๗๘๙ กรุงเทพมหานคร อมรรัตนโกสินทร์ ฯลฯ ๆ\n"
             "ລາວ: ສະບາຍດີ ໐໑໒ ខ្មែរ: សួស្តីពិភពលោក ០១២ བོད་ཡིག: བཀྲ་ཤིས་བདེ་ལེགས། ༠༡༢\n")
    s.append("== CJK, kana, Hangul ==\n"
             "中文：你好，世界！这是一个测试。繁體中文：臺灣、香港。数字：一二三 〇 ０１２３。\n"
             "日本語：こんにちは世界。カタカナ ｶﾀｶﾅ ひらがな、漢字。「かぎかっこ」『二重』ー〜\n"
             "한국어: 안녕하세요 세계! 한글 자모 ᄀᄁᄂ ㄱㄴㄷ ㅏㅑ 갃 똠방각하.\n"
             "Ext B: \U00020000\U00020001\U0002A6D6 \U0002F800 \u3400\u4DB5 mixed中文and English混合text.\n"
             "Ideographic space:\u3000两\u3000个\u3000\u3000空格\u3000\n")
    s.append("== Emoji ==\n"
             "Faces: \U0001F600\U0001F603\U0001F604 \U0001F601 text\U0001F602text \U0001F923!\n"
             "ZWJ: \U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466 family, "
             "\U0001F469\u200D\U0001F4BB coder, \U0001F3F3\uFE0F\u200D\U0001F308 flag, "
             "\U0001F9D1\U0001F3FF\u200D\U0001F91D\u200D\U0001F9D1\U0001F3FB people\n"
             "Skin tones: \U0001F44D\U0001F3FB\U0001F44D\U0001F3FC\U0001F44D\U0001F3FD\U0001F44D\U0001F3FE\U0001F44D\U0001F3FF \U0001F3FD alone\n"
             "Flags: \U0001F1E9\U0001F1EA \U0001F1EF\U0001F1F5 \U0001F1FA\U0001F1F8\U0001F1EC\U0001F1E7 \U0001F1E6 "
             "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F Scotland\n"
             "Keycaps and variation selectors: 1\uFE0F\u20E3 #\uFE0F\u20E3 \u2764\uFE0F \u2764\uFE0E \u263A \u2603\uFE0F "
             "\u00A9\uFE0F \u2122 a\uFE0Fb\n"
             "Tag characters: \U000E0001\U000E0020\U000E0041\U000E007E\U000E007F text\U000E0001\n")
    s.append("== Combining marks ==\n"
             "a\u0300\u0301\u0302\u0303\u0304 \u0301\u0302 alone, x\u20DD circled, 1\u0332 2\u0332 underlined, "
             "\u0915\u094D\u0937 \u0E01\u0E34\u0E4A \u05E9\u05C1\u05BC zalgo: "
             "h\u0334\u0335\u0336e\u0337\u0338l\u0321\u0322l\u0327\u0328o\u0361\u035C\n")
    s.append("== Digits and numbers ==\n"
             "ASCII 0123456789 3.14159 1,234,567 -42 +7 1e10 0x1F 0b1010 007 12:30 2024-01-15 99.9%\n"
             "Arabic-Indic ٠١٢٣٤٥٦٧٨٩ Extended ۰۱۲۳۴۵۶۷۸۹ Devanagari ०१२३४५६७८९ Bengali ০১২৩৪৫৬৭৮৯\n"
             "Thai ๐๑๒๓๔๕๖๗๘๙ Fullwidth ０１２３４５６７８９ Mathematical \U0001D7D8\U0001D7D9\U0001D7DA\U0001D7CE\U0001D7CF\n"
             "Superscripts x² y³ z¹ 10⁻⁶ ⁰⁴⁵ Subscripts H₂O C₆H₁₂O₆ ₀₁ Fractions ½ ¼ ¾ ⅓ ⅞ 1½\n"
             "Roman numerals Ⅰ Ⅱ Ⅲ Ⅳ Ⅻ ⅻ ⅿ ↀ Circled ① ② ⑳ ❶ ⓿ Other ፩ ፪ 𐌠 〡〢 ꘠꘡\n"
             "Letters+digits: abc123def 123abc abc١٢٣ ٣٤abc x²y ⅻth 4th 1st 2nd 3rd\n"
             "Spaced digits: 1 2 3  4   5 ١ ٢ ٣ ０ １\n")
    s.append("== Contractions ==\n"
             "it's don't they're we've I'm you'll he'd she's can't won't shouldn't've y'all'd've\n"
             "IT'S DON'T THEY'RE WE'VE I'M YOU'LL HE'D It'S Don'T They'Re We'Ve I'M You'Ll He'D\n"
             "Curly: it’s don’t they’re we’ve I’m you’ll he’d ‘quoted’ “double”\n"
             "Edge: 's 't 're 've 'm 'll 'd '\n'sss 'llama 'dog 'reed 'tis 'twas rock 'n' roll o'clock\n"
             "'s'S''s'''s 'x 'ß ' s '123 '  's ''' '\"' ''ll'' x'' '\t's\n"
             "Possessives: James's Jesus' the dogs' the 90's '90s Müller's Ελλάδα's 東京's\n"
             "'ll've'd're'm's't at once; end with apostrophe'\n")
    s.append("== Spaces and whitespace ==\n"
             "one  two   three    four     five\n"
             "tab\tseparated\t\tvalues\t \tmixed \t \t end\n"
             "trailing space before newline \n"
             "trailing spaces before newline    \n"
             "trailing tab before newline\t\n"
             "CRLF line\r\nanother CRLF line\r\nlone CR\rafter CR\n"
             "vertical\u000Btab and form\u000Cfeed \u000B\u000C between\n"
             "NEL\u0085line\u0085\u0085two NELs\n"
             "LINE\u2028SEPARATOR PARAGRAPH\u2029SEPARATOR \u2028\u2029\n"
             "nbsp\u00A0word\u00A0\u00A0two \u00A0mixed\u00A0 10\u00A0km\n"
             "en-quad\u2000em-quad\u2001en\u2002em\u2003three\u2004four\u2005six\u2006figure\u2007"
             "punct\u2008thin\u2009hair\u200Aend\n"
             "all U+2000-200A:\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200Aword\n"
             "narrow nbsp\u202Fword, medium math\u205Fspace, ogham\u1680mark, ideographic\u3000space\n"
             "not whitespace: mongolian\u180Evowel, zero\u200Bwidth\u200B\u200Bspace, bom\uFEFFinside, "
             "word joiner\u2060here, zwnj\u200Cand zwj\u200D\n"
             "space then ZWSP \u200B then space, \u180E leading MVS, \uFEFF leading BOM\n"
             "blank lines follow\n\n\n\n"
             "spaces on a line alone\n     \n\t\t\n \u00A0 \n"
             "spaces then newline then spaces   \n   indented\n"
             "    indented by four\n\tindented by a tab\n"
             "\u3000\u3000indented by ideographic spaces\n")
    s.append("== 500 spaces ==\n" + " " * 500 + "word after 500 spaces\n"
             + "a" + " " * 500 + "\n" + "\t" * 50 + " " * 50 + "x\n"
             + " " * 250 + "\u00A0" * 10 + " " * 240 + "!\n")
    s.append("== Punctuation runs ==\n"
             "Wait... what?!?! No!!! Really??? ... .... ..... …… — – - -- --- ---- ==== ***** ~~~ ___ ^^^\n"
             "«guillemets» ‹single› „German“ ‚low‘ 「corner」 【lenticular】 ¿Qué? ¡Olé! ؟ ، ؛ ।॥ 。、！？\n"
             "@#$%^&*()_+-=[]{}|;':\",./<>?`~ \\ // \\\\ /* */ <!-- --> => -> <- <=> != == === !== && ||\n"
             "§¶†‡•‣⁂※ ©®™ °±×÷ ∞≈≠≤≥ ∑∏∫√ ←↑→↓ ♠♣♥♦ ♪♫ ☐☑☒ ✓✗ €£¥₹₽₿¢ $5 €10 ¥100 10$ 5€\n"
             "a.b,c;d:e!f?g (h) [i] {j} <k> \"l\" 'm' `n` ...o... !!p!! ??q?? --r-- __s__ **t**\n"
             "    !!!\n   ???   \n  ...  ,,, \n")
    s.append("== Code ==\n"
             "def f(x: int) -> int:\n    return x ** 2 + 3 * x - 1  # comment\n\n"
             "int main(int argc, char** argv) {\n\tstd::vector<int> v{1, 2, 3};\n"
             "\tfor (auto& e : v) std::cout << e << '\\n';\n\treturn 0;\n}\n"
             "{\"key\": \"value\", \"n\": [1, 2.5, -3e-7, true, null], \"nested\": {\"a\": {}}}\n"
             "https://example.com/path/to/page?query=1&x=%20y#frag mailto:user@example.org\n"
             "SELECT * FROM users WHERE name LIKE '%o''brien%' AND id >= 10;\n"
             "regex: ^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+)@\\w+\\.[a-z]{2,}$\n"
             "<html><body class=\"x\"><p>Hello&nbsp;&amp;&lt;world&gt;</p></body></html>\n"
             "$ ls -la | grep '\\.txt$' > out.txt 2>&1 && echo \"done\"\n"
             "camelCaseIdentifier snake_case_identifier SCREAMING_CASE kebab-case-id __dunder__ x1y2z3\n"
             "0xDEADBEEF 0o755 1_000_000 3.0f 1e-9 .5 5. i++ --j a+=1 b<<=2 c>>>3\n")
    s.append("== Special-token text (ordinary text here) ==\n"
             "<|endoftext|> text<|endoftext|>text <|endoftext|><|endoftext|> < |endoftext| > <|endoftext\n"
             "<|fim_prefix|> <|im_start|>user<|im_end|> <|startoftext|> |endoftext|> <|ENDOFTEXT|>\n")
    s.append("== Replacement, private use, noncharacters, controls ==\n"
             "replacement \uFFFD char \uFFFD\uFFFD\uFFFDx, specials \uFFFC \uFFF9\uFFFA\uFFFB\n"
             "private use \uE000\uE001\uF8FF \U000F0000\U000FFFFD \U00100000\U0010FFFD word\uE000word\n"
             "noncharacters \uFDD0\uFDEF \uFFFE\uFFFF \U0001FFFE\U0001FFFF \U0010FFFE\U0010FFFF end\n"
             "controls \u0000 NUL \u0001\u0002\u0003\u0007\u0008\u001B[31mred\u001B[0m \u001F\u007F DEL "
             "\u0080\u0081\u009F C1\n"
             "soft\u00ADhyphen, combining grapheme joiner a\u034Fb, interlinear \uFFF9a\uFFFAb\uFFFB\n")
    s.append("== Outside the BMP ==\n"
             "\U0001F600 \U00020000 \U0001D400\U0001D401\U0001D402 (math bold ABC) \U0001D49C script "
             "\U00010348 gothic \U00010400\U00010428 deseret \U0001F4A9 \U0001F9E0 \U0001FAE0 "
             "\U0001F170\U0001F171 \U00013000 hieroglyph \U0001F0A1 card \U0001D11E clef\n"
             "letters\U0001D400\U0001D401digits\U0001D7CEtext \U00020000\U00020001 \U0001F600\U0001F600\U0001F600\n")
    return s


class Lcg:
    """A fixed 64-bit LCG: the same numbers on every Python."""

    def __init__(self, seed):
        self.x = seed

    def below(self, n):
        self.x = (self.x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return (self.x >> 33) % n


def long_words(rng):
    letters = "abcdefghijklmnopqrstuvwxyz"
    rand_word = "".join(letters[rng.below(26)] for _ in range(1000))
    return ("== Very long words ==\n"
            + rand_word + "\n"
            + " " + "a" * 1000 + "\n"
            + "abc" * 333 + "d\n"
            + "Ж" * 1000 + " " + "中" * 1000 + "\n"
            + "7" * 1000 + " " + "٣" * 200 + "\n"
            + "!" * 1000 + "\n"
            + "\U0001F600" * 300 + "\n"
            + "é" * 300 + " " + "e\u0301" * 300 + "\n")


# Atoms for the mixed section: glued together with no separator, so that every kind meets every
# other kind at a boundary (space before a letter, a number, punctuation, a newline...).
ATOMS = [
    "the", "The", "Hello", "world", "naïve", "Straße", "Ελλάδα", "Москва", "مرحبا", "שלום", "नमस्ते",
    "สวัสดี", "中文", "日本語", "한국어", "\U00020000", "\U0001D400", "x", "I",
    "0", "42", "3.14", "٣", "०", "７", "²", "ⅻ", "½", "①", "\U0001D7D8",
    " ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\u000B", "\u000C", "\u0085", "\u00A0", "\u2003", "\u3000",
    "\u205F", "\u2028", "\u1680", "\u202F", "\u180E", "\u200B", "\uFEFF", "\u200D",
    "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "’s", "'", "''",
    ".", ",", "!", "?", "...", "—", "-", "(", ")", "\"", "«", "»", "。", "、", "$", "%", "#", "@", "_",
    "<|endoftext|>", "\uFFFD", "\uE000", "\u0301", "\u0308", "\u094D",
    "\U0001F600", "\U0001F44D\U0001F3FD", "\U0001F1E9\U0001F1EA", "\U0001F468\u200D\U0001F469\u200D\U0001F467",
    "\U000E0001", "\U000E0041", "\u2764\uFE0F",
]


def mixed(rng, lines):
    out = ["== Mixed (generated) ==\n"]
    for _ in range(lines):
        n = 8 + rng.below(40)
        out.append("".join(ATOMS[rng.below(len(ATOMS))] for _ in range(n)) + "\n")
    return "".join(out)


def main():
    if len(sys.argv) != 2:
        print("usage: edge_cases.py OUT", file=sys.stderr)
        return 2
    rng = Lcg(20240611)
    text = "".join(sections()) + long_words(rng) + mixed(rng, 160)
    # Whitespace at the very end: spaces after the last word, a newline, more spaces and tabs.
    text += "the end   \n \t  "
    data = text.encode("utf-8")   # raises on a lone surrogate: only valid UTF-8 gets out
    with open(sys.argv[1], "wb") as f:
        f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
