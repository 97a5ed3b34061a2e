#include "tokenize/bpe.h"

#include <algorithm>
#include <climits>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/json.h"
#include "base/files.h"
#include "base/error.h"
#include "tokenize/char_tokenizer.h"
#include "tokenize/pretokenize.h"
#include "tokenize/spm_tokenizer.h"
#include "tokenize/utf8.h"

namespace atto {

namespace {

// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the other 68 take U+0100 on.
struct ByteChars {
  std::array<char32_t, 256> to_char{};
  std::unordered_map<char32_t, uint8_t> to_byte;
  ByteChars() {
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      to_char[b] = printable(b) ? static_cast<char32_t>(b) : next++;
      to_byte[to_char[b]] = static_cast<uint8_t>(b);
    }
  }
};

const ByteChars& byte_chars() {
  static const ByteChars m;
  return m;
}

std::string read_file(const std::string& path, std::string_view what) {
  return files::read(path, files::kTokenizerCap, what);
}

}  // namespace

char32_t gpt2_byte_to_char(uint8_t b) { return byte_chars().to_char[b]; }

std::string gpt2_chars_to_bytes(std::string_view printable, std::string_view where) {
  std::string out;
  const auto issue = utf8::find_invalid(printable);
  ATTO_CHECK(!issue, "{}: a token is not valid UTF-8 ({})", where, issue ? issue->reason : "");
  for (size_t pos = 0; pos < printable.size();) {
    const char32_t cp = utf8::next(printable, pos);
    const auto it = byte_chars().to_byte.find(cp);
    ATTO_CHECK(it != byte_chars().to_byte.end(),
               "{}: the token {} holds {}, which is no byte in GPT-2's printable byte form", where,
               utf8::quote(printable), utf8::describe(cp));
    out.push_back(static_cast<char>(it->second));
  }
  return out;
}

std::string BpeTokenizer::token_display(int32_t id) const {
  std::string out;
  for (unsigned char c : token_bytes(id)) utf8::append(out, gpt2_byte_to_char(c));
  return out;
}

void BpeTokenizer::index(std::string_view where) {
  ATTO_CHECK(!tokens_.empty() && tokens_.size() < static_cast<size_t>(INT32_MAX), "{}: {} tokens", where,
             tokens_.size());
  std::vector<char> special(tokens_.size(), 0);
  for (const auto& [content, id] : special_) {
    ATTO_CHECK(id >= 0 && static_cast<size_t>(id) < tokens_.size() && tokens_[id] == content,
               "{}: special token '{}' has id {}, which is not a token with that text", where, content, id);
    special[id] = 1;
    if (content == kEndOfText) eot_ = id;
  }
  byte_id_.fill(-1);
  std::unordered_map<std::string, int32_t> by_bytes;
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (special[i]) continue;
    const std::string& t = tokens_[i];
    ATTO_CHECK(!t.empty(), "{}: token {} is empty", where, i);
    ATTO_CHECK(by_bytes.emplace(t, static_cast<int32_t>(i)).second, "{}: tokens {} and {} are the same bytes {}", where,
               by_bytes[t], i, utf8::quote(token_display(static_cast<int32_t>(i))));
    if (t.size() == 1) byte_id_[static_cast<uint8_t>(t[0])] = static_cast<int32_t>(i);
  }
  for (int b = 0; b < 256; ++b)
    ATTO_CHECK(byte_id_[b] >= 0, "{}: no token for the byte 0x{:02X} (byte-level BPE needs all 256)", where, b);
  merge_of_.clear();
  merge_of_.reserve(merges_.size());
  for (size_t r = 0; r < merges_.size(); ++r) {
    const auto [a, b] = merges_[r];
    const auto n = static_cast<int32_t>(tokens_.size());
    ATTO_CHECK(a >= 0 && a < n && b >= 0 && b < n && !special[a] && !special[b],
               "{}: merge {} joins ids {} and {}, not both ordinary tokens", where, r, a, b);
    const auto it = by_bytes.find(tokens_[a] + tokens_[b]);
    ATTO_CHECK(it != by_bytes.end(), "{}: merge {} ({} + {}) makes {}, which is not a token", where, r,
               utf8::quote(token_display(a)), utf8::quote(token_display(b)),
               utf8::quote(token_display(a) + token_display(b)));
    ATTO_CHECK(merge_of_.emplace(key(a, b), Merge{static_cast<int32_t>(r), it->second}).second,
               "{}: merge {} repeats an earlier merge of the same pair", where, r);
  }
}

