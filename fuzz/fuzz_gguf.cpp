// The GGUF reader (io/gguf.h: header, metadata, tensor infos, alignment, data; from bytes and from
// a file read in parts) and the model
// import on top of it (run/gguf_model.h: llama.cpp's gpt2 / llama layouts, hyperparameters
// against tensor shapes, the tokenizer's vocabulary), as floats and with q8_0/q4_0/Q4_K matrices
// kept quantized, a model that loads then running one token through the integer kernels.
#include "common.h"
#include "io/gguf.h"
#include "autograd/tape.h"
#include "run/gguf_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in = atto::fuzz::bytes(data, size);
  atto::fuzz::expect_errors([&] { (void)atto::io::parse_gguf(in, "fuzz.gguf"); });
  const std::string path = atto::fuzz::temp_file(in, "model.gguf");
  // The reader of a file longer than its first read: the header read again longer, every tensor
  // read from the file when asked for.
  atto::fuzz::expect_errors([&] {
    const atto::io::GgufFile f = atto::io::read_gguf(path, 16);
    for (const atto::io::GgufTensorInfo& t : f.tensors) (void)f.tensor_f32(t.name);
  });
  atto::fuzz::expect_errors([&] { (void)atto::load_gguf(path); });
  atto::fuzz::expect_errors([&] {
    const atto::LoadedModel lm = atto::load_gguf(path, atto::WeightStorage::Quantized);
    atto::NoGradGuard no_grad;
    (void)lm.model->forward(std::vector<int32_t>{0}, 1, 1);
  });
  return 0;
}
