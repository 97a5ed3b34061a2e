#include "data/token_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/error.h"
#include "base/files.h"

namespace atto {

namespace {

constexpr char kMagic[8] = {'A', 'T', 'T', 'O', 'T', 'O', 'K', '\0'};
constexpr uint32_t kVersion = 1;

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

TokenFileWriter::TokenFileWriter(std::string path, int64_t vocab_size)
    : path_(std::move(path)), tmp_(path_ + ".tmp." + std::to_string(getpid())), vocab_(vocab_size) {
  ATTO_CHECK(vocab_size >= 1 && vocab_size <= (int64_t{1} << 31), "token file {}: vocabulary size {} is out of range",
             path_, vocab_size);
  width_ = vocab_size <= 65536 ? 2 : 4;
  f_ = std::fopen(tmp_.c_str(), "wb");
  ATTO_CHECK(f_ != nullptr, "token file {}: cannot write {}: {}", path_, tmp_, std::strerror(errno));
  uint8_t header[kTokenFileHeaderBytes] = {};  // completed by close()
  ATTO_CHECK(std::fwrite(header, 1, sizeof(header), f_) == sizeof(header), "token file {}: write failed: {}", path_,
             std::strerror(errno));
}

TokenFileWriter::~TokenFileWriter() {
  if (f_ != nullptr) {
    std::fclose(f_);
    std::remove(tmp_.c_str());
  }
}

void TokenFileWriter::append(std::span<const int32_t> ids) {
  ATTO_CHECK(f_ != nullptr, "token file {}: append after close", path_);
  if (ids.empty()) return;  // nothing to write (and fwrite must not see the empty buffer's null pointer)
  buf_.resize(ids.size() * static_cast<size_t>(width_));
  for (size_t i = 0; i < ids.size(); ++i) {
    ATTO_CHECK(ids[i] >= 0 && ids[i] < vocab_, "token file {}: id {} is outside the vocabulary of {}", path_, ids[i],
               vocab_);
    const auto v = static_cast<uint32_t>(ids[i]);
    uint8_t* p = buf_.data() + i * static_cast<size_t>(width_);
    p[0] = static_cast<uint8_t>(v);
    p[1] = static_cast<uint8_t>(v >> 8);
    if (width_ == 4) {
      p[2] = static_cast<uint8_t>(v >> 16);
      p[3] = static_cast<uint8_t>(v >> 24);
    }
  }
  ATTO_CHECK(std::fwrite(buf_.data(), 1, buf_.size(), f_) == buf_.size(),
             "token file {}: write failed ({}): is the disk full?", path_, std::strerror(errno));
  count_ += static_cast<int64_t>(ids.size());
}

void TokenFileWriter::close() {
  ATTO_CHECK(f_ != nullptr, "token file {}: closed twice", path_);
  uint8_t header[kTokenFileHeaderBytes] = {};
  std::memcpy(header, kMagic, 8);
  put_u32(header + 8, kVersion);
  put_u32(header + 12, static_cast<uint32_t>(width_));
  put_u64(header + 16, static_cast<uint64_t>(vocab_));
  put_u64(header + 24, static_cast<uint64_t>(count_));
  const bool ok = std::fseek(f_, 0, SEEK_SET) == 0 && std::fwrite(header, 1, sizeof(header), f_) == sizeof(header) &&
                  std::fflush(f_) == 0 && fsync(fileno(f_)) == 0;
  const int err = errno;
  std::fclose(f_);
  f_ = nullptr;
  if (!ok) {
    std::remove(tmp_.c_str());
    fail("token file {}: write failed ({}): is the disk full?", path_, std::strerror(err));
  }
  std::error_code ec;
  std::filesystem::rename(tmp_, path_, ec);
  if (ec) {
    std::remove(tmp_.c_str());
    fail("token file {}: cannot move it into place: {}", path_, ec.message());
  }
}

TokenFileReader::TokenFileReader(const std::string& path) : path_(path) {
  uint64_t size = 0;
  fd_ = files::open_regular(path, "token file", 0, size);  // never a FIFO or a device
  auto bad = [&](const std::string& why) {
    ::close(fd_);
    fd_ = -1;
    fail("token file {}: {}", path, why);
  };
  struct stat st {};
  if (fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) bad("not a regular file");
  const auto bytes = static_cast<uint64_t>(st.st_size);
  uint8_t h[kTokenFileHeaderBytes];
  if (bytes < kTokenFileHeaderBytes || ::pread(fd_, h, sizeof(h), 0) != static_cast<ssize_t>(sizeof(h)))
    bad(fmt::format("{} bytes, shorter than its 64-byte header (truncated, or not a token file)", bytes));
  if (std::memcmp(h, kMagic, 8) != 0) bad("not a token file (no ATTOTOK magic; make one with `atto data prepare`)");
  if (get_u32(h + 8) != kVersion) bad(fmt::format("version {}; this atto reads version {}", get_u32(h + 8), kVersion));
  width_ = static_cast<int>(get_u32(h + 12));
  if (width_ != 2 && width_ != 4) bad(fmt::format("{} bytes per token (2 or 4 expected)", width_));
  const uint64_t vocab = get_u64(h + 16), count = get_u64(h + 24);
  if (vocab == 0 || vocab > (uint64_t{1} << 31) || (width_ == 2 && vocab > 65536))
    bad(fmt::format("vocabulary size {} does not fit {}-byte tokens", vocab, width_));
  const uint64_t want = kTokenFileHeaderBytes + count * static_cast<uint64_t>(width_);
  if (count > (bytes - kTokenFileHeaderBytes) / static_cast<uint64_t>(width_) || want != bytes)
    bad(fmt::format("the header says {} tokens ({} bytes with the header) but the file has {} bytes{}", count, want,
                    bytes, bytes < want ? " (truncated)" : ""));
  vocab_ = static_cast<int64_t>(vocab);
  count_ = static_cast<int64_t>(count);
}

TokenFileReader::~TokenFileReader() {
  if (fd_ >= 0) ::close(fd_);
}

void TokenFileReader::read(int64_t i, int64_t n, int32_t* out) const {
  ATTO_CHECK(i >= 0 && n >= 0 && i + n <= count_, "token file {}: tokens [{}, {}) are outside its {}", path_, i, i + n,
             count_);
  thread_local std::vector<uint8_t> buf;
  buf.resize(static_cast<size_t>(n * width_));
  const auto at = static_cast<off_t>(kTokenFileHeaderBytes + static_cast<uint64_t>(i) * width_);
  size_t done = 0;
  while (done < buf.size()) {
    const ssize_t got = ::pread(fd_, buf.data() + done, buf.size() - done, at + static_cast<off_t>(done));
    ATTO_CHECK(got > 0, "token file {}: reading tokens [{}, {}) failed: {}", path_, i, i + n,
               got == 0 ? "the file got shorter" : std::strerror(errno));
    done += static_cast<size_t>(got);
  }
  for (int64_t k = 0; k < n; ++k) {
    const uint8_t* p = buf.data() + k * width_;
    const uint32_t v = width_ == 2 ? static_cast<uint32_t>(p[0] | (p[1] << 8)) : get_u32(p);
    ATTO_CHECK(v < static_cast<uint64_t>(vocab_), "token file {}: token {} is {}, outside the vocabulary of {}", path_,
               i + k, v, vocab_);
    out[k] = static_cast<int32_t>(v);
  }
}

}  // namespace atto
