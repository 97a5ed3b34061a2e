// The parallel-corpus readers (data/parallel.h): a TSV file, and a source/target file pair (the
// input cut at its first NUL byte).
#include "common.h"
#include "data/parallel.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in = atto::fuzz::bytes(data, size);
  atto::fuzz::expect_errors([&] { (void)atto::make_parallel_tsv("fuzz.tsv", in); });
  const auto parts = atto::fuzz::split_at_nul(in);
  atto::fuzz::expect_errors([&] { (void)atto::make_parallel("fuzz.src", parts.first, "fuzz.tgt", parts.second); });
  return 0;
}