BpeTokenizer BpeTokenizer::import_gpt2(const std::string& encoder_path, const std::string& merges_path) {
  const nlohmann::json enc =
      json_util::parse(read_file(encoder_path, "--encoder"), fmt::format("--encoder '{}'", encoder_path));
  ATTO_CHECK(enc.is_object() && !enc.empty(), "--encoder '{}' must be a JSON object {{token: id}}", encoder_path);
  BpeTokenizer t;
  t.tokens_.resize(enc.size());
  std::vector<char> seen(enc.size(), 0);
  std::unordered_map<std::string, int32_t> id_of;
  const std::string where = fmt::format("--encoder '{}'", encoder_path);
  for (const auto& [tok, v] : enc.items()) {
    ATTO_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < static_cast<int64_t>(enc.size()),
               "{}: token {} has id {}, not an integer in [0, {})", where, utf8::quote(tok), json_util::excerpt(v), enc.size());
    const auto id = v.get<int32_t>();
    ATTO_CHECK(!seen[id], "{}: two tokens have id {}", where, id);
    seen[id] = 1;
    id_of[tok] = id;
    if (tok == kEndOfText) {
      t.tokens_[id] = tok;
      t.special_.emplace_back(tok, id);
    } else {
      t.tokens_[id] = gpt2_chars_to_bytes(tok, where);
    }
  }
  std::istringstream lines(read_file(merges_path, "--merges"));
  std::string line;
  for (int64_t n = 1; std::getline(lines, line); ++n) {
    if (line.empty() || (n == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t sp = line.find(' ');
    ATTO_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < line.size() && line.find(' ', sp + 1) == std::string::npos,
               "--merges '{}' line {}: {} is not a merge 'A B'", merges_path, n, utf8::quote(line));
    const std::string a = line.substr(0, sp), b = line.substr(sp + 1);
    for (const std::string& part : {a, b, a + b})
      ATTO_CHECK(id_of.count(part),
                 "--merges '{}' line {}: {} is not a token of --encoder '{}' (the merges file does "
                 "not match the encoder)",
                 merges_path, n, utf8::quote(part), encoder_path);
    t.merges_.emplace_back(id_of[a], id_of[b]);
  }
  ATTO_CHECK(!t.merges_.empty(), "--merges '{}' holds no merge", merges_path);
  t.index(fmt::format("--encoder '{}' with --merges '{}'", encoder_path, merges_path));
  // Every token of more than one byte must be some merge's result: one that is not could never
  // be produced, so the two files are not one tokenizer (a merge line lost, or another version).
  std::vector<char> made(t.tokens_.size(), 0);
  for (const auto& [k, m] : t.merge_of_) made[m.id] = 1;
  for (const auto& [content, id] : t.special_) made[id] = 1;
  for (size_t i = 0; i < t.tokens_.size(); ++i)
    ATTO_CHECK(made[i] || t.tokens_[i].size() == 1,
               "--merges '{}' does not match --encoder '{}': no merge makes its token {} (id {})", merges_path,
               encoder_path, utf8::quote(t.token_display(static_cast<int32_t>(i))), i);
  return t;
}

nlohmann::json BpeTokenizer::to_json() const {
  nlohmann::json vocab = nlohmann::json::array(), merges = nlohmann::json::array(), special = nlohmann::json::object();
  std::vector<char> is_special(tokens_.size(), 0);
  for (const auto& [content, id] : special_) {
    special[content] = id;
    is_special[id] = 1;
  }
  for (size_t i = 0; i < tokens_.size(); ++i)
    vocab.push_back(is_special[i] ? tokens_[i] : token_display(static_cast<int32_t>(i)));
  for (const auto& [a, b] : merges_) merges.push_back(token_display(a) + " " + token_display(b));
  return {{"type", "bpe"},  {"version", 1},     {"pattern", "gpt2"},
          {"vocab", vocab}, {"merges", merges}, {"special_tokens", special}};
}

BpeTokenizer BpeTokenizer::from_json(const nlohmann::json& j, std::string_view where) {
  ATTO_CHECK(j.is_object() && j.value("type", "") == "bpe", "{}: not a BPE tokenizer (\"type\": \"bpe\")", where);
  ATTO_CHECK(j.contains("version") && j["version"] == 1, "{}: \"version\" must be 1", where);
  ATTO_CHECK(j.value("pattern", "") == "gpt2", "{}: \"pattern\" must be \"gpt2\" (the only pre-tokenisation known)",
             where);
  const auto& vocab = j.contains("vocab") ? j["vocab"] : nlohmann::json();
  const auto& merges = j.contains("merges") ? j["merges"] : nlohmann::json();
  const auto& special = j.contains("special_tokens") ? j["special_tokens"] : nlohmann::json::object();
  ATTO_CHECK(vocab.is_array() && !vocab.empty(), "{}: \"vocab\" must be a non-empty list of tokens", where);
  ATTO_CHECK(merges.is_array(), "{}: \"merges\" must be a list of \"A B\" strings", where);
  ATTO_CHECK(special.is_object(), "{}: \"special_tokens\" must be an object {{text: id}}", where);
  BpeTokenizer t;
  std::unordered_map<std::string, int32_t> id_of;
  for (const auto& [content, id] : special.items()) {
    ATTO_CHECK(
        id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < static_cast<int64_t>(vocab.size()),
        "{}: special token '{}' has id {}, outside the vocabulary of {}", where, content, json_util::excerpt(id), vocab.size());
    t.special_.emplace_back(content, id.get<int32_t>());
  }
  for (size_t i = 0; i < vocab.size(); ++i) {
    ATTO_CHECK(vocab[i].is_string(), "{}: vocab[{}] is not a string", where, i);
    const std::string s = vocab[i].get<std::string>();
    const bool sp = std::any_of(t.special_.begin(), t.special_.end(),
                                [&](const auto& p) { return p.second == static_cast<int32_t>(i); });
    t.tokens_.push_back(sp ? s : gpt2_chars_to_bytes(s, fmt::format("{}: vocab[{}]", where, i)));
    if (!sp) id_of.emplace(s, static_cast<int32_t>(i));
  }
  for (size_t r = 0; r < merges.size(); ++r) {
    ATTO_CHECK(merges[r].is_string(), "{}: merges[{}] is not a string", where, r);
    const std::string m = merges[r].get<std::string>();
    const size_t sp = m.find(' ');
    ATTO_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < m.size(), "{}: merges[{}] {} is not \"A B\"", where, r,
               utf8::quote(m));
    const auto a = id_of.find(m.substr(0, sp)), b = id_of.find(m.substr(sp + 1));
    ATTO_CHECK(a != id_of.end() && b != id_of.end(), "{}: merges[{}] {} joins a token the vocab lacks", where, r,
               utf8::quote(m));
    t.merges_.emplace_back(a->second, b->second);
  }
  t.index(where);
  return t;
}

