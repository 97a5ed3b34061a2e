// The safetensors reader (io/safetensors.h): header JSON, dtypes, shapes, offsets.
#include "common.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  atto::fuzz::expect_errors([&] {
    const atto::io::SafetensorsFile f = atto::io::parse_safetensors(atto::fuzz::bytes(data, size), "fuzz.safetensors");
    for (const auto& [name, t] : f.tensors) (void)t.numel();
  });
  return 0;
}
