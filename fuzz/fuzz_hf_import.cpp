// A GPT-2 checkpoint in the Hugging Face layout (run/hf_model.h: load_hf_gpt2): the input cut at
// its last NUL byte into model.safetensors (binary: it holds NUL bytes itself) and config.json
// (text), beside a fixed valid vocab.json and
// merges.txt (258 tokens: every byte, the merge "Ġ t", <|endoftext|>). A model that loads runs
// one forward pass.
#include <sys/stat.h>

#include <algorithm>
#include <fstream>

#include "autograd/tape.h"
#include "common.h"
#include "run/hf_model.h"
#include "tokenize/bpe.h"
#include "tokenize/utf8.h"

namespace {

void write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  if (!out) __builtin_trap();
}

// The checkpoint folder (one per process), with the tokenizer files written once.
const std::string& folder() {
  static const std::string dir = [] {
    const std::string d = atto::fuzz::temp_file("", "hf-probe") + "-dir";
    mkdir(d.c_str(), 0700);
    nlohmann::json vocab = nlohmann::json::object();
    for (int b = 0; b < 256; ++b) vocab[atto::utf8::encode(atto::gpt2_byte_to_char(static_cast<uint8_t>(b)))] = b;
    vocab["\xC4\xA0t"] = 256;
    vocab[atto::BpeTokenizer::kEndOfText] = 257;
    write(d + "/vocab.json", vocab.dump());
    write(d + "/merges.txt", "#version: 0.2\n\xC4\xA0 t\n");
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in = atto::fuzz::bytes(data, size);
  const size_t at = in.rfind('\0');
  const std::string& dir = folder();
  write(dir + "/model.safetensors", at == std::string::npos ? in : in.substr(0, at));
  write(dir + "/config.json", at == std::string::npos ? "" : in.substr(at + 1));
  atto::fuzz::expect_errors([&] {
    atto::LoadedModel lm = atto::load_hf_gpt2(dir);
    atto::NoGradGuard ng;
    std::vector<int32_t> ids = lm.tokenizer->encode(" t!");  // 2 tokens
    ids.resize(static_cast<size_t>(std::min<int64_t>(2, lm.config.gpt.block_size)));
    (void)lm.model->forward(ids, 1, static_cast<int64_t>(ids.size()));
  });
  return 0;
}
