#include "tokenize/tokenizer.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/json.h"
#include "base/files.h"
#include "base/error.h"
#include "tokenize/spm_tokenizer.h"
#include "tokenize/utf8.h"
#include "tokenize/word_tokenizer.h"

namespace atto {

namespace tokenizer_detail {

void check_seq2seq_header(const nlohmann::json& j, std::string_view where, const char* type) {
  auto version = j.find("version");
  ATTO_CHECK(version != j.end() && version->is_number_integer() && *version == 1,
             "tokenizer {}: a {} tokenizer needs \"version\": 1, got {}", where, type,
             version == j.end() ? "nothing" : json_util::excerpt(*version));
  nlohmann::json want = nlohmann::json::array();
  for (const char* s : kSpecialTokens) want.push_back(s);
  auto special = j.find("special_tokens");
  ATTO_CHECK(special != j.end() && *special == want,
             "tokenizer {}: \"special_tokens\" must be {} for a seq2seq {} tokenizer, got {}", where, json_util::excerpt(want), type,
             special == j.end() ? "nothing" : json_util::excerpt(*special));
}

std::string read_file_bytes(const std::string& path, std::string_view what) {
  return files::read(path, files::kTokenizerCap, what);
}

}  // namespace tokenizer_detail

// ---------------------------------------------------------------------------------------------
// CharSeqTokenizer

CharSeqTokenizer CharSeqTokenizer::build(const std::vector<std::string>& lines) {
  std::string text;
  for (size_t i = 0; i < lines.size(); ++i) {
    utf8::validate(lines[i], fmt::format("tokenizer training line {}", i + 1));
    (text += lines[i]) += '\n';
  }
  return CharSeqTokenizer(CharTokenizer::build(text, {.boundary = false, .include_newline = false}));
}

std::vector<int32_t> CharSeqTokenizer::encode(std::string_view text) const {
  utf8::validate(text, "text to encode");
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const int32_t id = chars_.id_of(utf8::next(text, pos));
    ids.push_back(id < 0 ? kUnkId : id + kNumSpecialTokens);
  }
  return ids;
}

std::string CharSeqTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string s;
  s.reserve(ids.size());
  for (int32_t id : ids) {
    ATTO_CHECK(id >= 0 && id < vocab_size(),
               "token id {} is outside the character vocabulary "
               "(size {})",
               id, vocab_size());
    if (id == kUnkId) {
      s += kSpecialTokens[kUnkId];
    } else if (id >= kNumSpecialTokens) {
      utf8::append(s, chars_.char_of(id - kNumSpecialTokens));
    }
  }
  return s;
}

std::string CharSeqTokenizer::id_to_string(int32_t id) const {
  ATTO_CHECK(id >= 0 && id < vocab_size(),
             "token id {} is outside the character vocabulary "
             "(size {})",
             id, vocab_size());
  if (id < kNumSpecialTokens) return kSpecialTokens[static_cast<size_t>(id)];
  return utf8::display(chars_.char_of(id - kNumSpecialTokens));
}

nlohmann::json CharSeqTokenizer::to_json() const {
  nlohmann::json j = chars_.to_json();  // {"type": "char", "version": 1, ..., "chars": [...]}
  j["special_tokens"] = nlohmann::json::array();
  for (const char* s : kSpecialTokens) j["special_tokens"].push_back(s);
  return j;
}

CharSeqTokenizer CharSeqTokenizer::from_json(const nlohmann::json& j, std::string_view where) {
  ATTO_CHECK(j.is_object(), "tokenizer {}: expected a JSON object, got {}", where, j.type_name());
  auto special = j.find("special_tokens");
  const bool gpt = special != j.end() && special->is_array() && special->size() <= 1;
  ATTO_CHECK(!gpt,
             "tokenizer {}: this is a decoder-only (GPT) char tokenizer (special tokens "
             "{}); a seq2seq model needs [\"<pad>\", \"<bos>\", \"<eos>\", \"<unk>\"]",
             where, json_util::excerpt(*special));
  tokenizer_detail::check_seq2seq_header(j, where, "char");
  nlohmann::json plain = j;  // CharTokenizer validates the rest ("type", "chars")
  plain["special_tokens"] = nlohmann::json::array();
  return CharSeqTokenizer(CharTokenizer::from_json(plain, where));
}

