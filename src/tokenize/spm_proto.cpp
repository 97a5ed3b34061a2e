#include "tokenize/spm_proto.h"

#include <cstring>

#include "base/error.h"

namespace atto::spm_proto {

namespace {

// Protocol buffers' wire format: a key (field << 3 | wire type), then a varint (type 0), 4 bytes
// (type 5, a float) or a length and that many bytes (type 2: strings, nested messages).
void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void field_varint(std::string& out, int field, uint64_t v) {
  varint(out, static_cast<uint64_t>(field) << 3);
  varint(out, v);
}
void field_bytes(std::string& out, int field, std::string_view bytes) {
  varint(out, static_cast<uint64_t>(field) << 3 | 2);
  varint(out, bytes.size());
  out.append(bytes);
}
void field_float(std::string& out, int field, float v) {
  varint(out, static_cast<uint64_t>(field) << 3 | 5);
  char b[4];
  std::memcpy(b, &v, 4);  // little-endian, as x86-64 and aarch64 store it
  out.append(b, 4);
}

// sentencepiece_model.proto's field numbers.
enum : int { kPieces = 1, kTrainerSpec = 2, kNormalizerSpec = 3 };  // ModelProto
enum : int { kPiece = 1, kScore = 2, kType = 3 };                   // SentencePiece
enum : int {
  kModelType = 3,
  kVocabSize = 4,
  kSplitDigits = 25,
  kWhitespaceOnly = 26,  // TrainerSpec
  kByteFallback = 35,
  kUnkId = 40,
  kBosId = 41,
  kEosId = 42,
  kPadId = 43
};
enum : int { kName = 1, kCharsMap = 2, kDummyPrefix = 3, kRemoveWhitespace = 4 };  // NormalizerSpec
constexpr uint64_t kBpe = 2;

// A reader over one message's fields.
struct Reader {
  std::string_view b;
  size_t i = 0;
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      ATTO_CHECK(i < b.size(), "SentencePiece model: the data ends inside a number");
      const auto c = static_cast<uint8_t>(b[i++]);
      v |= static_cast<uint64_t>(c & 0x7f) << shift;
      if (c < 0x80) return v;
    }
    fail("SentencePiece model: a number longer than 10 bytes");
  }
  // Calls f(field, wire type, varint value, bytes) for each field.
  template <class F>
  void each(F f) {
    while (i < b.size()) {
      const uint64_t key = varint();
      const int field = static_cast<int>(key >> 3), type = static_cast<int>(key & 7);
      uint64_t v = 0;
      std::string_view bytes;
      if (type == 0) {
        v = varint();
      } else if (type == 1 || type == 5) {
        const size_t n = type == 1 ? 8 : 4;
        ATTO_CHECK(b.size() - i >= n, "SentencePiece model: the data ends inside a field");
        i += n;
      } else {
        ATTO_CHECK(type == 2, "SentencePiece model: wire type {} is not one atto reads", type);
        const uint64_t n = varint();
        ATTO_CHECK(n <= b.size() - i, "SentencePiece model: a field of {} bytes past the end", n);
        bytes = b.substr(i, n);
        i += n;
      }
      f(field, type, v, bytes);
    }
  }
};

}  // namespace

std::string bpe_model(const std::vector<SpmPiece>& pieces, bool add_dummy_prefix) {
  std::string out;
  for (const SpmPiece& p : pieces) {
    std::string m;
    field_bytes(m, kPiece, p.piece);
    field_float(m, kScore, p.score);
    if (p.type != 1) field_varint(m, kType, static_cast<uint64_t>(p.type));
    field_bytes(out, kPieces, m);
  }
  std::string trainer;
  field_varint(trainer, kModelType, kBpe);
  field_varint(trainer, kVocabSize, pieces.size());
  field_varint(trainer, kSplitDigits, 1);
  field_varint(trainer, kWhitespaceOnly, 1);
  field_varint(trainer, kByteFallback, 1);
  field_varint(trainer, kUnkId, 0);
  field_varint(trainer, kBosId, 1);
  field_varint(trainer, kEosId, 2);
  field_varint(trainer, kPadId, static_cast<uint64_t>(int64_t{-1}));  // int32 -1: ten bytes
  field_bytes(out, kTrainerSpec, trainer);
  std::string normalizer;
  field_bytes(normalizer, kName, "identity");
  field_bytes(normalizer, kCharsMap, "");
  field_varint(normalizer, kDummyPrefix, add_dummy_prefix ? 1 : 0);
  field_varint(normalizer, kRemoveWhitespace, 0);
  field_bytes(out, kNormalizerSpec, normalizer);
  return out;
}

bool add_dummy_prefix(std::string_view model_bytes) {
  bool prefix = true;
  Reader{model_bytes}.each([&](int field, int type, uint64_t, std::string_view bytes) {
    if (field != kNormalizerSpec || type != 2) return;
    Reader{bytes}.each([&](int f, int t, uint64_t v, std::string_view) {
      if (f == kDummyPrefix && t == 0) prefix = v != 0;
    });
  });
  return prefix;
}

}  // namespace atto::spm_proto
