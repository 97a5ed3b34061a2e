// GPT-2's tokenizer files (tokenize/bpe.h: import_gpt2 reads encoder.json and vocab.bpe; the
// input cut at its first NUL byte), then encoding and decoding with what loaded.
#include "common.h"
#include "tokenize/bpe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = atto::fuzz::split_at_nul(atto::fuzz::bytes(data, size));
  const std::string e = atto::fuzz::temp_file(parts.first, "encoder.json");
  const std::string m = atto::fuzz::temp_file(parts.second, "vocab.bpe");
  atto::fuzz::expect_errors([&] {
    const atto::BpeTokenizer t = atto::BpeTokenizer::import_gpt2(e, m);
    (void)t.decode(t.encode("Hello world, it's 2026!\n"));
  });
  return 0;
}
