// atto/data/token_file.h: binary token files (`atto data prepare` writes them, training reads
// random windows of them), for corpora larger than memory.
//
//   atto::TokenFileWriter w("data/train.bin", 50257);   // ids of a vocabulary of 50,257
//   w.append(ids);                                       // as many times as needed
//   w.close();                                           // header completed, file renamed into place
//   atto::TokenFileReader t("data/train.bin");              // the header checked; no token read yet
//   t.read(123, 65, window);                             // one pread per window
//
// Layout (little-endian): a 64-byte header, then the tokens.
//   0  magic   "ATTOTOK\0"
//   8  u32     version (1)
//   12 u32     bytes per token: 2 (uint16, vocabulary <= 65,536) or 4 (uint32)
//   16 u64     vocabulary size (every token is below it)
//   24 u64     token count
//   32 32 bytes reserved (zero)
// The reader checks the magic, version, token width, that the vocabulary fits the width, and
// that the file holds exactly header + count * width bytes (a truncated or extended file is
// named as such); ids are checked against the vocabulary as they are read into a batch.
// The writer writes to "<path>.tmp.<pid>" and renames it over <path> on close(): a crash leaves
// the previous file, never a partial one.
// Reading is pread(), not mmap(): mapped, each random window's page fault mapped the 64 KB
// around it (the kernel's fault-around), and 100 training steps on a 1 GB corpus left 550 MB of
// file pages counted in the process's resident memory; with pread the page cache does the
// caching and the process stays at the size it has for a 1 MB corpus.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace atto {

inline constexpr uint64_t kTokenFileHeaderBytes = 64;

class TokenFileWriter {
 public:
  TokenFileWriter(std::string path, int64_t vocab_size);
  ~TokenFileWriter();  // without close(): the temporary file is removed
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;
  void append(std::span<const int32_t> ids);
  void close();
  int64_t count() const { return count_; }
  int bytes_per_token() const { return width_; }

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  int64_t vocab_ = 0, count_ = 0;
  int width_ = 4;
  std::vector<uint8_t> buf_;
};

class TokenFileReader {
 public:
  explicit TokenFileReader(const std::string& path);
  ~TokenFileReader();
  TokenFileReader(const TokenFileReader&) = delete;
  TokenFileReader& operator=(const TokenFileReader&) = delete;
  int64_t size() const { return count_; }
  int64_t vocab_size() const { return vocab_; }
  int bytes_per_token() const { return width_; }
  // Tokens [i, i + n) into out; atto::Error naming the file for an id outside the vocabulary.
  void read(int64_t i, int64_t n, int32_t* out) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  int64_t count_ = 0, vocab_ = 0;
  int width_ = 4;
};

}  // namespace atto
