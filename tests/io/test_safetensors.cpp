#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "io/file.h"
#include "io/safetensors.h"
#include "io_test_util.h"

using namespace atto;
using atto::io::testing::expect_error;
using atto::io::testing::ScratchDir;

namespace {

// A safetensors image from a header text and raw data bytes (no padding added).
std::string raw_file(const std::string& header, const std::string& data) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  return out + header + data;
}

std::string le_u64(uint64_t v) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return out;
}

std::string f32_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

std::string u16_bytes(const std::vector<uint16_t>& v) {
  std::string out;
  for (uint16_t h : v) {
    out.push_back(static_cast<char>(h & 0xff));
    out.push_back(static_cast<char>(h >> 8));
  }
  return out;
}

// Writes `bytes` to a file and expects load_safetensors to throw an Error naming the file and
// containing `part`.
void expect_load_error(const ScratchDir& dir, const std::string& bytes, const std::string& part) {
  const std::string p = dir.file("broken.safetensors");
  io::write_file_atomic(p, bytes);
  expect_error([&] { io::load_safetensors(p); }, {p, part});
}

const std::string kTwo =  // two F32 tensors: a [2] at [0, 8), b [1] at [8, 12)
    R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
    R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";

}  // namespace

TEST(Safetensors, RoundTripShapesOrderMetadata) {
  ScratchDir dir;
  Rng rng(3);
  std::vector<std::pair<std::string, Tensor>> ts = {
      {"z.last_alphabetically", Tensor::randn({2, 3}, rng)},
      {"scalar", Tensor::scalar(-1.5f)},
      {"empty", Tensor::zeros({0, 4})},
      {"a.first", Tensor::randn({5}, rng)},
      {"zero_mid", Tensor::zeros({3, 0, 2})},
      {"cube", Tensor::randn({2, 3, 4}, rng)},
  };
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"step", "7"}, {"u", "\xc3\xa9"}};
  const std::string p = dir.file("m.safetensors");
  io::save_safetensors(p, ts, meta);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"m.safetensors"});

  const io::SafetensorsFile f = io::load_safetensors(p);
  EXPECT_EQ(f.metadata, meta);
  ASSERT_EQ(f.names.size(), ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    EXPECT_EQ(f.names[i], ts[i].first);  // file order == the order given to save
    const Tensor& got = f.get(ts[i].first);
    EXPECT_EQ(got.shape(), ts[i].second.shape()) << ts[i].first;
    EXPECT_EQ(got.to_vector(), ts[i].second.to_vector()) << ts[i].first;  // bit-exact
  }
  EXPECT_EQ(f.get("scalar").item(), -1.5f);
  EXPECT_EQ(f.get("scalar").ndim(), 0);
}

// The bytes on disk follow the spec: little-endian length, header padded with spaces to a
// multiple of 8, header keys in the given order, offsets contiguous from 0.
TEST(Safetensors, FileLayoutFollowsSpec) {
  ScratchDir dir;
  const std::string p = dir.file("l.safetensors");
  io::save_safetensors(p, {{"w", Tensor::from_vector({2}, {1.0f, -2.0f})}, {"b", Tensor::scalar(3)}}, {{"k", "v"}});
  const std::string bytes = io::read_file(p);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(n % 8, 0u);
  ASSERT_EQ(bytes.size(), 8 + n + 12);
  const std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.front(), '{');
  const auto h = nlohmann::ordered_json::parse(header);  // trailing spaces are JSON whitespace
  std::vector<std::string> keys;
  for (const auto& [k, v] : h.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"__metadata__", "w", "b"}));
  EXPECT_EQ(h["w"]["data_offsets"], nlohmann::json({0, 8}));
  EXPECT_EQ(h["b"]["data_offsets"], nlohmann::json({8, 12}));
  EXPECT_EQ(h["b"]["shape"], nlohmann::json::array());
  EXPECT_EQ(h["w"]["dtype"], "F32");
  EXPECT_EQ(bytes.substr(8 + n), f32_bytes({1.0f, -2.0f, 3.0f}));
}

