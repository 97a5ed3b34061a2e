// atto/tokenize/pretokenize.h: GPT-2's pre-tokenisation, the split of text into the chunks that
// byte-level BPE encodes one at a time (merges never cross a chunk boundary).
//
//   atto::Gpt2Splitter split;
//   split.each("Hello world's  end\n", [](std::string_view chunk) { ... });
//   // "Hello", " world", "'s", " ", " end", "\n"
//
// The pattern is GPT-2's, as tiktoken's `gpt2` encoding runs it:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// compiled with PCRE2 (UTF, JIT). \s is spelled out as Unicode's White_Space property (what
// tiktoken's Rust regex means by \s: U+0009-000D, U+0020, U+0085, U+00A0, U+1680, U+2000-200A,
// U+2028, U+2029, U+202F, U+205F, U+3000), not left to PCRE2's own definition of \s.
// Bytes that are not valid UTF-8 never match; each run of them between matches becomes a chunk
// of its own, so every byte of the input lands in exactly one chunk, in order (byte-level BPE
// then encodes any input and decodes it back to the same bytes).
// Thread-safe: the compiled pattern is shared, match data is per call.
#pragma once

#include <functional>
#include <memory>
#include <string_view>

namespace atto {

class Gpt2Splitter {
 public:
  Gpt2Splitter();
  ~Gpt2Splitter();
  Gpt2Splitter(const Gpt2Splitter&) = delete;
  Gpt2Splitter& operator=(const Gpt2Splitter&) = delete;
  // Calls f with every chunk of text, in order; the chunks concatenate to text.
  void each(std::string_view text, const std::function<void(std::string_view)>& f) const;
  static const Gpt2Splitter& instance();  // one shared compiled pattern

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace atto
