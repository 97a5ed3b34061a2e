#include "io/gguf.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>

#include "base/error.h"
#include "base/files.h"
#include "base/json.h"
#include "io/file.h"

namespace atto::io {

namespace {

constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint32_t kVersion = 3;
constexpr int kMaxDims = 4;

size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::Bool: return 1;
    case GgufType::U16:
    case GgufType::I16: return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32: return 4;
    case GgufType::U64:
    case GgufType::I64:
    case GgufType::F64: return 8;
    case GgufType::String:
    case GgufType::Array: return 0;
  }
  return 0;
}

// ---- writing --------------------------------------------------------------------------------
template <typename T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}
void put_string(std::string& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  out.append(s);
}
void put_scalar(std::string& out, GgufType t, double v) {
  switch (t) {
    case GgufType::U8: put<uint8_t>(out, static_cast<uint8_t>(v)); break;
    case GgufType::I8: put<int8_t>(out, static_cast<int8_t>(v)); break;
    case GgufType::U16: put<uint16_t>(out, static_cast<uint16_t>(v)); break;
    case GgufType::I16: put<int16_t>(out, static_cast<int16_t>(v)); break;
    case GgufType::U32: put<uint32_t>(out, static_cast<uint32_t>(v)); break;
    case GgufType::I32: put<int32_t>(out, static_cast<int32_t>(v)); break;
    case GgufType::F32: put<float>(out, static_cast<float>(v)); break;
    case GgufType::Bool: put<uint8_t>(out, v != 0.0 ? 1 : 0); break;
    case GgufType::F64: put<double>(out, v); break;
    default: fail("GGUF writer: {} is not a scalar type", static_cast<uint32_t>(t));
  }
}
void put_value(std::string& out, const GgufValue& v) {
  put<uint32_t>(out, static_cast<uint32_t>(v.type));
  if (v.type == GgufType::String) {
    put_string(out, v.text);
  } else if (v.type == GgufType::Array) {
    put<uint32_t>(out, static_cast<uint32_t>(v.elem));
    if (v.elem == GgufType::String) {
      put<uint64_t>(out, v.strings.size());
      for (const std::string& s : v.strings) put_string(out, s);
    } else {
      put<uint64_t>(out, v.numbers.size());
      for (double x : v.numbers) put_scalar(out, v.elem, x);
    }
  } else if (v.type == GgufType::U64 || v.type == GgufType::I64) {
    put<uint64_t>(out, v.u64);
  } else {
    put_scalar(out, v.type, v.number);
  }
}
uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// ---- reading --------------------------------------------------------------------------------
// What a Cursor over a file's first bytes throws when it needs bytes past them that the file has
// (read_gguf reads more of it and starts again).
struct NeedMore {
  uint64_t end;
};