TEST(Safetensors, NonContiguousWrittenInLogicalOrder) {
  ScratchDir dir;
  Tensor x = Tensor::from_vector({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor xt = x.as_strided({3, 2}, {1, 3}, 0);  // transpose: [[0,3],[1,4],[2,5]]
  Tensor col = x.as_strided({2}, {3}, 1);       // column 1: [1, 4]
  const std::string p = dir.file("nc.safetensors");
  io::save_safetensors(p, {{"xt", xt}, {"col", col}});
  const auto f = io::load_safetensors(p);
  EXPECT_EQ(f.get("xt").shape(), (Shape{3, 2}));
  EXPECT_EQ(f.get("xt").to_vector(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(f.get("col").to_vector(), (std::vector<float>{1, 4}));
}

TEST(Safetensors, SaveRejectsBadNamesAndWritesNothing) {
  ScratchDir dir;
  const std::string p = dir.file("s.safetensors");
  const Tensor t = Tensor::ones({2});
  expect_error([&] { io::save_safetensors(p, {{"a", t}, {"b", t}, {"a", t}}); }, {p, "'a'", "twice"});
  expect_error([&] { io::save_safetensors(p, {{"", t}}); }, {p, "empty name"});
  expect_error([&] { io::save_safetensors(p, {{"__metadata__", t}}); }, {p, "reserved"});
  expect_error([&] { io::save_safetensors(p, {{"u", Tensor()}}); }, {p, "'u'", "undefined"});
  expect_error([&] { io::save_safetensors(p, {{"bad\xff", t}}); }, {p});
  EXPECT_TRUE(dir.entries().empty());
}

TEST(Safetensors, GetNamesMissingTensorAndFile) {
  ScratchDir dir;
  const std::string p = dir.file("g.safetensors");
  io::save_safetensors(p, {{"present", Tensor::ones({1})}});
  const auto f = io::load_safetensors(p);
  EXPECT_TRUE(f.contains("present"));
  EXPECT_FALSE(f.contains("absent"));
  expect_error([&] { f.get("absent"); }, {"'absent'", p, "present"});
}

TEST(Safetensors, MissingFileOrDirectory) {
  ScratchDir dir;
  expect_error([&] { io::load_safetensors(dir.file("none.safetensors")); },
               {dir.file("none.safetensors"), "not found"});
  expect_error([&] { io::load_safetensors(dir.path()); }, {dir.path(), "directory"});
}

TEST(Safetensors, TruncatedAtEveryPointIsAnError) {
  ScratchDir dir;
  const std::string good =
      io::serialize_safetensors({{"a", Tensor::ones({3})}, {"b", Tensor::ones({2, 2})}}, {{"k", "v"}});
  ASSERT_NO_THROW(io::parse_safetensors(good, "good"));
  // Every proper prefix: inside the length, inside the header, inside the data, one byte short.
  for (size_t len = 0; len < good.size(); ++len) {
    try {
      io::parse_safetensors(good.substr(0, len), "cut");
      ADD_FAILURE() << "a file cut to " << len << " of " << good.size() << " bytes loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'cut'"), std::string::npos) << e.what();
    }
  }
  expect_load_error(dir, good.substr(0, 5), "fewer than the 8-byte header length");
  expect_load_error(dir, good.substr(0, 20), "truncated");
  expect_load_error(dir, good.substr(0, good.size() - 1), "is the file truncated?");
  expect_load_error(dir, good + "xtra", "cover only");  // trailing bytes belong to no tensor
}

TEST(Safetensors, HeaderLengthTooLarge) {
  ScratchDir dir;
  expect_load_error(dir, le_u64(1000) + "{}", "only 2 bytes follow");
  expect_load_error(dir, le_u64(~0ull) + "{}", "byte limit");
  expect_load_error(dir, le_u64(100'000'001) + "{}", "byte limit");
}

TEST(Safetensors, HeaderNotJsonObject) {
  ScratchDir dir;
  expect_load_error(dir, raw_file(R"({"a": )", ""), "not valid JSON");
  expect_load_error(dir, raw_file("[1, 2]", ""), "not a JSON object");
  expect_load_error(dir, raw_file("        ", ""), "not a JSON object");
  expect_load_error(dir, raw_file(R"({"a": 1} trailing)", ""), "not valid JSON");
  expect_load_error(dir, raw_file("{\"\xff\": 1}", ""), "not valid UTF-8");
  expect_load_error(dir, raw_file("{\"\xc0\xaf\": 1}", ""), "not valid UTF-8");  // overlong '/'
  expect_load_error(dir, raw_file(std::string("{\0}", 3), ""), "not valid JSON");
  expect_load_error(dir, raw_file(R"({"a": 5})", ""), "not a JSON object");  // entry not object
  expect_load_error(dir, raw_file(kTwo.substr(0, kTwo.size() - 1) + R"(,"a":{}})", f32_bytes({1, 2, 3})),
                    "the key 'a' twice");
}

TEST(Safetensors, EmptyHeaderObjectIsAnEmptyFile) {
  const auto f = io::parse_safetensors(raw_file("{}      ", ""), "e");
  EXPECT_TRUE(f.names.empty());
  EXPECT_TRUE(f.metadata.empty());
}

TEST(Safetensors, WrongOffsets) {
  ScratchDir dir;
  const std::string d3 = f32_bytes({1, 2, 3});
  ASSERT_NO_THROW(io::parse_safetensors(raw_file(kTwo, d3), "ok"));
  auto with = [&](const std::string& a_offsets, const std::string& b_offsets) {
    return raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":)" + a_offsets +
                        R"(},"b":{"dtype":"F32","shape":[1],"data_offsets":)" + b_offsets + "}}",
                    d3);
  };
  expect_load_error(dir, with("[0,4]", "[4,8]"), "needs 8 bytes");              // size mismatch
  expect_load_error(dir, with("[0,8]", "[8,16]"), "outside the data section");  // past the end
  expect_load_error(dir, with("[8,0]", "[8,12]"), "outside the data section");  // begin > end
  expect_load_error(dir, with("[0,8]", "[4,8]"), "overlap");
  // Data order need not follow header order: b first, then a, is valid.
  EXPECT_EQ(io::parse_safetensors(with("[4,12]", "[0,4]"), "x").names, (std::vector<std::string>{"b", "a"}));
  expect_load_error(dir, with("[0,8]", "[0,4]"), "overlap");
  expect_load_error(dir, raw_file(kTwo, d3 + "gap!"), "cover only");
  // A gap between the two tensors: a at [0, 8), b at [12, 16).
  expect_load_error(dir,
                    raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
                             f32_bytes({1, 2, 3, 4})),
                    "bytes [8, 12) of the data section belong to no tensor");
  expect_load_error(dir, with("[0,8,9]", "[8,12]"), "data_offsets");
  expect_load_error(dir, with("[-1,8]", "[8,12]"), "data_offsets");
  expect_load_error(dir, with("[0.0,8]", "[8,12]"), "data_offsets");
  expect_load_error(dir, with("\"0,8\"", "[8,12]"), "data_offsets");
}

