#include "data/prepare.h"

#include <omp.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/hash.h"
#include "io/file.h"
#include "data/text_file.h"
#include "data/token_file.h"

namespace atto {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Where the documents of `text` end (each end is one past a document's last byte). Paragraphs
// end after a run of >= 2 newlines; with lines, after each newline. `final` ends the last one.
std::vector<size_t> document_ends(std::string_view text, bool lines, bool final) {
  std::vector<size_t> ends;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n') continue;
    if (lines) {
      ends.push_back(i + 1);
      continue;
    }
    size_t j = i;
    while (j < text.size() && text[j] == '\n') ++j;
    if (j - i >= 2 && j < text.size()) ends.push_back(j);  // a run is whole only when text follows it
    i = j - 1;
  }
  if (final && (ends.empty() || ends.back() != text.size()) && !text.empty()) ends.push_back(text.size());
  return ends;
}

struct Encoded {
  std::vector<int32_t> train, val;
  int64_t documents = 0, val_documents = 0;
};

// One chunk's documents, numbered from `first`.
Encoded encode_chunk(const GptTokenizer& tok, std::string_view chunk, const std::vector<size_t>& ends, int64_t first,
                     const PrepareOptions& opt) {
  Encoded e;
  const auto cut = static_cast<uint64_t>(opt.val_fraction * 18446744073709551615.0);
  size_t begin = 0;
  for (size_t k = 0; k < ends.size(); ++k) {
    const bool val = opt.val_fraction > 0 && splitmix64(opt.seed + static_cast<uint64_t>(first) + k) < cut;
    std::vector<int32_t>& out = val ? e.val : e.train;
    const std::vector<int32_t> ids = tok.encode(chunk.substr(begin, ends[k] - begin));
    out.insert(out.end(), ids.begin(), ids.end());
    if (tok.has_boundary()) out.push_back(tok.boundary_id());
    begin = ends[k];
    e.documents++;
    e.val_documents += val ? 1 : 0;
  }
  return e;
}

// Reads a file in chunks that end at document ends; f(chunk, ends) for each.
template <class F>
void each_chunk(const std::string& path, const PrepareOptions& opt, int64_t& bytes, F&& f) {
  check_user_file(path, "--input");
  std::ifstream in(path, std::ios::binary);
  ATTO_CHECK(in.good(), "--input file '{}': cannot read it", path);
  std::string carry, block(static_cast<size_t>(opt.chunk_bytes), '\0');
  for (;;) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    const auto got = static_cast<size_t>(in.gcount());
    bytes += static_cast<int64_t>(got);
    carry.append(block.data(), got);
    const bool eof = got < block.size();
    std::vector<size_t> ends = document_ends(carry, opt.lines_are_documents, eof);
    if (ends.empty() && static_cast<int64_t>(carry.size()) >= opt.max_document_bytes) ends.push_back(carry.size());
    if (!ends.empty()) {
      const size_t used = ends.back();
      f(std::string_view(carry).substr(0, used), ends);
      carry.erase(0, used);
    }
    if (eof) break;
  }
}

// DIR/tokenizer.json and DIR/meta.json (what was prepared, and a fingerprint for --resume).
void write_meta(const GptTokenizer& tok, const PrepareOptions& opt, const PrepareStats& st) {
  const auto path = [&](const char* name) { return (std::filesystem::path(opt.out) / name).string(); };
  const nlohmann::json tj = tok.to_json();
  nlohmann::json meta = {{"format", "atto-prepared-corpus"},
                         {"version", 1},
                         {"inputs", opt.inputs},
                         {"bytes", st.bytes},
                         {"documents", st.documents},
                         {"val_documents", st.val_documents},
                         {"train_tokens", st.train_tokens},
                         {"val_tokens", st.val_tokens},
                         {"val_fraction", opt.val_fraction},
                         {"seed", opt.seed},
                         {"documents_are", opt.lines_are_documents ? "lines" : "paragraphs"}};
  const std::string prepared = meta.dump() + tj.dump();  // what was prepared and with which tokenizer
  meta["fingerprint"] = fmt::format("{:016x}", fnv1a64(prepared.data(), prepared.size()));
  tok.write_files(opt.out);
  io::write_file_atomic(path("tokenizer.json"), tj.dump() + "\n");
  io::write_json_atomic(path("meta.json"), meta);
}

// Creates --out and checks that every file this writes can be written as a file: before hours of
// encoding, not after.
void make_out_dir(const std::string& out) {
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  ATTO_CHECK(!ec && std::filesystem::is_directory(out), "--out '{}': cannot create the folder: {}", out,
             ec ? ec.message() : "a file of that name is in the way");
  for (const char* name : {"train.bin", "val.bin", "meta.json", "tokenizer.json"})
    ATTO_CHECK(!std::filesystem::is_directory(std::filesystem::path(out) / name),
               "--out '{}': {} is a directory; remove it or pick another --out", out, name);
}

}  // namespace

PrepareStats prepare_corpus(const GptTokenizer& tok, const PrepareOptions& opt) {
  ATTO_CHECK(!opt.inputs.empty(), "data prepare: no --input files");
  ATTO_CHECK(opt.val_fraction >= 0 && opt.val_fraction < 1, "--val-fraction must be in [0, 1), got {}",
             opt.val_fraction);
  ATTO_CHECK(opt.chunk_bytes >= 1024, "--chunk-bytes must be at least 1024");
  const auto t0 = std::chrono::steady_clock::now();
  make_out_dir(opt.out);
  const auto path = [&](const char* name) { return (std::filesystem::path(opt.out) / name).string(); };
  TokenFileWriter train(path("train.bin"), tok.vocab_size()), val(path("val.bin"), tok.vocab_size());
  PrepareStats st;
  const int threads = std::max(1, omp_get_max_threads());
  std::vector<std::string> batch;  // chunks encoded together, one per thread
  std::vector<std::vector<size_t>> batch_ends;
  auto flush = [&] {
    std::vector<Encoded> enc(batch.size());
    std::vector<int64_t> first(batch.size());  // each chunk's first document number
    int64_t next = st.documents;
    for (size_t c = 0; c < batch.size(); ++c) {
      first[c] = next;
      next += static_cast<int64_t>(batch_ends[c].size());
    }
    std::vector<std::exception_ptr> errors(batch.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (size_t c = 0; c < batch.size(); ++c) {
      try {
        enc[c] = encode_chunk(tok, batch[c], batch_ends[c], first[c], opt);
      } catch (...) {
        errors[c] = std::current_exception();
      }
    }
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
    for (const Encoded& e : enc) {
      train.append(e.train);
      val.append(e.val);
      st.documents += e.documents;
      st.val_documents += e.val_documents;
    }
    batch.clear();
    batch_ends.clear();
  };
  for (const std::string& input : opt.inputs) {
    each_chunk(input, opt, st.bytes, [&](std::string_view chunk, const std::vector<size_t>& ends) {
      batch.emplace_back(chunk);
      batch_ends.push_back(ends);
      if (static_cast<int>(batch.size()) == threads) flush();
    });
  }
  flush();
  st.train_tokens = train.count();
  st.val_tokens = val.count();
  ATTO_CHECK(st.train_tokens >= 2, "data prepare: the inputs gave {} training tokens; nothing to train on",
             st.train_tokens);
  train.close();
  val.close();
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  write_meta(tok, opt, st);
  return st;
}

}  // namespace atto
