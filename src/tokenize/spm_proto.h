// atto/tokenize/spm_proto.h: SentencePiece model files (ModelProto, protocol buffers) written and
// read without SentencePiece's generated protobuf code, which Debian's libsentencepiece-dev does
// not install. Only what a GPT's BPE model needs: the pieces, the trainer options that encoding
// reads, the normalizer.
//
//   std::string bytes = spm_proto::bpe_model(pieces, /*add_dummy_prefix=*/true);
//   sp.LoadFromSerializedProto(bytes);              // a SentencePieceProcessor
//   spm_proto::add_dummy_prefix(bytes);             // true
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace atto {

// One piece of a SentencePiece model: its text, score and type, numbered as SentencePiece does
// (and llama.cpp's GGUF token types): 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused,
// 6 byte (<0xNN>).
struct SpmPiece {
  std::string piece;
  float score = 0.0f;
  int32_t type = 1;
};

namespace spm_proto {

// The serialized ModelProto of a BPE model of these pieces, as atto trains a GPT's (spm_tokenizer.h):
// byte fallback, identity normalisation, whitespace kept (escaped as U+2581, runs not collapsed,
// whitespace-only pieces allowed), digits split, ids <unk> 0, <s> 1, </s> 2, no padding;
// add_dummy_prefix: a space before the text (Llama's own tokenizer; atto's are trained without).
std::string bpe_model(const std::vector<SpmPiece>& pieces, bool add_dummy_prefix);

// NormalizerSpec.add_dummy_prefix of a serialized ModelProto (true when absent, SentencePiece's
// default); atto::Error when the bytes are not a protocol buffer message.
bool add_dummy_prefix(std::string_view model_bytes);

}  // namespace spm_proto
}  // namespace atto