TEST(Safetensors, OffsetsOnlyCoveredWithoutGaps) {
  // Zero-size tensors may sit anywhere a boundary is; the order of names is by offset.
  const std::string h = R"({"late":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
                        R"("z0":{"dtype":"F32","shape":[0,2],"data_offsets":[4,4]},)"
                        R"("early":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})";
  const auto f = io::parse_safetensors(raw_file(h, f32_bytes({7, 8})), "z");
  EXPECT_EQ(f.names, (std::vector<std::string>{"early", "z0", "late"}));
  EXPECT_EQ(f.get("early").item(), 7.0f);
  EXPECT_EQ(f.get("late").item(), 8.0f);
  EXPECT_EQ(f.get("z0").shape(), (Shape{0, 2}));
}

TEST(Safetensors, BadDtypeAndShape) {
  ScratchDir dir;
  auto one = [](const std::string& dtype, const std::string& shape) {
    return raw_file(R"({"t":{"dtype":)" + dtype + R"(,"shape":)" + shape + R"(,"data_offsets":[0,4]}})",
                    f32_bytes({1}));
  };
  ASSERT_NO_THROW(io::parse_safetensors(one("\"F32\"", "[1]"), "ok"));
  expect_load_error(dir, one("\"I32\"", "[1]"), "dtype 'I32'");
  expect_load_error(dir, one("\"f32\"", "[1]"), "dtype 'f32'");
  expect_load_error(dir, one("32", "[1]"), "\"dtype\"");
  expect_load_error(dir, one("\"F32\"", "[-1]"), "non-negative integers");
  expect_load_error(dir, one("\"F32\"", "[1.0]"), "non-negative integers");
  expect_load_error(dir, one("\"F32\"", "1"), "\"shape\"");
  expect_load_error(dir, one("\"F32\"", "[4294967296, 4294967296, 4294967296]"), "too many");
  expect_load_error(dir, raw_file(R"({"t":{"shape":[1],"data_offsets":[0,4]}})", f32_bytes({1})), "\"dtype\"");
  expect_load_error(dir, raw_file(R"({"t":{"dtype":"F32","data_offsets":[0,4]}})", f32_bytes({1})), "\"shape\"");
  expect_load_error(dir, raw_file(R"({"t":{"dtype":"F32","shape":[1]}})", f32_bytes({1})), "data_offsets");
}