void BpeTokenizer::encode_chunk(std::string_view chunk, std::vector<int32_t>& out) const {
  thread_local std::vector<int32_t> ids, rank, merged;
  ids.clear();
  for (unsigned char c : chunk) ids.push_back(byte_id_[c]);
  // rank[i], merged[i]: the merge of (ids[i], ids[i + 1]), INT32_MAX when there is none.
  auto look = [&](size_t i) {
    const auto it = merge_of_.find(key(ids[i], ids[i + 1]));
    rank[i] = it == merge_of_.end() ? INT32_MAX : it->second.rank;
    merged[i] = it == merge_of_.end() ? -1 : it->second.id;
  };
  if (ids.size() > 1) {
    rank.resize(ids.size() - 1);
    merged.resize(ids.size() - 1);
    for (size_t i = 0; i + 1 < ids.size(); ++i) look(i);
    while (ids.size() > 1) {
      const auto best = static_cast<size_t>(std::min_element(rank.begin(), rank.end()) - rank.begin());
      if (rank[best] == INT32_MAX) break;
      ids[best] = merged[best];
      ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(best) + 1);
      rank.erase(rank.begin() + static_cast<std::ptrdiff_t>(best));
      merged.erase(merged.begin() + static_cast<std::ptrdiff_t>(best));
      if (best < rank.size()) look(best);
      if (best > 0) look(best - 1);
    }
  }
  out.insert(out.end(), ids.begin(), ids.end());
}

void BpeTokenizer::encode_append(std::string_view text, std::vector<int32_t>& out) const {
  // Words repeat: a chunk's tokens are remembered for the rest of the call (short chunks only).
  std::unordered_map<std::string_view, std::pair<size_t, size_t>> seen;  // chunk -> [begin, end) in out
  Gpt2Splitter::instance().each(text, [&](std::string_view chunk) {
    if (chunk.size() <= 32) {
      if (const auto it = seen.find(chunk); it != seen.end()) {
        const auto [b, e] = it->second;
        for (size_t i = b; i < e; ++i) out.push_back(out[i]);
        return;
      }
      const size_t b = out.size();
      encode_chunk(chunk, out);
      seen.emplace(chunk, std::make_pair(b, out.size()));
      return;
    }
    encode_chunk(chunk, out);
  });
}

int32_t BpeTokenizer::single_token(std::string_view piece) const {
  const std::vector<int32_t> ids = encode(piece);
  return ids.size() == 1 ? ids[0] : -1;
}

std::unique_ptr<GptTokenizer> load_gpt_tokenizer(const nlohmann::json& j, std::string_view where,
                                                 const std::string& dir) {
  const std::string type =
      j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : "";
  if (type == "bpe") return std::make_unique<BpeTokenizer>(BpeTokenizer::from_json(j, where));
  if (type == "spm") return std::make_unique<SpmGptTokenizer>(SpmGptTokenizer::from_json(j, where, dir));
  ATTO_CHECK(type.empty() || type == "char", "{}: \"type\" {} is no GPT tokenizer (\"char\", \"bpe\" or \"spm\")",
             where, j.is_object() ? json_util::excerpt(j["type"]) : "");
  return std::make_unique<CharTokenizer>(CharTokenizer::from_json(j, where));
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3);
  encode_append(text, out);
  return out;
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    ATTO_CHECK(ids[i] >= 0 && ids[i] < vocab_size(),
               "BPE decode: id {} at position {} is outside the vocabulary [0, {})", ids[i], i, vocab_size());
    out += tokens_[static_cast<size_t>(ids[i])];
  }
  return out;
}

}  // namespace atto