// ---------------------------------------------------------------------------------------------
// Factories

std::unique_ptr<Tokenizer> train_tokenizer(const TokenizerOptions& opts, const std::vector<std::string>& lines,
                                           const std::string& dir) {
  switch (opts.type) {
    case TokenizerKind::Char: return std::make_unique<CharSeqTokenizer>(CharSeqTokenizer::build(lines));
    case TokenizerKind::Word:
      return std::make_unique<WordTokenizer>(
          WordTokenizer::build(lines, {.min_count = opts.min_count, .max_size = opts.vocab_size}));
    case TokenizerKind::Spm:
      ATTO_CHECK(opts.vocab_size > kNumSpecialTokens,
                 "a SentencePiece tokenizer needs a vocabulary "
                 "size above {} (the special tokens); got {}; pass e.g. --vocab-size 8000",
                 kNumSpecialTokens, opts.vocab_size);
      return std::make_unique<SpmTokenizer>(
          SpmTokenizer::train(lines, {.vocab_size = opts.vocab_size, .model_type = opts.spm_model_type}, dir));
    case TokenizerKind::Bpe: fail("--tokenizer bpe is for GPTs; a seq2seq model uses char, word or spm");
  }
  fail("unknown tokenizer kind {}", static_cast<int>(opts.type));
}

const char* to_string(TokenizerKind k) {
  switch (k) {
    case TokenizerKind::Char: return "char";
    case TokenizerKind::Word: return "word";
    case TokenizerKind::Spm: return "spm";
    case TokenizerKind::Bpe: return "bpe";
  }
  return "?";
}

TokenizerKind parse_tokenizer_kind(const std::string& s) {
  if (s == "char") return TokenizerKind::Char;
  if (s == "word") return TokenizerKind::Word;
  if (s == "spm") return TokenizerKind::Spm;
  if (s == "bpe") return TokenizerKind::Bpe;
  fail("unknown tokenizer '{}': use char, bpe or spm (GPT), char, word or spm (seq2seq)", s);
}

std::unique_ptr<Tokenizer> load_tokenizer_json(const nlohmann::json& j, std::string_view where,
                                               const std::string& dir) {
  ATTO_CHECK(j.is_object(), "tokenizer {}: expected a JSON object, got {}", where, j.type_name());
  auto type = j.find("type");
  ATTO_CHECK(type != j.end() && type->is_string(),
             "tokenizer {}: missing string field \"type\" "
             "(char, word or spm)",
             where);
  const std::string& t = type->get_ref<const std::string&>();
  if (t == "char") return std::make_unique<CharSeqTokenizer>(CharSeqTokenizer::from_json(j, where));
  if (t == "word") return std::make_unique<WordTokenizer>(WordTokenizer::from_json(j, where));
  if (t == "spm") return std::make_unique<SpmTokenizer>(SpmTokenizer::from_json(j, where, dir));
  fail("tokenizer {}: unknown \"type\" \"{}\"; expected char, word or spm", where, t);
}

std::unique_ptr<Tokenizer> load_tokenizer_file(const std::string& json_path) {
  const std::string text = tokenizer_detail::read_file_bytes(json_path, "tokenizer file");
  const nlohmann::json j = json_util::parse(text, fmt::format("tokenizer {}", json_path));
  const std::string dir = std::filesystem::path(json_path).parent_path().string();
  return load_tokenizer_json(j, json_path, dir.empty() ? "." : dir);
}

}  // namespace atto
