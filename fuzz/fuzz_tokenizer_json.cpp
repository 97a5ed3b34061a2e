// tokenizer.json of every tokenizer type (tokenize/tokenizer.h: char, word, BPE, GPT-2's byte
// level, SentencePiece's header), then a round of encoding and decoding with what loaded.
#include <filesystem>

#include "base/json.h"
#include "common.h"
#include "tokenize/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The same parse as every tokenizer.json (base/json.h: depth-limited, errors named).
  nlohmann::json j;
  try {
    j = atto::json_util::parse(atto::fuzz::bytes(data, size), "fuzz tokenizer.json");
  } catch (const atto::Error&) {
    return 0;
  }
  static const std::string dir = std::filesystem::temp_directory_path() / "atto-fuzz-empty-dir";
  std::filesystem::create_directories(dir);
  atto::fuzz::expect_errors([&] {
    const auto tok = atto::load_tokenizer_json(j, "fuzz tokenizer.json", dir);
    const std::vector<int32_t> ids = tok->encode("hello, world\n");
    (void)tok->decode(ids);
  });
  return 0;
}