// Reads b, the first bytes of a file of `total` bytes (all of it: total == b.size()).
class Cursor {
 public:
  Cursor(const std::string& b, uint64_t total, const std::string& source) : b_(b), total_(total), source_(source) {}
  size_t pos() const { return pos_; }
  uint64_t left() const { return total_ - pos_; }  // in the file
  void need(uint64_t n, std::string_view what) const {
    ATTO_CHECK(n <= left(), "{}: truncated GGUF file: {} needs {} bytes at offset {}, {} remain", source_, what, n,
               pos_, left());
    if (n > b_.size() - pos_) throw NeedMore{pos_ + n};
  }
  template <typename T>
  T get(std::string_view what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str(std::string_view what) {
    const auto n = get<uint64_t>(what);
    need(n, what);
    std::string s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  const std::string& source() const { return source_; }

 private:
  const std::string& b_;
  uint64_t total_;
  const std::string& source_;
  size_t pos_ = 0;
};

double read_scalar(Cursor& c, GgufType t, const std::string& what) {
  switch (t) {
    case GgufType::U8: return c.get<uint8_t>(what);
    case GgufType::I8: return c.get<int8_t>(what);
    case GgufType::U16: return c.get<uint16_t>(what);
    case GgufType::I16: return c.get<int16_t>(what);
    case GgufType::U32: return c.get<uint32_t>(what);
    case GgufType::I32: return c.get<int32_t>(what);
    case GgufType::F32: return c.get<float>(what);
    case GgufType::Bool: {
      const auto b = c.get<uint8_t>(what);
      ATTO_CHECK(b <= 1, "{}: {} is a bool holding {}", c.source(), what, b);
      return b;
    }
    case GgufType::F64: return c.get<double>(what);
    default: break;
  }
  fail("{}: {} has value type {}, which is not a scalar", c.source(), what, static_cast<uint32_t>(t));
}

GgufType read_type(Cursor& c, const std::string& what) {
  const auto t = c.get<uint32_t>(what);
  ATTO_CHECK(t <= static_cast<uint32_t>(GgufType::F64), "{}: {} has unknown value type {}", c.source(), what, t);
  return static_cast<GgufType>(t);
}

GgufValue read_value(Cursor& c, const std::string& key) {
  GgufValue v;
  v.type = read_type(c, key);
  if (v.type == GgufType::String) {
    v.text = c.str(key);
  } else if (v.type == GgufType::Array) {
    v.elem = read_type(c, key + " (array element type)");
    ATTO_CHECK(v.elem != GgufType::Array, "{}: {} is an array of arrays, which atto does not read", c.source(), key);
    const auto n = c.get<uint64_t>(key + " (array length)");
    // Each element takes at least its size (a string at least its 8-byte length): the count
    // cannot exceed what remains, so nothing huge is allocated for a damaged count.
    const uint64_t min_size = v.elem == GgufType::String ? 8 : scalar_size(v.elem);
    ATTO_CHECK(n <= c.left() / min_size, "{}: {} claims {} elements, more than the {} bytes left can hold", c.source(),
               key, n, c.left());
    if (v.elem == GgufType::String) {
      v.strings.reserve(n);
      for (uint64_t i = 0; i < n; ++i) v.strings.push_back(c.str(key));
    } else {
      v.numbers.reserve(n);
      for (uint64_t i = 0; i < n; ++i) {
        if (v.elem == GgufType::U64) {
          v.numbers.push_back(static_cast<double>(c.get<uint64_t>(key)));
        } else if (v.elem == GgufType::I64) {
          v.numbers.push_back(static_cast<double>(c.get<int64_t>(key)));
        } else {
          v.numbers.push_back(read_scalar(c, v.elem, key));
        }
      }
    }
  } else if (v.type == GgufType::U64 || v.type == GgufType::I64) {
    v.u64 = c.get<uint64_t>(key);
    v.number = v.type == GgufType::U64 ? static_cast<double>(v.u64) : static_cast<double>(static_cast<int64_t>(v.u64));
  } else {
    v.number = read_scalar(c, v.type, key);
  }
  return v;
}

// A metadata key or a tensor name: 1 to kMaxNameBytes of printable ASCII, as every GGUF writer
// makes them (ggml's names are ASCII of at most 64 bytes). Checked as it is read, so that every
// later message can quote a name as it is: no control byte, no NUL, no terminal escape in it.
std::string read_name(Cursor& c, const char* kind, uint64_t index) {
  constexpr size_t kMaxNameBytes = 256;
  const uint64_t at = c.pos();
  std::string s = c.str(kind);
  ATTO_CHECK(!s.empty(), "{}: {} {} is empty (at byte {})", c.source(), kind, index, at);
  const bool printable = std::all_of(s.begin(), s.end(), [](char ch) { return ch >= 0x20 && ch < 0x7f; });
  ATTO_CHECK(printable && s.size() <= kMaxNameBytes,
             "{}: {} {} (at byte {}) is {}{}; GGUF names are printable ASCII of at most {} bytes", c.source(), kind,
             index, at, json_util::printable(s, 64), printable ? fmt::format(", {} bytes", s.size()) : "",
             kMaxNameBytes);
  return s;
}

GgufTensorInfo read_tensor_info(Cursor& c, uint64_t index) {
  GgufTensorInfo t;
  t.name = read_name(c, "tensor name", index);
  const auto n_dims = c.get<uint32_t>(t.name + " (dimension count)");
  ATTO_CHECK(n_dims >= 1 && n_dims <= kMaxDims, "{}: tensor {} has {} dimensions (1 to {} allowed)", c.source(), t.name,
             n_dims, kMaxDims);
  std::vector<int64_t> ne(n_dims);
  uint64_t numel = 1;
  for (uint32_t i = 0; i < n_dims; ++i) {
    const auto d = c.get<uint64_t>(t.name + " (dimension)");
    ATTO_CHECK(d >= 1 && d <= (uint64_t{1} << 40) && numel <= (uint64_t{1} << 62) / d,
               "{}: tensor {} has an invalid dimension {} (a dimension is at least 1 and the product must fit)",
               c.source(), t.name, d);
    numel *= d;
    ne[i] = static_cast<int64_t>(d);
  }
  t.shape.assign(ne.rbegin(), ne.rend());
  const auto type = c.get<uint32_t>(t.name + " (type)");
  ATTO_CHECK(ggml_type_readable(type),
             "{}: tensor {} has ggml type {} ({}), which atto does not read (it reads f32, f16, bf16, q4_0, q4_1, "
             "q5_0, q5_1, q8_0, q2_k, q3_k, q4_k, q5_k and q6_k)",
             c.source(), t.name, type, ggml_type_name(type));
  t.type = static_cast<GgmlType>(type);
  const uint64_t block = ggml_block_size(t.type);
  ATTO_CHECK(static_cast<uint64_t>(ne[0]) % block == 0,
             "{}: tensor {} of type {} has rows of {} values, not a multiple of its block of {}", c.source(), t.name,
             to_string(t.type), ne[0], block);
  t.nbytes = ggml_nbytes(t.type, numel);
  t.offset = c.get<uint64_t>(t.name + " (offset)");
  return t;
}

}  // namespace

// ============================================================================================
// Values
// ============================================================================================
GgufValue GgufValue::u32(uint32_t v) { return {.type = GgufType::U32, .number = static_cast<double>(v)}; }
GgufValue GgufValue::i32(int32_t v) { return {.type = GgufType::I32, .number = static_cast<double>(v)}; }
GgufValue GgufValue::f32(float v) { return {.type = GgufType::F32, .number = static_cast<double>(v)}; }
GgufValue GgufValue::boolean(bool v) { return {.type = GgufType::Bool, .number = v ? 1.0 : 0.0}; }
GgufValue GgufValue::string(std::string v) { return {.type = GgufType::String, .text = std::move(v)}; }
GgufValue GgufValue::string_array(std::vector<std::string> v) {
  return {.type = GgufType::Array, .elem = GgufType::String, .strings = std::move(v)};
}
GgufValue GgufValue::i32_array(const std::vector<int32_t>& v) {
  return {.type = GgufType::Array, .elem = GgufType::I32, .numbers = std::vector<double>(v.begin(), v.end())};
}

GgufValue GgufValue::f32_array(const std::vector<float>& v) {
  return {.type = GgufType::Array, .elem = GgufType::F32, .numbers = std::vector<double>(v.begin(), v.end())};
}

bool GgufValue::as_bool(std::string_view what) const {
  ATTO_CHECK(type == GgufType::Bool, "{} must be a boolean", what);
  return number != 0.0;
}

uint64_t GgufValue::as_uint(std::string_view what) const {
  const bool integer = type == GgufType::U8 || type == GgufType::U16 || type == GgufType::U32 ||
                       type == GgufType::U64 || type == GgufType::I8 || type == GgufType::I16 ||
                       type == GgufType::I32 || type == GgufType::I64;
  ATTO_CHECK(integer, "{} must be an integer", what);
  if (type == GgufType::U64) return u64;
  ATTO_CHECK(number >= 0, "{} must not be negative, got {}", what, number);
  return static_cast<uint64_t>(number);
}
double GgufValue::as_number(std::string_view what) const {
  ATTO_CHECK(type != GgufType::String && type != GgufType::Array, "{} must be a number", what);
  return number;
}
const std::string& GgufValue::as_string(std::string_view what) const {
  ATTO_CHECK(type == GgufType::String, "{} must be a string", what);
  return text;
}
const std::vector<std::string>& GgufValue::as_strings(std::string_view what) const {
  ATTO_CHECK(type == GgufType::Array && elem == GgufType::String, "{} must be an array of strings", what);
  return strings;
}
const std::vector<double>& GgufValue::as_numbers(std::string_view what) const {
  ATTO_CHECK(type == GgufType::Array && elem != GgufType::String, "{} must be an array of numbers", what);
  return numbers;
}

// ============================================================================================
// Writer
// ============================================================================================
void GgufWriter::add(const std::string& key, GgufValue v) {
  for (const auto& [k, _] : meta_) ATTO_CHECK(k != key, "GGUF writer: metadata key {} added twice", key);
  meta_.emplace_back(key, std::move(v));
}

void GgufWriter::add_tensor(const std::string& name, const std::vector<int64_t>& shape, GgmlType type,
                            std::span<const float> data) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  ATTO_CHECK(!shape.empty() && shape.size() <= kMaxDims && n == static_cast<int64_t>(data.size()),
             "GGUF writer: tensor {} has {} values for its shape", name, data.size());
  ATTO_CHECK(ggml_type_writable(type), "GGUF writer: tensor {}: atto does not write type {}", name, to_string(type));
  ATTO_CHECK(shape.back() % static_cast<int64_t>(ggml_block_size(type)) == 0,
             "GGUF writer: {} tensor {} has rows of {} values, not a multiple of {}", to_string(type), name,
             shape.back(), ggml_block_size(type));
  tensors_.push_back({name, shape, type, encode(type, data)});
}

