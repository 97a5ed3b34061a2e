// atto/tokenize/word_tokenizer.h: a word-level seq2seq tokenizer (whitespace-separated words).
//
//   auto tok = atto::WordTokenizer::build({"3 1 2", "2 2 1"}, {.min_count = 1});
//   tok.words();                 // {"2", "1", "3"}: by count, then byte order; ids 4, 5, 6
//   tok.encode("1 2 9");         // {5, 4, 3}: "9" is unknown -> <unk> (id 3)
//   tok.decode({1, 5, 4, 2});    // "1 2" (<bos>/<eos>/<pad> have no text)
//
// Conventions (see tokenizer.h for the special tokens shared by every seq2seq tokenizer)
// - Words are the runs of non-whitespace bytes, whitespace being ASCII space, \t, \n, \v, \f
//   and \r. No other normalisation: "Cat" and "cat," are two words each. Tokenize punctuation
//   beforehand (or use SentencePiece) if that matters.
// - Vocabulary: the special tokens, then the training words seen at least min_count times,
//   most frequent first, ties in byte order; max_size (if not 0) caps the total including the
//   4 special tokens (fairseq's --nwords*, Marian's --dim-vocabs count the same way).
// - A word spelled like a special token ("<unk>" in pre-processed corpora) stands for that
//   token: encode("<unk>") == {3}; such words never enter the vocabulary as words.
// - decode() joins words with single spaces; <unk> shows as "<unk>".
// - tokenizer.json (version 1):
//     {"type": "word", "version": 1, "special_tokens": ["<pad>", "<bos>", "<eos>", "<unk>"],
//      "words": ["the", "cat", ...]}
//   "words" lists ids 4, 5, ... in order; each is valid UTF-8, non-empty, without whitespace,
//   not a special token name, and not repeated (from_json() checks all of it).
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "tokenize/tokenizer.h"

namespace atto {

struct WordVocabOptions {
  int64_t min_count = 1;  // words seen fewer times stay out (they encode as <unk>)
  int64_t max_size = 0;   // cap on the vocabulary size, specials included; 0: no cap
};

class WordTokenizer : public Tokenizer {
 public:
  static constexpr int kFormatVersion = 1;

  WordTokenizer() = default;  // empty: only the special tokens
  // Counts the words of all lines. Throws atto::Error on invalid UTF-8 (naming the line), on
  // min_count < 1, on 0 < max_size <= 4, and when no word qualifies.
  static WordTokenizer build(const std::vector<std::string>& lines, const WordVocabOptions& opts = {});
  // Exactly these words as ids 4, 5, ... (validated as from_json() does).
  static WordTokenizer from_words(std::vector<std::string> words, std::string_view where = "words");
  static WordTokenizer from_json(const nlohmann::json& j, std::string_view where);

  std::string type() const override { return "word"; }
  int64_t vocab_size() const override { return kNumSpecialTokens + static_cast<int64_t>(words_.size()); }
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  std::string id_to_string(int32_t id) const override;
  nlohmann::json to_json() const override;

  // The id of one word: its id, a special token's id for its name, else kUnkId.
  int32_t id_of(std::string_view word) const;
  const std::vector<std::string>& words() const { return words_; }  // ids 4, 5, ...

  // The words of a text (split on ASCII whitespace), as views into it.
  static std::vector<std::string_view> split(std::string_view text);

 private:
  std::vector<std::string> words_;
  std::unordered_map<std::string, int32_t> ids_;  // word (or special name) -> id
};

}  // namespace atto
