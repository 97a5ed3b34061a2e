// atto/io/gguf.h: GGUF (version 3), the file format of llama.cpp and ggml: typed metadata and
// tensors of f32, f16 or q8_0, written and read without any model knowledge.
//
//   io::GgufWriter w;
//   w.add("general.architecture", io::GgufValue::string("gpt2"));
//   w.add("gpt2.block_count", io::GgufValue::u32(4));
//   w.add_tensor("token_embd.weight", {V, C}, io::GgmlType::F16, weights);   // row-major shape
//   w.write("model.gguf");                                                  // atomic
//
//   io::GgufFile f = io::read_gguf("model.gguf");          // every field validated
//   f.get("gpt2.block_count").as_uint("block count");      // Error naming the key when wrong
//   std::vector<float> w = f.tensor_f32("token_embd.weight");  // dequantised
//
// Layout (the GGUF specification, ggml's docs/gguf.md): "GGUF", version, tensor count, metadata
// count; the metadata (key string, value type, value); the tensor infos (name, dims, ggml type,
// offset); padding to general.alignment (32); the tensor data, each tensor at a multiple of the
// alignment. Strings are a u64 length and UTF-8 bytes; little-endian throughout. Dims are
// innermost first (ggml's ne): a row-major [rows, cols] matrix is ne = {cols, rows}. This API
// speaks row-major shapes and reverses them on the way in and out.
//
// The reader checks every count, length, offset, type, shape and the alignment against the bytes
// that remain before it allocates anything (the llama.cpp loader's CVE history is the list:
// huge counts, strings past the end, nested arrays, dims that overflow, tensors past the end or
// overlapping each other, duplicate keys or names); each error names the file, the field and
// what is wrong.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace atto::io {

enum class GgmlType : uint32_t { F32 = 0, F16 = 1, Q8_0 = 8 };
const char* to_string(GgmlType t);
// Bytes of n elements (n a multiple of the block size, 32 for q8_0).
uint64_t ggml_nbytes(GgmlType t, uint64_t n);

// IEEE binary16 conversions (round to nearest, ties to even), as ggml's GGML_FP32_TO_FP16.
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);
// q8_0: blocks of 32 values as one f16 scale d = max|x| / 127 and 32 int8 q = round(x / d),
// exactly as ggml's quantize_row_q8_0_ref; n must be a multiple of 32.
std::vector<uint8_t> quantize_q8_0(std::span<const float> x);
void dequantize_q8_0(const uint8_t* blocks, float* out, uint64_t n);

// The GGUF metadata value types.
enum class GgufType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12
};

// One metadata value: a scalar, a string, or an array of one scalar or string type.
struct GgufValue {
  GgufType type = GgufType::U32;
  GgufType elem = GgufType::U32;          // arrays: the element type
  double number = 0.0;                    // numeric scalars and bools (every u32/i32/f32 is exact)
  uint64_t u64 = 0;                       // U64/I64 scalars, bit-exact
  std::string text = {};                  // String
  std::vector<double> numbers = {};       // arrays of numbers
  std::vector<std::string> strings = {};  // arrays of strings

  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue f32(float v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string v);
  static GgufValue string_array(std::vector<std::string> v);
  static GgufValue i32_array(const std::vector<int32_t>& v);
  static GgufValue f32_array(const std::vector<float>& v);

  // Checked reads: atto::Error naming `what` unless the value has that shape.
  uint64_t as_uint(std::string_view what) const;  // any unsigned or non-negative integer type
  double as_number(std::string_view what) const;  // any numeric type
  const std::string& as_string(std::string_view what) const;
  bool as_bool(std::string_view what) const;
  const std::vector<std::string>& as_strings(std::string_view what) const;
  const std::vector<double>& as_numbers(std::string_view what) const;
};

class GgufWriter {
 public:
  void add(const std::string& key, GgufValue v);  // keys in the order added; a repeated key is an error
  // A tensor of row-major `shape` from f32 data, stored as `type` (q8_0 needs a last dimension
  // that is a multiple of 32).
  void add_tensor(const std::string& name, const std::vector<int64_t>& shape, GgmlType type,
                  std::span<const float> data);
  std::string bytes() const;
  void write(const std::string& path) const;  // atomic (io/file.h)

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    GgmlType type;
    std::string data;
  };
  std::vector<std::pair<std::string, GgufValue>> meta_;
  std::vector<Tensor> tensors_;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // row-major (ggml's ne reversed)
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;  // from the start of the tensor data
  uint64_t nbytes = 0;
  int64_t numel() const;
};

class GgufFile {
 public:
  uint32_t version = 3;
  uint32_t alignment = 32;
  std::string path;
  std::map<std::string, GgufValue> metadata;
  std::vector<GgufTensorInfo> tensors;  // in file order

  bool has(const std::string& key) const { return metadata.count(key) > 0; }
  const GgufValue& get(const std::string& key) const;  // atto::Error naming the key and the file
  const GgufTensorInfo* find(const std::string& name) const;
  // The tensor as f32 (f16 and q8_0 dequantised); atto::Error when it is missing or its shape
  // is not `shape` (when given).
  std::vector<float> tensor_f32(const std::string& name, const std::vector<int64_t>& shape = {}) const;

  std::string bytes_;  // the whole file
  uint64_t data_start_ = 0;
};

// Parses GGUF bytes; `source` names them in errors.
GgufFile parse_gguf(std::string bytes, const std::string& source);
GgufFile read_gguf(const std::string& path);
// Whether a file starts with the GGUF magic.
bool is_gguf_file(const std::string& path);

}  // namespace atto::io