void GgufWriter::add_tensor_bytes(const std::string& name, const std::vector<int64_t>& shape, GgmlType type,
                                  std::string bytes) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  ATTO_CHECK(!shape.empty() && shape.size() <= kMaxDims &&
                 shape.back() % static_cast<int64_t>(ggml_block_size(type)) == 0 &&
                 ggml_nbytes(type, static_cast<uint64_t>(n)) == bytes.size(),
             "GGUF writer: tensor {} has {} bytes, not those of a {} tensor of its shape", name, bytes.size(),
             to_string(type));
  tensors_.push_back({name, shape, type, std::move(bytes)});
}

std::string GgufWriter::bytes() const {
  uint32_t alignment = 32;
  for (const auto& [k, v] : meta_)
    if (k == "general.alignment") alignment = static_cast<uint32_t>(v.number);
  std::string out(kMagic, 4);
  put<uint32_t>(out, kVersion);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, meta_.size());
  for (const auto& [k, v] : meta_) {
    put_string(out, k);
    put_value(out, v);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) put<uint64_t>(out, static_cast<uint64_t>(*it));
    put<uint32_t>(out, static_cast<uint32_t>(t.type));
    put<uint64_t>(out, offset);
    offset = align_up(offset + t.data.size(), alignment);
  }
  out.resize(align_up(out.size(), alignment), '\0');
  for (const Tensor& t : tensors_) {
    out += t.data;
    out.resize(align_up(out.size(), alignment), '\0');
  }
  return out;
}

