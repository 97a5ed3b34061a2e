// atto/io/safetensors.h: read and write safetensors files (the weights format of atto).
//
//   atto::io::save_safetensors("model.safetensors",
//                              {{"wte.weight", wte}, {"ln_f.bias", b}},   // written in this order
//                              {{"format", "pt"}});                       // optional __metadata__
//   atto::io::SafetensorsFile f = atto::io::load_safetensors("model.safetensors");
//   const atto::Tensor& w = f.get("wte.weight");   // throws atto::Error naming tensor and file
//   f.names;                                        // {"wte.weight", "ln_f.bias"}: file order
//
// File layout (https://github.com/huggingface/safetensors, "Format"):
//   [8 bytes]  N, the header length, unsigned 64-bit little-endian
//   [N bytes]  header: a UTF-8 JSON object
//                {"__metadata__": {"k": "v", ...},                 (optional, string -> string)
//                 "<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//              padded with spaces to a multiple of 8 bytes
//   [rest]     the data section: each tensor row-major, little-endian, at [begin, end) counted
//              from the start of the data section. Tensors cover the section without gaps or
//              overlaps.
//
// Writing: F32 only, tensors in the given order, data contiguous in that same order. A
// non-contiguous tensor is written in its logical row-major order. The write is atomic
// (io/file.h). Duplicate or empty names, and the name "__metadata__", are errors.
//
// Reading: F32, F16, BF16 and F64 are accepted and converted to float32; every other dtype is an
// error. Everything is validated before use (see docs/safetensors.md); any problem, including a
// truncated file or a corrupt header, is an atto::Error naming the file and what is wrong.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace atto::io {

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// The serialized bytes save_safetensors writes (for tests and for writers that add framing).
std::string serialize_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                  const std::map<std::string, std::string>& metadata = {},
                                  const std::string& what = "safetensors data");

struct SafetensorsFile {
  std::string path;                             // where it was loaded from (for messages)
  std::map<std::string, std::string> metadata;  // "__metadata__", empty if absent
  std::vector<std::string> names;               // in file order (by data offset)
  std::map<std::string, Tensor> tensors;        // all float32, contiguous

  // The tensor called `name`; throws atto::Error naming the tensor and the file if absent.
  const Tensor& get(const std::string& name) const;
  bool contains(const std::string& name) const { return tensors.count(name) != 0; }
};

SafetensorsFile load_safetensors(const std::string& path);

// What the header says about one tensor.
struct TensorInfo {
  std::string dtype;  // "F32", "F16", "BF16" or "F64"
  Shape shape;
  uint64_t offset = 0, bytes = 0;  // where its data lies in the file (from the file's start)
};

// A file's header without its data: only the first 8 + N bytes are read (the data section's
// size comes from the file's size), and everything load_safetensors checks about the header is
// checked (dtypes, shapes, offsets inside the file, no gaps or overlaps). For checking what a
// file holds before allocating anything for it.
struct SafetensorsHeader {
  std::string path;
  std::map<std::string, std::string> metadata;
  std::vector<std::string> names;  // in file order
  std::map<std::string, TensorInfo> tensors;

  // The entry called `name`, or nullptr.
  const TensorInfo* find(const std::string& name) const {
    auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : &it->second;
  }
};
SafetensorsHeader read_safetensors_header(const std::string& path);
// One tensor of a file whose header was read, as float32: only that tensor's bytes are read, so
// a large file is handled one tensor at a time. atto::Error naming the file and the tensor when
// it is not in the header or the file became shorter since.
Tensor read_safetensors_tensor(const SafetensorsHeader& h, const std::string& name);

// Parses an in-memory safetensors image; `path` is only used in error messages.
SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& path);

}  // namespace atto::io
