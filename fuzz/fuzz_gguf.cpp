// The GGUF reader (io/gguf.h: header, metadata, tensor infos, alignment, data) and the model
// import on top of it (run/gguf_model.h: llama.cpp's gpt2 / llama layouts, hyperparameters
// against tensor shapes, the tokenizer's vocabulary).
#include "common.h"
#include "io/gguf.h"
#include "run/gguf_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in = atto::fuzz::bytes(data, size);
  atto::fuzz::expect_errors([&] { (void)atto::io::parse_gguf(in, "fuzz.gguf"); });
  atto::fuzz::expect_errors([&] { (void)atto::load_gguf(atto::fuzz::temp_file(in, "model.gguf")); });
  return 0;
}