TEST(Safetensors, MetadataMustBeStrings) {
  ScratchDir dir;
  expect_load_error(dir, raw_file(R"({"__metadata__":{"step":7}})", ""), "'step'");
  expect_load_error(dir, raw_file(R"({"__metadata__":["a"]})", ""), "__metadata__");
  const auto f = io::parse_safetensors(raw_file(R"({"__metadata__":{"a":"1","b":""}})", ""), "m");
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"a", "1"}, {"b", ""}}));
}

// F16 / BF16 / F64 files are read and converted to float32 exactly (all values below are
// representable in float32).
TEST(Safetensors, DecodesHalfBfloatAndDouble) {
  const std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x3555, 0x7BFF, 0x0001, 0x0400, 0x8000, 0x7C00, 0xFC00, 0x7E00};
  const std::vector<float> f16_want = {1.0f,
                                       -2.0f,
                                       0.333251953125f,
                                       65504.0f,
                                       std::ldexp(1.0f, -24),
                                       std::ldexp(1.0f, -14),
                                       -0.0f,
                                       std::numeric_limits<float>::infinity(),
                                       -std::numeric_limits<float>::infinity(),
                                       NAN};
  const std::vector<uint16_t> bf16 = {0x3F80, 0xC0A0, 0x4049, 0x7F80, 0x0001};
  const std::vector<float> bf16_want = {1.0f, -5.0f, 3.140625f, std::numeric_limits<float>::infinity(),
                                        std::ldexp(1.0f, -133)};
  const std::vector<double> f64 = {0.1, -2.5, 1e-3};
  const std::string f64_bytes(reinterpret_cast<const char*>(f64.data()), 24);
  const std::string header = R"({"h":{"dtype":"F16","shape":[2,5],"data_offsets":[0,20]},)"
                             R"("b":{"dtype":"BF16","shape":[5],"data_offsets":[20,30]},)"
                             R"("d":{"dtype":"F64","shape":[3],"data_offsets":[30,54]}})";
  const auto f = io::parse_safetensors(raw_file(header, u16_bytes(f16) + u16_bytes(bf16) + f64_bytes), "x");
  const auto h = f.get("h").to_vector();
  EXPECT_EQ(f.get("h").shape(), (Shape{2, 5}));
  for (size_t i = 0; i + 1 < f16.size(); ++i) EXPECT_EQ(h[i], f16_want[i]) << "f16 element " << i;
  EXPECT_TRUE(std::signbit(h[6]));
  EXPECT_TRUE(std::isnan(h[9]));
  const auto b = f.get("b").to_vector();
  for (size_t i = 0; i < bf16.size(); ++i) EXPECT_EQ(b[i], bf16_want[i]) << "bf16 element " << i;
  EXPECT_EQ(f.get("d").to_vector(), (std::vector<float>{0.1f, -2.5f, 1e-3f}));
}