void GgufWriter::write(const std::string& path) const { write_file_atomic(path, bytes()); }

// ============================================================================================
// Reader
// ============================================================================================
int64_t GgufTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const GgufValue& GgufFile::get(const std::string& key) const {
  auto it = metadata.find(key);
  ATTO_CHECK(it != metadata.end(), "{}: the GGUF metadata has no key {}", path, key);
  return it->second;
}

const GgufTensorInfo* GgufFile::find(const std::string& name) const {
  for (const GgufTensorInfo& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::vector<float> GgufFile::tensor_f32(const std::string& name, const std::vector<int64_t>& shape) const {
  const GgufTensorInfo* t = find(name);
  ATTO_CHECK(t != nullptr, "{}: the GGUF file has no tensor {}", path, name);
  ATTO_CHECK(shape.empty() || t->shape == shape, "{}: tensor {} has shape [{}], expected [{}]", path, name,
             fmt::join(t->shape, ", "), fmt::join(shape, ", "));
  std::vector<float> out(static_cast<size_t>(t->numel()));
  std::unique_ptr<char[]> read;  // the tensor's bytes from the file (not zeroed first)
  if (!data_path_.empty() && t->type == GgmlType::F32) {  // its floats as they are
    files::read_range_into(reinterpret_cast<char*>(out.data()), data_path_, data_start_ + t->offset, t->nbytes,
                           "GGUF file");
    return out;
  }
  if (!data_path_.empty()) {
    read = std::make_unique_for_overwrite<char[]>(t->nbytes);
    files::read_range_into(read.get(), data_path_, data_start_ + t->offset, t->nbytes, "GGUF file");
  }
  const char* at = read ? read.get() : bytes_.data() + data_start_ + t->offset;
  decode(t->type, reinterpret_cast<const uint8_t*>(at), out.data(), out.size());
  return out;
}

std::string GgufFile::tensor_bytes(const GgufTensorInfo& t) const {
  if (!data_path_.empty()) return files::read_range(data_path_, data_start_ + t.offset, t.nbytes, "GGUF file");
  return bytes_.substr(data_start_ + t.offset, t.nbytes);
}

namespace {

// The file's header from its first bytes (`bytes`, of a file of `total`); NeedMore when the
// header goes on past them. Every check is against the whole file's size.
GgufFile parse_head(std::string bytes, uint64_t total, const std::string& source) {
  GgufFile f;
  f.path = source;
  f.bytes_ = std::move(bytes);
  Cursor c(f.bytes_, total, source);
  c.need(4, "the magic");
  ATTO_CHECK(std::memcmp(f.bytes_.data(), kMagic, 4) == 0, "{}: not a GGUF file (it does not start with \"GGUF\")",
             source);
  c.get<uint32_t>("the magic");
  f.version = c.get<uint32_t>("the version");
  ATTO_CHECK(f.version == 2 || f.version == 3, "{}: GGUF version {} is not supported (atto reads versions 2 and 3{})",
             source, f.version, f.version > 0xffff ? "; this may be a big-endian file" : "");
  const auto n_tensors = c.get<uint64_t>("the tensor count");
  const auto n_kv = c.get<uint64_t>("the metadata count");
  // A metadata entry takes at least 8 + 1 + 4 + 1 bytes, a tensor info at least 8 + 1 + 4 + 8 + 4 + 8.
  ATTO_CHECK(n_kv <= c.left() / 14, "{}: the header claims {} metadata entries, more than the file can hold", source,
             n_kv);
  ATTO_CHECK(n_tensors <= c.left() / 33, "{}: the header claims {} tensors, more than the file can hold", source,
             n_tensors);
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = read_name(c, "metadata key", i);
    ATTO_CHECK(!f.metadata.count(key), "{}: metadata key {} appears twice", source, key);
    GgufValue v = read_value(c, key);
    f.keys.push_back(key);
    f.metadata.emplace(std::move(key), std::move(v));
  }
  if (f.has("general.alignment")) {
    const uint64_t a = f.get("general.alignment").as_uint(source + ": general.alignment");
    ATTO_CHECK(a >= 1 && a <= 4096 && (a & (a - 1)) == 0, "{}: general.alignment {} is not a power of two <= 4096",
               source, a);
    f.alignment = static_cast<uint32_t>(a);
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t = read_tensor_info(c, i);
    ATTO_CHECK(f.find(t.name) == nullptr, "{}: tensor {} appears twice", source, t.name);
    ATTO_CHECK(t.offset % f.alignment == 0, "{}: tensor {} is at offset {}, not a multiple of the alignment {}", source,
               t.name, t.offset, f.alignment);
    f.tensors.push_back(std::move(t));
  }
  f.data_start_ = align_up(c.pos(), f.alignment);
  ATTO_CHECK(f.data_start_ <= total, "{}: truncated GGUF file: no tensor data", source);
  const uint64_t data_size = total - f.data_start_;
  std::vector<const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& t : f.tensors) {
    ATTO_CHECK(t.offset <= data_size && t.nbytes <= data_size - t.offset,
               "{}: truncated GGUF file: tensor {} needs bytes [{}, {}) of the data, which has {}", source, t.name,
               t.offset, t.offset + t.nbytes, data_size);
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    ATTO_CHECK(by_offset[i]->offset >= by_offset[i - 1]->offset + by_offset[i - 1]->nbytes,
               "{}: tensors {} and {} overlap", source, by_offset[i - 1]->name, by_offset[i]->name);
  return f;
}

}  // namespace

GgufFile parse_gguf(std::string bytes, const std::string& source) {
  const uint64_t total = bytes.size();
  return parse_head(std::move(bytes), total, source);
}

GgufFile read_gguf(const std::string& path, uint64_t first_read) {
  // The header from the file's first bytes, read again four times longer while it goes on past
  // them; the tensor data from the file when it is asked for (tensor_bytes, tensor_f32). A model
  // being loaded is never beside the whole file in memory.
  uint64_t want = std::max<uint64_t>(first_read, 64);
  for (;;) {
    uint64_t total = 0;
    std::string head = files::read_prefix(path, static_cast<size_t>(want), total, "GGUF file");
    const bool whole = head.size() >= total;
    if (whole) total = head.size();
    try {
      GgufFile f = parse_head(std::move(head), total, path);
      if (!whole) f.data_path_ = path;
      return f;
    } catch (const NeedMore& more) {
      want = std::max(want * 4, more.end);
    }
  }
}

bool is_gguf_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;  // never opens a FIFO or a device
  try {
    uint64_t size = 0;
    return files::read_prefix(path, 4, size, "GGUF file").substr(0, 4) == std::string_view(kMagic, 4);
  } catch (const Error&) {
    return false;  // unreadable: the reader that follows says why
  }
}

