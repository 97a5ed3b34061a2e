// atto/tokenize/char_tokenizer.h: a character-level tokenizer over Unicode code points.
//
//   auto tok = atto::CharTokenizer::build("emma\nolivia\n", {.boundary = true,
//                                                           .include_newline = false});
//   tok.vocab_size();                       // 8: <eos> a e i l m o v (ids 0..7)
//   std::vector<int32_t> ids = tok.encode("ava");   // throws on characters not in the vocab
//   std::string s = tok.decode(ids);        // "ava"
//   nlohmann::json j = tok.to_json();       // tokenizer.json of a run directory
//   auto back = atto::CharTokenizer::from_json(j, "runs/x/tokenizer.json");
//
// Conventions
// - Token ids: special tokens first, then the characters in vocabulary order. Built from text,
//   the vocabulary is the sorted set of code points in the text (by code point value).
// - The only special token is the boundary token "<eos>" (id 0 when present). makemore-style
//   "lines" data uses it both to start a sample (BOS) and to end it (EOS). "stream" data
//   (nanoGPT-style) has no special tokens, so its vocabulary is exactly the characters
//   (65 for tinyshakespeare, as in nanoGPT). Padding needs no token: padded targets are -1,
//   which the loss ignores, and padded inputs hold the boundary id.
// - encode() never produces the boundary token; decode() skips it (it has no text);
//   id_to_string() shows it as "<eos>".
// - tokenizer.json format (version 1):
//     {"type": "char", "version": 1, "special_tokens": ["<eos>"], "chars": ["a", "b", ...]}
//   Each "chars" entry is one code point as a JSON string ("\n" for newline). Ids follow
//   the order in the file. from_json() validates all of it and throws atto::Error naming the
//   file and the field.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenize/gpt_tokenizer.h"

namespace atto {

struct CharTokenizerOptions {
  bool boundary = true;          // add the "<eos>" boundary token as id 0
  bool include_newline = false;  // keep '\n' as a character (stream data) or drop it (lines)
};

class CharTokenizer : public GptTokenizer {
 public:
  static constexpr const char* kBoundaryName = "<eos>";
  static constexpr int kFormatVersion = 1;

  CharTokenizer() = default;  // empty: vocab_size() == 0; build or load one before use

  // The sorted set of code points of `text` (valid UTF-8, else atto::Error), plus the
  // boundary token if asked. Throws if that leaves no characters.
  static CharTokenizer build(std::string_view text, const CharTokenizerOptions& opts);
  // A tokenizer with exactly these characters, ids in the order given (after the boundary).
  static CharTokenizer from_chars(std::vector<char32_t> chars, bool boundary);

  const char* kind() const override { return "char"; }
  int64_t vocab_size() const override { return static_cast<int64_t>(chars_.size()) + (boundary_ ? 1 : 0); }
  bool has_boundary() const override { return boundary_; }
  int32_t boundary_id() const override { return boundary_ ? 0 : -1; }  // -1 when there is none
  int32_t single_token(std::string_view piece) const override;
  bool open_vocabulary() const override { return false; }
  const std::vector<char32_t>& chars() const { return chars_; }

  // Id of a code point, or -1 if it is not in the vocabulary.
  int32_t id_of(char32_t cp) const;
  // The code point of a character id (not the boundary); atto::Error when out of range.
  char32_t char_of(int32_t id) const;
  bool is_boundary(int32_t id) const { return boundary_ && id == 0; }

  // Text -> ids. Throws atto::Error on invalid UTF-8 or characters not in the vocabulary; the
  // message lists each unknown character with all its positions (code-point indices), e.g.
  //   unknown character 'é' (U+00E9) at position 3 of "café"; the vocabulary was built ...
  std::vector<int32_t> encode(std::string_view text) const override;
  // Ids -> text. The boundary token is skipped; ids out of range throw atto::Error.
  std::string decode(const std::vector<int32_t>& ids) const override;
  // One token for display: "<eos>", "a", "é", "\n" (escaped control characters).
  std::string id_to_string(int32_t id) const override;

  nlohmann::json to_json() const override;
  // `where` names the source in error messages (a path, "config.json[tokenizer]", ...).
  static CharTokenizer from_json(const nlohmann::json& j, std::string_view where);
  // Parses JSON text first (syntax errors become atto::Error naming `where`).
  static CharTokenizer from_json_text(std::string_view text, std::string_view where);

  bool operator==(const CharTokenizer& other) const { return boundary_ == other.boundary_ && chars_ == other.chars_; }

 private:
  void index();  // fills the lookup tables from chars_

  bool boundary_ = false;
  std::vector<char32_t> chars_;
  std::vector<int32_t> ascii_ids_;  // [128] ids of ASCII code points, -1 when absent
  std::unordered_map<char32_t, int32_t> other_ids_;
};

}  // namespace atto
