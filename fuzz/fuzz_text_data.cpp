// The text data reader (data/text_file.h): UTF-8 checks, line splitting, the lines/stream
// decision; then a character tokenizer and a dataset built from it, as `atto train` does.
#include "common.h"
#include "data/dataset.h"
#include "data/text_file.h"
#include "tokenize/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  atto::fuzz::expect_errors([&] {
    const atto::TextFile f = atto::make_text_file("fuzz.txt", atto::fuzz::bytes(data, size));
    (void)atto::split_lines(f.text);
    const atto::DataMode mode = atto::resolve_mode(f, atto::DataMode::Auto);
    (void)atto::explain_auto_mode(atto::line_stats(f.text));
    const auto tok = atto::build_gpt_tokenizer(f, mode, atto::TokenizerKind::Char, 0);
    const auto ds = atto::make_dataset(f, *tok, mode, {.split_seed = 1});
    (void)ds->num_tokens(atto::Split::Train);
  });
  return 0;
}