// Flipping bits anywhere in a small file (length, header, data) gives either a valid file or an
// atto::Error; never a crash, a hang or another exception type (also run under ASan/UBSan).
TEST(Safetensors, CorruptedBytesGiveErrorsNotCrashes) {
  const std::string good = io::serialize_safetensors(
      {{"a", Tensor::ones({2, 3})}, {"s", Tensor::scalar(1)}, {"e", Tensor::zeros({0})}}, {{"k", "v"}});
  int loaded = 0, rejected = 0;
  for (size_t pos = 0; pos < good.size(); ++pos) {
    for (unsigned mask : {0x01u, 0x02u, 0x10u, 0x20u, 0x80u, 0xffu}) {
      std::string bad = good;
      bad[pos] = static_cast<char>(static_cast<unsigned char>(bad[pos]) ^ mask);
      try {
        const auto f = io::parse_safetensors(bad, "flip");
        int64_t total = 0;
        for (const auto& [name, t] : f.tensors) total += t.numel();
        EXPECT_LE(total * 2, static_cast<int64_t>(bad.size())) << "pos " << pos;
        ++loaded;
      } catch (const Error&) {
        ++rejected;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "byte " << pos << " ^ " << mask << ": not an atto::Error: " << e.what();
      }
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(loaded, 0);  // flips inside the data section only change values
}

// The header alone: names, dtypes and shapes in file order, metadata, and the same validation
// as a full load (the data section's size comes from the file size, so truncation shows).
TEST(Safetensors, HeaderWithoutData) {
  ScratchDir dir;
  const std::string p = dir.file("h.safetensors");
  io::save_safetensors(p, {{"w", Tensor::ones({3, 2})}, {"b", Tensor::ones({2})}}, {{"k", "v"}});
  const io::SafetensorsHeader h = io::read_safetensors_header(p);
  EXPECT_EQ(h.path, p);
  EXPECT_EQ(h.names, (std::vector<std::string>{"w", "b"}));
  ASSERT_NE(h.find("w"), nullptr);
  EXPECT_EQ(h.find("w")->shape, (Shape{3, 2}));
  EXPECT_EQ(h.find("w")->dtype, "F32");
  EXPECT_EQ(h.find("b")->shape, (Shape{2}));
  EXPECT_EQ(h.find("absent"), nullptr);
  EXPECT_EQ(h.metadata.at("k"), "v");

  const std::string good = io::read_file(p);
  io::write_file_atomic(p, good.substr(0, good.size() - 1));
  expect_error([&] { io::read_safetensors_header(p); }, {p, "is the file truncated?"});
  io::write_file_atomic(p, good.substr(0, 20));
  expect_error([&] { io::read_safetensors_header(p); }, {p, "truncated"});
  io::write_file_atomic(p, le_u64(uint64_t{1} << 40) + "{}");
  expect_error([&] { io::read_safetensors_header(p); }, {p, "byte limit"});
  expect_error([] { io::read_safetensors_header("/dev/zero"); }, {"/dev/zero", "not a regular file"});
}

// One tensor read by its header's offsets: the same values as a full load, F16 converted; a file
// cut short since the header was read is an error naming the file and the tensor.
TEST(Safetensors, OneTensorAtATime) {
  ScratchDir dir;
  const std::string p = dir.file("t.safetensors");
  const Tensor w = Tensor::from_vector({2, 3}, {1, -2, 3.5f, 4, 5, 6});
  io::save_safetensors(p, {{"b", Tensor::ones({2})}, {"w", w}});
  const io::SafetensorsHeader h = io::read_safetensors_header(p);
  EXPECT_EQ(h.find("w")->bytes, 24u);
  const Tensor got = io::read_safetensors_tensor(h, "w");
  EXPECT_EQ(got.shape(), (Shape{2, 3}));
  EXPECT_EQ(std::vector<float>(got.data(), got.data() + 6), std::vector<float>({1, -2, 3.5f, 4, 5, 6}));
  expect_error([&] { io::read_safetensors_tensor(h, "absent"); }, {p, "absent"});
  // F16 1.0 and -2.0 (0x3C00, 0xC000).
  io::write_file_atomic(p, raw_file(R"({"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})",
                                    std::string("\x00\x3C\x00\xC0", 4)));
  const io::SafetensorsHeader h16 = io::read_safetensors_header(p);
  const Tensor half = io::read_safetensors_tensor(h16, "h");
  EXPECT_EQ(std::vector<float>(half.data(), half.data() + 2), std::vector<float>({1.0f, -2.0f}));
  io::write_file_atomic(p, io::read_file(p).substr(0, 10));
  expect_error([&] { io::read_safetensors_tensor(h16, "h"); }, {p, "tensor 'h' could not be read"});
}
