// atto/tokenize/tokenizer.h: the tokenizer interface of sequence-to-sequence models, with
// three kinds behind it: characters, words and SentencePiece pieces.
//
//   std::vector<std::string> lines = {"the cat sat", "a dog ran"};
//   auto tok = atto::train_tokenizer({.type = TokenizerKind::Word}, lines, run_dir);  // spm writes spm.model
//   // words by count, ties in byte order: a=4 cat=5 dog=6 ran=7 sat=8 the=9
//   std::vector<int32_t> ids = tok->encode("the dog sat up"); // {9, 6, 8, 3}: "up" -> <unk>
//   tok->decode(ids);                                         // "the dog sat <unk>"
//   nlohmann::json j = tok->to_json();                       // -> run_dir/tokenizer.json
//   auto back = atto::load_tokenizer_json(j, "run/tokenizer.json", run_dir);
//
// Conventions (every seq2seq tokenizer; docs/seq2seq-data.md)
// - Special tokens have fixed ids: <pad> = 0, <bos> = 1, <eos> = 2, <unk> = 3. Ordinary tokens
//   start at id 4. The model sees [<bos>] + encode(text) + [<eos>] (the caller adds them;
//   encode() never does), padded with <pad>.
// - encode() never fails on unknown symbols: they become <unk> (unlike the GPT's
//   CharTokenizer, which rejects unknown characters). It throws atto::Error only on invalid
//   UTF-8.
// - decode() skips <pad>, <bos> and <eos>; <unk> shows as "<unk>" (char and word) or " ⁇ "
//   (SentencePiece's own surface). Ids outside the vocabulary throw atto::Error.
// - tokenizer.json has "type" ("char", "word" or "spm") and "version"; load_tokenizer_json()
//   dispatches on "type" and validates everything, naming `where` in errors. A SentencePiece
//   tokenizer also needs its model file (spm.model) next to tokenizer.json.
//
// CharSeqTokenizer (this file) is the character-level seq2seq tokenizer: the code points of the
// training text (sorted, as CharTokenizer), after the 4 special tokens. Its tokenizer.json is
// CharTokenizer's format with the 4 special tokens:
//   {"type": "char", "version": 1, "special_tokens": ["<pad>", "<bos>", "<eos>", "<unk>"],
//    "chars": ["a", "b", ...]}
// (a GPT char tokenizer.json, with special tokens [] or ["<eos>"], is refused here).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenize/char_tokenizer.h"

namespace atto {

inline constexpr int32_t kPadId = 0;
inline constexpr int32_t kBosId = 1;
inline constexpr int32_t kEosId = 2;
inline constexpr int32_t kUnkId = 3;
inline constexpr int32_t kNumSpecialTokens = 4;
// Names of the special tokens, indexed by id.
inline constexpr std::array<const char*, 4> kSpecialTokens = {"<pad>", "<bos>", "<eos>", "<unk>"};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual std::string type() const = 0;  // "char", "word" or "spm"
  virtual int64_t vocab_size() const = 0;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // One token for display: "<eos>", "cat", "▁the", "\n".
  virtual std::string id_to_string(int32_t id) const = 0;
  virtual nlohmann::json to_json() const = 0;
  // Writes the files tokenizer.json refers to into `dir` (spm.model); nothing for char/word.
  virtual void write_files(const std::string& dir) const { (void)dir; }

  int32_t pad_id() const { return kPadId; }
  int32_t bos_id() const { return kBosId; }
  int32_t eos_id() const { return kEosId; }
  int32_t unk_id() const { return kUnkId; }
};

class CharSeqTokenizer : public Tokenizer {
 public:
  CharSeqTokenizer() = default;  // empty: vocab_size() == 4
  // The sorted set of code points of all lines ('\n' excluded). Throws atto::Error on invalid
  // UTF-8 (naming the line) or when the lines hold no character at all.
  static CharSeqTokenizer build(const std::vector<std::string>& lines);
  static CharSeqTokenizer from_json(const nlohmann::json& j, std::string_view where);

  std::string type() const override { return "char"; }
  int64_t vocab_size() const override { return kNumSpecialTokens + chars_.vocab_size(); }
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  std::string id_to_string(int32_t id) const override;
  nlohmann::json to_json() const override;

  const std::vector<char32_t>& chars() const { return chars_.chars(); }  // ids 4, 5, ...

 private:
  explicit CharSeqTokenizer(CharTokenizer chars) : chars_(std::move(chars)) {}
  CharTokenizer chars_;  // without boundary token: its id c is our id c + 4
};

// The kinds of tokenizer, named "char", "word", "spm" and "bpe" in tokenizer.json, config.json
// and --tokenizer. A seq2seq model uses char, word or spm; a GPT char, bpe or spm (gpt_tokenizer.h).
enum class TokenizerKind { Char, Word, Spm, Bpe };
const char* to_string(TokenizerKind k);
TokenizerKind parse_tokenizer_kind(const std::string& s);  // atto::Error listing the names

// How to build a tokenizer from training text (the CLI's --tokenizer and vocabulary flags).
struct TokenizerOptions {
  TokenizerKind type = TokenizerKind::Char;
  int64_t min_count = 1;                   // word: rarer words become <unk>
  int64_t vocab_size = 0;                  // word: max vocabulary (0: all); spm: required, > 4
  std::string spm_model_type = "unigram";  // spm: "unigram" or "bpe"
};

// Builds a tokenizer of opts.type from training lines. SentencePiece writes dir/spm.model.
std::unique_ptr<Tokenizer> train_tokenizer(const TokenizerOptions& opts, const std::vector<std::string>& lines,
                                           const std::string& dir);

// Reads tokenizer.json content; `dir` is the folder holding the files it refers to.
std::unique_ptr<Tokenizer> load_tokenizer_json(const nlohmann::json& j, std::string_view where, const std::string& dir);
// Reads and parses a tokenizer.json file (its folder is `dir` above).
std::unique_ptr<Tokenizer> load_tokenizer_file(const std::string& json_path);

namespace tokenizer_detail {
// Checks "special_tokens" == ["<pad>", "<bos>", "<eos>", "<unk>"] and "version" == 1.
void check_seq2seq_header(const nlohmann::json& j, std::string_view where, const char* type);
// The file `path` as bytes; atto::Error naming it (and `what`) when missing or unreadable.
std::string read_file_bytes(const std::string& path, std::string_view what);
}  // namespace tokenizer_detail

}  // namespace atto
