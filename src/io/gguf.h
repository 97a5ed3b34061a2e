// atto/io/gguf.h: GGUF (version 3), the file format of llama.cpp and ggml: typed metadata and
// tensors, written and read without any model knowledge. Tensors are read and written as f32, f16,
// q4_0, q8_0, Q4_K and Q6_K (io/ggml_quants.h: ggml's blocks; io/gguf_recipe.h: which type each
// tensor of an exported or re-quantized file gets).
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

#include "io/ggml_quants.h"
#include "io/gguf_recipe.h"

namespace atto::io {

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
  // A tensor of row-major `shape` from f32 data, stored as `type` (a writable type: q4_0 and q8_0
  // need a last dimension that is a multiple of 32, Q4_K of 256).
  void add_tensor(const std::string& name, const std::vector<int64_t>& shape, GgmlType type,
                  std::span<const float> data);
  // A tensor's bytes as they are, of any type atto reads (ggml_nbytes of them; checked).
  void add_tensor_bytes(const std::string& name, const std::vector<int64_t>& shape, GgmlType type, std::string bytes);
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
  std::vector<std::string> keys;        // the metadata keys in file order
  std::vector<GgufTensorInfo> tensors;  // in file order

  bool has(const std::string& key) const { return metadata.count(key) > 0; }
  const GgufValue& get(const std::string& key) const;  // atto::Error naming the key and the file
  const GgufTensorInfo* find(const std::string& name) const;
  // The tensor as f32 (every other type dequantised); atto::Error when it is missing or its shape
  // is not `shape` (when given).
  std::vector<float> tensor_f32(const std::string& name, const std::vector<int64_t>& shape = {}) const;
  // Its bytes as the file holds them.
  std::string tensor_bytes(const GgufTensorInfo& t) const;

  std::string bytes_;  // parse_gguf: the whole file; read_gguf: its first bytes (the header at least)
  uint64_t data_start_ = 0;
  std::string data_path_;  // read_gguf of a file longer than bytes_: the tensor data is read from it
};

// Parses GGUF bytes; `source` names them in errors.
GgufFile parse_gguf(std::string bytes, const std::string& source);
// The file's header (metadata, tensor infos), read from its first bytes (first_read, then 4x more
// while the header goes on), with every check parse_gguf makes against the file's size; each
// tensor's bytes are read from the file when asked for, so that the file is never held whole.
GgufFile read_gguf(const std::string& path, uint64_t first_read = uint64_t{1} << 20);
// Whether a file starts with the GGUF magic.
bool is_gguf_file(const std::string& path);

// A GGUF file with its matrices stored as `want` says (llama.cpp's llama-quantize, for the types
// atto writes): every metadata key in its order (general.file_type set to want's) and every tensor
// in its order. A tensor whose type is not the one TypePlan gives it is re-encoded to that type
// from its f32 values; 1-D tensors (norms, biases) and the other matrices are copied byte for byte.
// Re-encoding to a type of more precision than the tensor has (q8_0 to f16, q4_0 to q8_0) would
// not make it better: an atto::Error naming the tensor and both types unless allow_requantize.
struct GgufRequantized {
  GgufWriter writer;
  int requantized = 0, copied = 0;
};
GgufRequantized requantize_gguf(const GgufFile& in, const QuantRecipe& want, bool allow_requantize);

}  // namespace atto::io
