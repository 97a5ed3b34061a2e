// The binary token file reader (data/token_file.h): header fields against the file's size, then
// windows read and checked against the vocabulary.
#include "common.h"
#include "data/token_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = atto::fuzz::temp_file(atto::fuzz::bytes(data, size), "tokens.bin");
  atto::fuzz::expect_errors([&] {
    const atto::TokenFileReader r(path);
    std::vector<int32_t> window(8);
    for (int64_t at : {int64_t{0}, r.size() / 2, r.size() - 8})
      if (at >= 0 && at + 8 <= r.size()) r.read(at, 8, window.data());
  });
  return 0;
}
