// atto/tokenize/gpt_tokenizer.h: the tokenizer of a GPT (decoder-only model), one interface
// over its kinds: characters (CharTokenizer), byte-level BPE (BpeTokenizer) and SentencePiece
// with byte fallback (SpmGptTokenizer).
//
//   std::unique_ptr<atto::GptTokenizer> tok = atto::load_gpt_tokenizer(j, "runs/x/tokenizer.json");
//   std::vector<int32_t> ids = tok->encode("To be");        // char: throws on unknown characters
//   std::string text = tok->decode(ids);                     // BPE: any bytes round-trip
//   if (tok->has_boundary()) ...                              // <eos> or <|endoftext|>: ends a sample
//
// The boundary token separates documents (lines mode: one line each) and ends a sample; encode
// never produces it from text. tokenizer.json's "type" says the kind ("char" is also what a
// tokenizer.json without "type" is, as atto's first GPT runs wrote them).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace atto {

class GptTokenizer {
 public:
  virtual ~GptTokenizer() = default;
  virtual const char* kind() const = 0;  // "char" or "bpe"
  virtual int64_t vocab_size() const = 0;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual bool has_boundary() const = 0;
  virtual int32_t boundary_id() const = 0;                 // -1 when there is none
  virtual std::string id_to_string(int32_t id) const = 0;  // one token for display
  virtual nlohmann::json to_json() const = 0;
  // The id of the one token whose text is exactly `piece` ("\n"), or -1.
  virtual int32_t single_token(std::string_view piece) const = 0;
  // True when any text encodes (BPE); false when encode refuses characters outside the vocabulary.
  virtual bool open_vocabulary() const = 0;
  // Writes the files tokenizer.json refers to into `dir` (SentencePiece: spm.model).
  virtual void write_files(const std::string& dir) const { (void)dir; }
};

// A GPT's tokenizer.json: {"type": "char", ...} (or no "type"), {"type": "bpe", ...} or
// {"type": "spm", ...} (its model file in `dir`). atto::Error naming `where` for anything else or
// anything invalid.
std::unique_ptr<GptTokenizer> load_gpt_tokenizer(const nlohmann::json& j, std::string_view where,
                                                 const std::string& dir = ".");

}  // namespace atto
