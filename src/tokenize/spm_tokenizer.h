// atto/tokenize/spm_tokenizer.h: SentencePiece subword tokenizer (Debian's libsentencepiece).
//
//   auto tok = atto::SpmTokenizer::train(lines, {.vocab_size = 8000}, "runs/mt");
//   // -> runs/mt/spm.model; tok.to_json() == {"type": "spm", "version": 1, "model": "spm.model", ...}
//   tok.encode("Hello world.");               // piece ids, unknown characters -> <unk> (3)
//   auto again = atto::SpmTokenizer::load("runs/mt/spm.model");
//
// Conventions (see tokenizer.h for what every seq2seq tokenizer shares)
// - Training runs in process (SentencePieceTrainer::Train, sentences passed from memory; empty
//   lines are left out) with: model_type unigram (default) or bpe; vocab_size as given
//   (SentencePiece's hard limit: a corpus too small for it is an error that says the largest
//   size possible); character_coverage 1.0 (every character of the training text gets a
//   piece); pad/bos/eos/unk ids 0/1/2/3 with pieces <pad> <bos> <eos> <unk>; the default
//   nmt_nfkc normalisation (NFKC, extra whitespace removed); all sentences used, unshuffled;
//   one thread and a fixed random seed, so the same text and options give the same model
//   byte for byte.
// - decode(encode(s)) gives s normalised (NFKC, runs of spaces collapsed, no leading or
//   trailing space); an unknown character decodes as " ⁇ " (SentencePiece's unk surface).
// - load() reads a model file and checks that its special ids are 0/1/2/3; a missing or
//   invalid file is an atto::Error naming the path. The model bytes are kept in memory, so
//   write_files(dir) can copy the model into another run directory.
// - tokenizer.json (version 1): {"type": "spm", "version": 1, "model": "spm.model",
//   "vocab_size": N, "special_tokens": ["<pad>", "<bos>", "<eos>", "<unk>"]}; "model" is
//   relative to the folder of tokenizer.json.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenize/gpt_tokenizer.h"
#include "tokenize/spm_proto.h"
#include "tokenize/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace atto {

struct SpmOptions {
  int64_t vocab_size = 8000;
  std::string model_type = "unigram";  // "unigram" or "bpe"
  uint32_t seed = 1337;                // SentencePiece's random generator seed
};

class SpmTokenizer : public Tokenizer {
 public:
  static constexpr const char* kModelFile = "spm.model";
  static constexpr int kFormatVersion = 1;

  // Trains on the lines and writes dir/spm.model (dir is created if needed; the file is
  // written to a temporary name and renamed). Throws atto::Error with SentencePiece's reason
  // when training fails (e.g. "Vocabulary size too high (N). Please set it to a value <= M.").
  static SpmTokenizer train(const std::vector<std::string>& lines, const SpmOptions& opts, const std::string& dir);
  static SpmTokenizer load(const std::string& model_path);
  // The model is dir / j["model"].
  static SpmTokenizer from_json(const nlohmann::json& j, std::string_view where, const std::string& dir);

  std::string type() const override { return "spm"; }
  int64_t vocab_size() const override;
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  std::string id_to_string(int32_t id) const override;  // the piece, e.g. "▁the"
  nlohmann::json to_json() const override;
  void write_files(const std::string& dir) const override;  // dir/spm.model

  const std::string& model_bytes() const { return model_; }  // the serialized model

 private:
  SpmTokenizer(std::string model_bytes, std::string_view where);

  std::string model_;  // serialized sentencepiece ModelProto (the spm.model file)
  std::shared_ptr<const sentencepiece::SentencePieceProcessor> sp_;
};

// SentencePiece as a GPT's tokenizer (`atto train --tokenizer spm`), trained the way Llama's is:
// byte fallback (any text encodes: a character without a piece becomes its UTF-8 byte pieces
// <0xNN>), identity normalisation, whitespace kept as it is (no dummy prefix, no collapsing),
// digits split, whitespace-only pieces allowed, no hard vocabulary limit (a small corpus stops
// below the size asked for, as BPE does); ids <unk> 0, <s> 1, </s> 2, no padding. So
// decode(encode(x)) == x for text without the piece marker U+2581. In lines mode </s> is the
// boundary (each line is a sentence); in stream mode there is none (boundary_id() -1) and the
// text is trained on as its lines, newlines then encoded as the byte piece <0x0A>.
// tokenizer.json: {"type": "spm", "version": 1, "model": "spm.model", "vocab_size": N,
// "special_tokens": {"<unk>": 0, "<s>": 1, "</s>": 2}, "boundary": true|false}, the model next
// to it (write_files).
class SpmGptTokenizer : public GptTokenizer {
 public:
  static SpmGptTokenizer train(std::string_view text, int64_t vocab_size, bool boundary, uint32_t seed = 1337);
  static SpmGptTokenizer from_json(const nlohmann::json& j, std::string_view where, const std::string& dir);
  // A BPE model of these pieces (a GGUF vocabulary of llama's form: tokenizer.ggml.model "llama"),
  // with spm_proto::bpe_model's options. The pieces are checked first: <unk> 0 (unknown), <s> 1
  // and </s> 2 (control), each of the 256 byte pieces <0x00>..<0xFF> once (byte fallback), no
  // empty or repeated piece, finite scores; an atto::Error names `where` and the piece.
  static SpmGptTokenizer from_pieces(const std::vector<SpmPiece>& pieces, bool boundary, bool add_dummy_prefix,
                                     std::string_view where);
  // The model's pieces in id order, and whether it puts a space before the text (llama.cpp's
  // tokenizer.ggml.add_space_prefix).
  std::vector<SpmPiece> pieces() const;
  bool add_dummy_prefix() const { return spm_proto::add_dummy_prefix(model_); }

  const char* kind() const override { return "spm"; }
  int64_t vocab_size() const override;
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  bool has_boundary() const override { return boundary_; }
  int32_t boundary_id() const override { return boundary_ ? 2 : -1; }
  std::string id_to_string(int32_t id) const override;
  nlohmann::json to_json() const override;
  int32_t single_token(std::string_view piece) const override;
  bool open_vocabulary() const override { return true; }
  void write_files(const std::string& dir) const override;  // dir/spm.model

 private:
  SpmGptTokenizer(std::string model_bytes, bool boundary, std::string_view where);
  std::string model_;
  bool boundary_ = false;
  std::shared_ptr<const sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace atto