GgufRequantized requantize_gguf(const GgufFile& in, const QuantRecipe& want, bool allow_requantize) {
  ATTO_CHECK(ggml_type_writable(want.type), "atto does not write ggml type {}", to_string(want.type));
  GgufRequantized r;
  for (const std::string& k : in.keys)
    r.writer.add(k, k == "general.file_type" ? GgufValue::u32(file_type_of(want)) : in.metadata.at(k));
  std::vector<std::string> names;
  for (const GgufTensorInfo& t : in.tensors) names.push_back(t.name);
  const TypePlan plan(want, names);
  for (const GgufTensorInfo& t : in.tensors) {
    const GgmlType to = plan.type_of(t.name, t.shape, t.type);
    if (to == t.type) {
      r.writer.add_tensor_bytes(t.name, t.shape, t.type, in.tensor_bytes(t));
      ++r.copied;
      continue;
    }
    ATTO_CHECK(allow_requantize || t.type == GgmlType::F32 || ggml_type_precision(to) < ggml_type_precision(t.type),
               "{}: tensor {} is stored as {}: re-encoding it as {} would not make it better than {} (its values "
               "are already rounded to {}); allow re-quantizing (atto quantize --allow-requantize) to do it anyway",
               in.path, t.name, to_string(t.type), to_string(to), to_string(t.type), to_string(t.type));
    r.writer.add_tensor(t.name, t.shape, to, in.tensor_f32(t.name));
    ++r.requantized;
  }
  return r;
}

}  // namespace atto::io
