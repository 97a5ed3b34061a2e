#include "tokenize/char_tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "base/json.h"
#include "base/error.h"
#include "tokenize/utf8.h"

namespace atto {

namespace {

constexpr size_t kMaxListedChars = 20;      // distinct unknown characters named in an error
constexpr size_t kMaxListedPositions = 10;  // positions named per unknown character
constexpr size_t kMaxShownVocab = 120;      // vocabulary characters shown in an error

struct Unknown {
  char32_t cp;
  std::vector<size_t> positions;
};

std::string positions_str(const std::vector<size_t>& pos) {
  std::string s = pos.size() == 1 ? "position " : "positions ";
  for (size_t i = 0; i < pos.size() && i < kMaxListedPositions; ++i) {
    if (i) s += ", ";
    s += std::to_string(pos[i]);
  }
  if (pos.size() > kMaxListedPositions) {
    s += fmt::format(" and {} more", pos.size() - kMaxListedPositions);
  }
  return s;
}

std::string vocab_summary(const std::vector<char32_t>& chars) {
  std::string s;
  for (size_t i = 0; i < chars.size() && i < kMaxShownVocab; ++i) s += utf8::display(chars[i]);
  if (chars.size() > kMaxShownVocab) s += "...";
  return fmt::format("{} characters: {}", chars.size(), s);
}

[[noreturn]] void fail_unknown(const std::vector<Unknown>& unknown, std::string_view text,
                               const std::vector<char32_t>& vocab) {
  std::string list;
  for (size_t i = 0; i < unknown.size() && i < kMaxListedChars; ++i) {
    if (i) list += "; ";
    list += utf8::describe(unknown[i].cp) + " at " + positions_str(unknown[i].positions);
  }
  if (unknown.size() > kMaxListedChars) {
    list += fmt::format("; and {} more distinct characters", unknown.size() - kMaxListedChars);
  }
  const std::string what = unknown.size() == 1 && unknown[0].positions.size() == 1
                               ? fmt::format("unknown character {} of {}", list, utf8::quote(text))
                               : fmt::format("unknown characters in {}: {}", utf8::quote(text), list);
  fail("{}; the vocabulary was built from the training data and has {}", what, vocab_summary(vocab));
}

const nlohmann::json& field(const nlohmann::json& j, const char* key, std::string_view where) {
  auto it = j.find(key);
  ATTO_CHECK(it != j.end(), "tokenizer {}: missing field \"{}\"", where, key);
  return *it;
}

char32_t parse_char_entry(const nlohmann::json& e, size_t i, std::string_view where) {
  ATTO_CHECK(e.is_string(), "tokenizer {}: chars[{}] must be a string holding one character, got {}", where, i,
             json_util::excerpt(e));
  const auto& s = e.get_ref<const std::string&>();
  ATTO_CHECK(!utf8::find_invalid(s), "tokenizer {}: chars[{}] is not valid UTF-8", where, i);
  ATTO_CHECK(utf8::count(s) == 1, "tokenizer {}: chars[{}] must hold exactly one character (code point), got {} ({})",
             where, i, utf8::quote(s), utf8::count(s));
  size_t pos = 0;
  return utf8::next(s, pos);
}

}  // namespace

CharTokenizer CharTokenizer::build(std::string_view text, const CharTokenizerOptions& opts) {
  std::vector<char32_t> cps = utf8::decode(text, "tokenizer training text");
  std::sort(cps.begin(), cps.end());
  cps.erase(std::unique(cps.begin(), cps.end()), cps.end());
  if (!opts.include_newline) std::erase(cps, U'\n');
  ATTO_CHECK(!cps.empty(),
             "cannot build a character vocabulary: the training text has no "
             "characters{}",
             opts.include_newline ? "" : " other than newlines");
  return from_chars(std::move(cps), opts.boundary);
}

CharTokenizer CharTokenizer::from_chars(std::vector<char32_t> chars, bool boundary) {
  ATTO_CHECK(chars.size() < (1u << 30), "character vocabulary too large ({})", chars.size());
  std::set<char32_t> seen;
  for (char32_t cp : chars) {
    ATTO_CHECK(utf8::is_scalar_value(cp), "character U+{:04X} is not a Unicode scalar value",
               static_cast<uint32_t>(cp));
    ATTO_CHECK(seen.insert(cp).second, "character {} appears twice in the vocabulary", utf8::describe(cp));
  }
  CharTokenizer t;
  t.boundary_ = boundary;
  t.chars_ = std::move(chars);
  t.index();
  return t;
}

void CharTokenizer::index() {
  ascii_ids_.assign(128, -1);
  other_ids_.clear();
  const int32_t first = boundary_ ? 1 : 0;
  for (size_t i = 0; i < chars_.size(); ++i) {
    const int32_t id = first + static_cast<int32_t>(i);
    if (chars_[i] < 128) {
      ascii_ids_[chars_[i]] = id;
    } else {
      other_ids_[chars_[i]] = id;
    }
  }
}

int32_t CharTokenizer::id_of(char32_t cp) const {
  if (cp < 128) return ascii_ids_.empty() ? -1 : ascii_ids_[cp];
  auto it = other_ids_.find(cp);
  return it == other_ids_.end() ? -1 : it->second;
}

char32_t CharTokenizer::char_of(int32_t id) const {
  const int64_t i = static_cast<int64_t>(id) - (boundary_ ? 1 : 0);
  ATTO_CHECK(i >= 0 && i < static_cast<int64_t>(chars_.size()),
             "token id {} is not a character of this vocabulary (vocab size {}{})", id, vocab_size(),
             boundary_ ? ", id 0 is <eos>" : "");
  return chars_[static_cast<size_t>(i)];
}

std::vector<int32_t> CharTokenizer::encode(std::string_view text) const {
  utf8::validate(text, "text to encode");
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  std::vector<Unknown> unknown;
  size_t pos = 0, index = 0;
  for (; pos < text.size(); ++index) {
    const char32_t cp = utf8::next(text, pos);
    const int32_t id = id_of(cp);
    if (id >= 0) {
      ids.push_back(id);
      continue;
    }
    auto it = std::find_if(unknown.begin(), unknown.end(), [&](const Unknown& u) { return u.cp == cp; });
    if (it == unknown.end()) {
      unknown.push_back({cp, {index}});
    } else {
      it->positions.push_back(index);
    }
  }
  if (!unknown.empty()) fail_unknown(unknown, text, chars_);
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string s;
  s.reserve(ids.size());
  for (int32_t id : ids) {
    if (is_boundary(id)) continue;
    utf8::append(s, char_of(id));
  }
  return s;
}

std::string CharTokenizer::id_to_string(int32_t id) const {
  if (is_boundary(id)) return kBoundaryName;
  return utf8::display(char_of(id));
}

nlohmann::json CharTokenizer::to_json() const {
  nlohmann::json chars = nlohmann::json::array();
  for (char32_t cp : chars_) chars.push_back(utf8::encode(cp));
  nlohmann::json special = nlohmann::json::array();
  if (boundary_) special.push_back(kBoundaryName);
  return {{"type", "char"}, {"version", kFormatVersion}, {"special_tokens", special}, {"chars", chars}};
}

CharTokenizer CharTokenizer::from_json(const nlohmann::json& j, std::string_view where) {
  ATTO_CHECK(j.is_object(), "tokenizer {}: expected a JSON object, got {}", where, j.type_name());
  const auto& type = field(j, "type", where);
  ATTO_CHECK(type.is_string() && type.get<std::string>() == "char",
             "tokenizer {}: \"type\" is {}, but this reader handles \"char\" tokenizers", where, json_util::excerpt(type));
  const auto& version = field(j, "version", where);
  ATTO_CHECK(version.is_number_integer(), "tokenizer {}: \"version\" must be an integer, got {}", where,
             json_util::excerpt(version));
  ATTO_CHECK(version.get<int64_t>() == kFormatVersion,
             "tokenizer {}: format version {} is not supported (this atto reads version {})", where,
             version.get<int64_t>(), kFormatVersion);
  const auto& special = field(j, "special_tokens", where);
  ATTO_CHECK(special.is_array() && special.size() <= 1 && (special.empty() || special[0] == kBoundaryName),
             "tokenizer {}: \"special_tokens\" must be [] or [\"{}\"], got {}", where, kBoundaryName, json_util::excerpt(special));
  const auto& chars = field(j, "chars", where);
  ATTO_CHECK(chars.is_array() && !chars.empty(),
             "tokenizer {}: \"chars\" must be a non-empty array of one-character strings", where);
  std::vector<char32_t> cps;
  std::set<char32_t> seen;
  for (size_t i = 0; i < chars.size(); ++i) {
    const char32_t cp = parse_char_entry(chars[i], i, where);
    ATTO_CHECK(seen.insert(cp).second, "tokenizer {}: chars[{}] {} is a duplicate", where, i, utf8::describe(cp));
    cps.push_back(cp);
  }
  return from_chars(std::move(cps), !special.empty());
}

CharTokenizer CharTokenizer::from_json_text(std::string_view text, std::string_view where) {
  return from_json(json_util::parse(text, fmt::format("tokenizer {}", where)), where);
}

int32_t CharTokenizer::single_token(std::string_view piece) const {
  if (utf8::find_invalid(piece) || utf8::count(piece) != 1) return -1;
  size_t pos = 0;
  return id_of(utf8::next(piece, pos));
}

}  // namespace atto
