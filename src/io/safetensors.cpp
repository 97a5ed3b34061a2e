#include "io/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>

#include "base/json.h"
#include "base/error.h"
#include "io/file.h"

namespace atto::io {

// Endianness: safetensors stores every number little-endian. The 8-byte header length is
// assembled and split byte by byte below (independent of the host); F16/BF16 elements likewise.
// F32 and F64 elements are copied with memcpy, which is only right on a little-endian host:
static_assert(std::endian::native == std::endian::little,
              "safetensors.cpp copies float data with memcpy and needs a little-endian host");

namespace {

using ojson = nlohmann::ordered_json;  // keeps the header's key order

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit

// ============================================================================================
// Little-endian integers and half-precision floats
// ============================================================================================
void put_u64_le(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
}

uint64_t get_u64_le(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint16_t get_u16_le(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

// IEEE 754 binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: man * 2^-24, exact in float32
    const float mag = std::ldexp(static_cast<float>(man), -24);
    return sign ? -mag : mag;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));  // inf / NaN
  return std::bit_cast<float>(sign | ((exp + (127 - 15)) << 23) | (man << 13));
}

// bfloat16 is the top half of a float32.
float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// ============================================================================================
// Validation helpers
// ============================================================================================
template <typename... Args>
[[noreturn]] void bad(const std::string& path, fmt::format_string<Args...> f, Args&&... args) {
  fail("'{}' is not a valid safetensors file: {}", path, fmt::format(f, std::forward<Args>(args)...));
}

// Returns the byte offset of the first invalid UTF-8 sequence, or npos if `s` is valid UTF-8
// (no overlong forms, no surrogates, nothing above U+10FFFF).
size_t first_invalid_utf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
      cp = c & 0x1fu;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      cp = c & 0x0fu;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      cp = c & 0x07u;
    } else
      return i;
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0u) != 0x80u) return i;
      cp = (cp << 6) | (d & 0x3fu);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return i;
    i += len;
  }
  return std::string_view::npos;
}

struct DtypeInfo {
  const char* name;
  uint64_t itemsize;
};
constexpr DtypeInfo kDtypes[] = {{"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F64", 8}};

struct Entry {
  std::string name;
  DtypeInfo dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

// A JSON value as a non-negative integer (nlohmann stores those as number_unsigned).
bool as_uint(const ojson& v, uint64_t& out) {
  if (!v.is_number_unsigned()) return false;
  out = v.get<uint64_t>();
  return true;
}

DtypeInfo parse_dtype(const std::string& path, const std::string& name, const ojson& e) {
  if (!e.contains("dtype") || !e["dtype"].is_string()) bad(path, "tensor '{}' has no \"dtype\" string", name);
  const std::string d = e["dtype"].get<std::string>();
  for (const DtypeInfo& info : kDtypes)
    if (d == info.name) return info;
  fail("'{}': tensor '{}' has dtype '{}', which atto cannot read (supported: F32, F16, BF16, F64)", path, name, d);
}

// Shape and element count; the count is checked for overflow.
Shape parse_shape(const std::string& path, const std::string& name, const ojson& e, uint64_t& numel) {
  if (!e.contains("shape") || !e["shape"].is_array()) bad(path, "tensor '{}' has no \"shape\" array", name);
  Shape shape;
  numel = 1;
  for (const ojson& d : e["shape"]) {
    uint64_t v = 0;
    if (!as_uint(d, v) || v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      bad(path, "tensor '{}' has shape {}: dimensions must be non-negative integers", name, e["shape"].dump());
    if (__builtin_mul_overflow(numel, v, &numel))
      bad(path, "tensor '{}' has shape {}, which has too many elements", name, e["shape"].dump());
    shape.push_back(static_cast<int64_t>(v));
  }
  return shape;
}

Entry parse_entry(const std::string& path, const std::string& name, const ojson& e, uint64_t data_size) {
  if (!e.is_object()) bad(path, "the header entry for tensor '{}' is not a JSON object", name);
  Entry out;
  out.name = name;
  out.dtype = parse_dtype(path, name, e);
  uint64_t numel = 0;
  out.shape = parse_shape(path, name, e, numel);
  const ojson* off = e.contains("data_offsets") ? &e["data_offsets"] : nullptr;
  if (!off || !off->is_array() || off->size() != 2 || !as_uint((*off)[0], out.begin) || !as_uint((*off)[1], out.end))
    bad(path, "tensor '{}' needs \"data_offsets\": [begin, end] with non-negative integers", name);
  if (out.begin > out.end || out.end > data_size)
    bad(path, "tensor '{}' has data_offsets [{}, {}] outside the data section of {} bytes{}", name, out.begin, out.end,
        data_size, out.end > data_size ? " (is the file truncated?)" : "");
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(numel, out.dtype.itemsize, &bytes) || out.end - out.begin != bytes)
    bad(path, "tensor '{}' ({} {}) needs {} bytes but data_offsets [{}, {}] span {}", name, out.dtype.name,
        e["shape"].dump(), numel * out.dtype.itemsize, out.begin, out.end, out.end - out.begin);
  return out;
}

// The tensors must tile [0, data_size) exactly: sorted by offset, each starts where the
// previous one ended. Returns the entries in that (file) order; ties keep header order.
std::vector<Entry> check_coverage(const std::string& path, std::vector<Entry> entries, uint64_t data_size) {
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t cursor = 0;
  const std::string* prev = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < cursor)
      bad(path, "tensors '{}' and '{}' overlap ('{}' begins at byte {}, before '{}' ends at {})", *prev, e.name, e.name,
          e.begin, *prev, cursor);
    if (e.begin > cursor)
      bad(path, "bytes [{}, {}) of the data section belong to no tensor (gap before '{}')", cursor, e.begin, e.name);
    cursor = e.end;
    prev = &e.name;
  }
  if (cursor != data_size) bad(path, "the data section has {} bytes but the tensors cover only {}", data_size, cursor);
  return entries;
}

