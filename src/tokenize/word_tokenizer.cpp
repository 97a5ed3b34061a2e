#include "tokenize/word_tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/json.h"
#include "base/error.h"
#include "tokenize/utf8.h"

namespace atto {

namespace {

bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

bool is_special_name(std::string_view w) {
  return std::find(kSpecialTokens.begin(), kSpecialTokens.end(), w) != kSpecialTokens.end();
}

}  // namespace

std::vector<std::string_view> WordTokenizer::split(std::string_view text) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_ascii_space(text[i])) ++i;
    const size_t start = i;
    while (i < text.size() && !is_ascii_space(text[i])) ++i;
    if (i > start) out.push_back(text.substr(start, i - start));
  }
  return out;
}

WordTokenizer WordTokenizer::build(const std::vector<std::string>& lines, const WordVocabOptions& opts) {
  ATTO_CHECK(opts.min_count >= 1, "word vocabulary: min count must be at least 1, got {}", opts.min_count);
  ATTO_CHECK(opts.max_size == 0 || opts.max_size > kNumSpecialTokens,
             "word vocabulary: the "
             "maximum size ({}) counts the {} special tokens, so it must be above {} (or 0 for no "
             "limit)",
             opts.max_size, kNumSpecialTokens, kNumSpecialTokens);
  std::unordered_map<std::string, int64_t> counts;
  for (size_t i = 0; i < lines.size(); ++i) {
    utf8::validate(lines[i], fmt::format("tokenizer training line {}", i + 1));
    for (std::string_view w : split(lines[i])) {
      if (!is_special_name(w)) ++counts[std::string(w)];
    }
  }
  std::vector<std::pair<std::string, int64_t>> kept;
  for (auto& [w, c] : counts) {
    if (c >= opts.min_count) kept.emplace_back(w, c);
  }
  ATTO_CHECK(!kept.empty(),
             "cannot build a word vocabulary: {} distinct word(s) in {} training "
             "line(s), none seen at least {} time(s)",
             counts.size(), lines.size(), opts.min_count);
  std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (opts.max_size > 0) {
    kept.resize(std::min(kept.size(), static_cast<size_t>(opts.max_size - kNumSpecialTokens)));
  }
  std::vector<std::string> words;
  words.reserve(kept.size());
  for (auto& [w, c] : kept) words.push_back(std::move(w));
  return from_words(std::move(words), "training words");
}

WordTokenizer WordTokenizer::from_words(std::vector<std::string> words, std::string_view where) {
  WordTokenizer t;
  for (int32_t id = 0; id < kNumSpecialTokens; ++id) t.ids_[kSpecialTokens[static_cast<size_t>(id)]] = id;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    ATTO_CHECK(!w.empty(), "tokenizer {}: words[{}] is empty", where, i);
    ATTO_CHECK(!utf8::find_invalid(w), "tokenizer {}: words[{}] is not valid UTF-8", where, i);
    ATTO_CHECK(std::none_of(w.begin(), w.end(), is_ascii_space), "tokenizer {}: words[{}] {} contains whitespace",
               where, i, utf8::quote(w));
    ATTO_CHECK(!is_special_name(w),
               "tokenizer {}: words[{}] is the special token {}; special "
               "tokens are not listed among the words",
               where, i, w);
    const auto id = static_cast<int32_t>(kNumSpecialTokens + static_cast<int64_t>(i));
    ATTO_CHECK(t.ids_.emplace(w, id).second, "tokenizer {}: words[{}] {} is a duplicate", where, i, utf8::quote(w));
  }
  t.words_ = std::move(words);
  return t;
}

int32_t WordTokenizer::id_of(std::string_view word) const {
  auto it = ids_.find(std::string(word));
  return it == ids_.end() ? kUnkId : it->second;
}

std::vector<int32_t> WordTokenizer::encode(std::string_view text) const {
  utf8::validate(text, "text to encode");
  std::vector<int32_t> ids;
  for (std::string_view w : split(text)) ids.push_back(id_of(w));
  return ids;
}

std::string WordTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string s;
  for (int32_t id : ids) {
    if (id == kPadId || id == kBosId || id == kEosId) continue;
    if (!s.empty()) s += ' ';
    s += id == kUnkId ? std::string(kSpecialTokens[kUnkId]) : id_to_string(id);
  }
  return s;
}

std::string WordTokenizer::id_to_string(int32_t id) const {
  ATTO_CHECK(id >= 0 && id < vocab_size(), "token id {} is outside the word vocabulary (size {})", id, vocab_size());
  if (id < kNumSpecialTokens) return kSpecialTokens[static_cast<size_t>(id)];
  return words_[static_cast<size_t>(id - kNumSpecialTokens)];
}

nlohmann::json WordTokenizer::to_json() const {
  nlohmann::json special = nlohmann::json::array();
  for (const char* s : kSpecialTokens) special.push_back(s);
  return {{"type", "word"}, {"version", kFormatVersion}, {"special_tokens", special}, {"words", words_}};
}

WordTokenizer WordTokenizer::from_json(const nlohmann::json& j, std::string_view where) {
  ATTO_CHECK(j.is_object(), "tokenizer {}: expected a JSON object, got {}", where, j.type_name());
  auto type = j.find("type");
  ATTO_CHECK(type != j.end() && *type == "word",
             "tokenizer {}: \"type\" is {}, but this reader "
             "handles \"word\" tokenizers",
             where, type == j.end() ? "missing" : json_util::excerpt(*type));
  tokenizer_detail::check_seq2seq_header(j, where, "word");
  auto words = j.find("words");
  ATTO_CHECK(words != j.end() && words->is_array() && !words->empty(),
             "tokenizer {}: \"words\" must be a non-empty array of strings", where);
  std::vector<std::string> list;
  list.reserve(words->size());
  for (size_t i = 0; i < words->size(); ++i) {
    const auto& w = (*words)[i];
    ATTO_CHECK(w.is_string(), "tokenizer {}: words[{}] must be a string, got {}", where, i, json_util::excerpt(w));
    list.push_back(w.get<std::string>());
  }
  return from_words(std::move(list), where);
}

}  // namespace atto
