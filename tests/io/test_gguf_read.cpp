// io/gguf's read_gguf: the header from the file's first bytes, the tensors from the file when they
// are asked for (a model is never loaded beside the whole file), with parse_gguf's checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "support.h"

namespace atto::io {
namespace {

using test::error_of;
using ::testing::HasSubstr;

// A file whose data is far longer than its header: a 64 KiB f32 tensor between two small ones, a
// vocabulary-like string list in the metadata.
std::string lazily_read_file() {
  GgufWriter w;
  w.add("general.architecture", GgufValue::string("gpt2"));
  std::vector<std::string> words;
  for (int i = 0; i < 300; ++i) words.push_back("word" + std::to_string(i));
  w.add("list.words", GgufValue::string_array(words));
  std::vector<float> big(128 * 128), small(64);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 1000) * 0.25f;
  for (size_t i = 0; i < small.size(); ++i) small[i] = static_cast<float>(i) - 7.0f;
  w.add_tensor("a.small", {64}, GgmlType::F32, small);
  w.add_tensor("b.big", {128, 128}, GgmlType::F32, big);
  w.add_tensor("c.q80", {2, 32}, GgmlType::Q8_0, small);
  return w.bytes();
}

// For every first read (from less than the magic to more than the file), read_gguf gives what
// parse_gguf gives of the whole file: the metadata, the tensor infos, every tensor's bytes and
// floats; and it holds only the header's bytes when the file is longer than they are.
TEST(GgufRead, TheFileReadInPartsIsTheWholeFileParsed) {
  test::TempDir dir("gguf_read");
  const std::string bytes = lazily_read_file();
  const std::string path = dir.write("m.gguf", bytes);
  const GgufFile whole = parse_gguf(bytes, path);
  for (uint64_t first : {uint64_t{1}, uint64_t{64}, uint64_t{100}, uint64_t{1000}, uint64_t{4096},
                         uint64_t{bytes.size()}, uint64_t{1} << 20}) {
    const GgufFile f = read_gguf(path, first);
    EXPECT_EQ(f.keys, whole.keys) << first;
    EXPECT_EQ(f.get("list.words").as_strings("words"), whole.get("list.words").as_strings("words")) << first;
    ASSERT_EQ(f.tensors.size(), whole.tensors.size()) << first;
    for (size_t i = 0; i < f.tensors.size(); ++i) {
      EXPECT_EQ(f.tensors[i].name, whole.tensors[i].name);
      EXPECT_EQ(f.tensor_bytes(f.tensors[i]), whole.tensor_bytes(whole.tensors[i])) << f.tensors[i].name;
      EXPECT_EQ(f.tensor_f32(f.tensors[i].name), whole.tensor_f32(whole.tensors[i].name)) << f.tensors[i].name;
    }
    if (first < 4096) {
      EXPECT_LT(f.bytes_.size(), bytes.size() / 4) << first << ": the data was read with the header";
      EXPECT_EQ(f.data_path_, path);
    }
  }
}

// A file cut anywhere gives read_gguf's caller parse_gguf's error for the same bytes, whatever
// the first read.
TEST(GgufRead, EveryTruncationIsParseGgufsError) {
  test::TempDir dir("gguf_read");
  const std::string bytes = lazily_read_file();
  const std::string path = dir / "cut.gguf";
  for (size_t n = 0; n < bytes.size(); n += n < 2048 ? 7 : 997) {
    dir.write("cut.gguf", bytes.substr(0, n));
    const std::string want = error_of([&] { parse_gguf(bytes.substr(0, n), path); });
    ASSERT_FALSE(want.empty()) << n;
    for (uint64_t first : {uint64_t{16}, uint64_t{1000}})
      EXPECT_EQ(error_of([&] { read_gguf(path, first); }), want) << n << " " << first;
  }
}

// A file that shrinks after its header was read: the tensor it no longer holds is an error that
// names the file and says what happened, not a short read taken for weights.
TEST(GgufRead, AFileThatShrinksAfterItsHeaderIsAnErrorNamingIt) {
  test::TempDir dir("gguf_read");
  const std::string bytes = lazily_read_file();
  const std::string path = dir.write("m.gguf", bytes);
  const GgufFile f = read_gguf(path, 64);
  ASSERT_FALSE(f.data_path_.empty());
  const GgufTensorInfo* big = f.find("b.big");
  ASSERT_NE(big, nullptr);
  std::filesystem::resize_file(path, f.data_start_ + big->offset + 100);
  EXPECT_EQ(f.tensor_f32("a.small").size(), 64u);  // before the cut: still read
  const std::string msg = error_of([&] { f.tensor_f32("b.big"); });
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("did the file change while atto read it?"));
}

}  // namespace
}  // namespace atto::io