// Parses the header, rejecting duplicate keys in any object (a JSON map would silently drop one).
ojson parse_header_json(const std::string& path, std::string_view text) {
  const size_t bad_at = first_invalid_utf8(text);
  if (bad_at != std::string_view::npos) bad(path, "the header is not valid UTF-8 (byte {} of the header)", bad_at);
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || text[first] != '{')
    bad(path, "the header is not a JSON object (it must start with '{{')");
  try {
    json_util::check_depth(text, fmt::format("{}: the header", path));
  } catch (const Error& e) {
    bad(path, "the header is nested too deeply ({} levels at most)", json_util::kMaxDepth);
  }
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  auto cb = [&](int, ojson::parse_event_t ev, ojson& parsed) {
    if (ev == ojson::parse_event_t::object_start) keys.emplace_back();
    if (ev == ojson::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    if (ev == ojson::parse_event_t::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second &&
        duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  ojson header;
  try {
    header = ojson::parse(text.begin(), text.end(), cb);
  } catch (const nlohmann::json::exception& e) {
    bad(path, "the header is not valid JSON: {}", e.what());
  }
  if (!duplicate.empty()) bad(path, "the header has the key '{}' twice", duplicate);
  if (!header.is_object()) bad(path, "the header is not a JSON object");
  return header;
}

std::map<std::string, std::string> parse_metadata(const std::string& path, const ojson& m) {
  if (!m.is_object()) bad(path, "\"__metadata__\" must be an object of strings");
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : m.items()) {
    if (!v.is_string()) bad(path, "\"__metadata__\" value for '{}' is {}, not a string", k, v.dump());
    out[k] = v.get<std::string>();
  }
  return out;
}

// Converts one tensor's bytes (little-endian, row-major) to a float32 tensor.
Tensor decode(const Entry& e, const unsigned char* src) {
  Tensor t = Tensor::empty(e.shape);
  float* out = t.data();
  const auto n = static_cast<size_t>(t.numel());
  const std::string d = e.dtype.name;
  if (d == "F32") {
    if (n) std::memcpy(out, src, n * 4);
  } else if (d == "F64") {
    for (size_t i = 0; i < n; ++i) {
      double v;
      std::memcpy(&v, src + 8 * i, 8);
      out[i] = static_cast<float>(v);
    }
  } else if (d == "F16") {
    for (size_t i = 0; i < n; ++i) out[i] = f16_to_f32(get_u16_le(src + 2 * i));
  } else {  // BF16
    for (size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(get_u16_le(src + 2 * i));
  }
  return t;
}

}  // namespace

// ============================================================================================
// Writing
// ============================================================================================
std::string serialize_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                  const std::map<std::string, std::string>& metadata, const std::string& what) {
  ojson header = ojson::object();
  if (!metadata.empty()) {
    ojson m = ojson::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    ATTO_CHECK(!name.empty(), "{}: a tensor has an empty name", what);
    ATTO_CHECK(name != "__metadata__", "{}: '__metadata__' is reserved, not a tensor name", what);
    ATTO_CHECK(seen.insert(name).second, "{}: the tensor name '{}' appears twice", what, name);
    ATTO_CHECK(t.defined(), "{}: tensor '{}' is undefined", what, name);
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * sizeof(float);
    header[name] = {{"dtype", "F32"}, {"shape", t.shape()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // a name or metadata that is not UTF-8
    fail("{}: cannot encode the header: {}", what, e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // pad to 8 bytes, as the reference does
  std::string out;
  out.reserve(8 + text.size() + offset);
  put_u64_le(out, text.size());
  out += text;
  for (const auto& [name, t] : tensors) {
    const Tensor c = t.contiguous();  // logical row-major order
    out.append(reinterpret_cast<const char*>(c.data()), static_cast<size_t>(c.numel()) * 4);
  }
  return out;
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, serialize_safetensors(tensors, metadata, "'" + path + "'"));
}

// ============================================================================================
// Reading
// ============================================================================================
namespace {

// The header length N from the first 8 bytes, checked against the limit and the file size.
uint64_t header_length(const std::string& path, const std::string& bytes, uint64_t size) {
  if (size < 8 || bytes.size() < 8)
    bad(path, "it has {} bytes, fewer than the 8-byte header length (truncated or empty?)", size);
  const uint64_t n = get_u64_le(reinterpret_cast<const unsigned char*>(bytes.data()));
  if (n > kMaxHeaderBytes)
    bad(path, "the header length {} is larger than the {} byte limit (not a safetensors file?)", n, kMaxHeaderBytes);
  if (n > size - 8)
    bad(path, "the header length is {} bytes but only {} bytes follow (the file is truncated)", n, size - 8);
  return n;
}

// Parses and validates the header text; fills metadata and returns the entries in file order.
std::vector<Entry> parse_header(const std::string& path, std::string_view text, uint64_t data_size,
                                std::map<std::string, std::string>& metadata) {
  const ojson header = parse_header_json(path, text);
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__")
      metadata = parse_metadata(path, value);
    else
      entries.push_back(parse_entry(path, key, value, data_size));
  }
  return check_coverage(path, std::move(entries), data_size);
}

}  // namespace

SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& path) {
  const uint64_t size = bytes.size();
  const uint64_t n = header_length(path, bytes, size);
  SafetensorsFile f;
  f.path = path;
  const std::vector<Entry> entries = parse_header(path, std::string_view(bytes).substr(8, n), size - 8 - n, f.metadata);
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data()) + 8 + n;
  for (const Entry& e : entries) {
    f.names.push_back(e.name);
    f.tensors.emplace(e.name, decode(e, data + e.begin));
  }
  return f;
}

