// atto/base/files.h: the one rule for every file atto reads, in one place.
//
//   std::string text = atto::files::read("run/config.json", atto::files::kJsonCap, "run config");
//   int fd = atto::files::open_regular("data/train.bin", "token file");   // for mmap or windows
//
// - Only a regular file is read: a directory, a FIFO (which blocks until a writer comes), a
//   device such as /dev/zero (which never ends) or a socket is refused with a message naming the
//   file, checked with stat *before* open (so that a FIFO never blocks) and again with fstat.
// - Its size is checked against a stated cap before anything is read; the message names the
//   file, its size, the cap and what the file was read as.
// - A read never returns more than the cap, even when the file grows while it is read.
// An explicit stream (stdin, "-") is the caller's business: it reads with read_stream and a cap.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace atto::files {

// Caps for the kinds of files atto reads whole (bytes). A weights or token file is never read
// whole; it is opened with open_regular and read in pieces.
inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr uint64_t kJsonCap = 64 * kMiB;         // config.json, --config, request-like JSON
inline constexpr uint64_t kTokenizerCap = 512 * kMiB;   // tokenizer.json, encoder.json, vocab.bpe, spm.model
inline constexpr uint64_t kSecretCap = 64 * 1024;       // an API-key file
inline constexpr uint64_t kMetricsCap = 1024 * kMiB;    // a run's metrics.jsonl
inline constexpr uint64_t kTextCap = uint64_t{16} << 30;  // a text corpus read whole (16 GiB)
inline constexpr uint64_t kStdinCap = uint64_t{1} << 30;  // text piped to a command (1 GiB)

// "a FIFO (named pipe)", "a character device", ... for a st_mode that is not a regular file.
const char* special_kind(unsigned mode);

// Opens `path` read-only after the checks above (a regular file, at most `cap` bytes; cap 0 =
// no size cap); returns the fd (O_CLOEXEC) and sets `size`. `what` says what the file is
// ("tokenizer file", "--api-key-file"): it starts each message.
int open_regular(const std::string& path, std::string_view what, uint64_t cap, uint64_t& size);

// The whole file, with open_regular's checks; at most `cap` bytes (the message names the cap).
std::string read(const std::string& path, uint64_t cap, std::string_view what);

// Its first n bytes (fewer when shorter), with the checks but no size cap; sets file_size.
std::string read_prefix(const std::string& path, size_t n, uint64_t& file_size, std::string_view what);

// Bytes [offset, offset + n) of the file, with open_regular's checks (a weights file's tensor, read
// when it is needed); an atto::Error naming the file when it ends before offset + n (it changed
// since atto first read it).
std::string read_range(const std::string& path, uint64_t offset, uint64_t n, std::string_view what);
// The same into out[0, n).
void read_range_into(char* out, const std::string& path, uint64_t offset, uint64_t n, std::string_view what);

// Reads a stream (stdin) to its end, refusing more than `cap` bytes; `what` names it.
std::string read_stream(std::FILE* f, uint64_t cap, std::string_view what);

// "1.5 GiB", "12 MiB", "300 bytes": a size for messages.
std::string human_bytes(uint64_t n);

}  // namespace atto::files