SafetensorsHeader read_safetensors_header(const std::string& path) {
  uint64_t size = 0;
  const std::string first8 = read_file_prefix(path, 8, size);
  const uint64_t n = header_length(path, first8, size);
  const std::string head = read_file_prefix(path, 8 + n, size);
  if (head.size() < 8 + n) bad(path, "it became shorter while being read (is it being written?)");
  SafetensorsHeader h;
  h.path = path;
  for (const Entry& e : parse_header(path, std::string_view(head).substr(8, n), size - 8 - n, h.metadata)) {
    h.names.push_back(e.name);
    h.tensors.emplace(e.name, TensorInfo{e.dtype.name, e.shape, 8 + n + e.begin, e.end - e.begin});
  }
  return h;
}

Tensor read_safetensors_tensor(const SafetensorsHeader& h, const std::string& name) {
  const TensorInfo* t = h.find(name);
  ATTO_CHECK(t != nullptr, "tensor '{}' not found in '{}'", name, h.path);
  const auto d =
      std::find_if(std::begin(kDtypes), std::end(kDtypes), [&](const DtypeInfo& i) { return t->dtype == i.name; });
  ATTO_CHECK(d != std::end(kDtypes), "'{}': tensor '{}' has dtype '{}'", h.path, name, t->dtype);
  std::string buf(t->bytes, '\0');
  std::ifstream in(h.path, std::ios::binary);
  if (in) in.seekg(static_cast<std::streamoff>(t->offset));
  if (in) in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
  if (!in) bad(h.path, "tensor '{}' could not be read (the file became shorter since its header was read?)", name);
  return decode(Entry{name, *d, t->shape, 0, t->bytes}, reinterpret_cast<const unsigned char*>(buf.data()));
}

SafetensorsFile load_safetensors(const std::string& path) { return parse_safetensors(read_file(path), path); }

const Tensor& SafetensorsFile::get(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) {
    std::vector<std::string> some(names.begin(), names.begin() + std::min<size_t>(names.size(), 8));
    fail("tensor '{}' not found in '{}' (it has {} tensors: {}{})", name, path, names.size(), fmt::join(some, ", "),
         names.size() > some.size() ? ", ..." : "");
  }
  return it->second;
}

}  // namespace atto::io
