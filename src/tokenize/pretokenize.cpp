#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenize/pretokenize.h"

#include <pcre2.h>

#include <string>

#include "base/error.h"

namespace atto {

namespace {

// Unicode White_Space, as a class body (what \s means to tiktoken's regex).
constexpr const char* kSpace =
    R"(\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

std::string gpt2_pattern() {
  const std::string s = kSpace;
  return "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" + s + "\\p{L}\\p{N}]+|[" + s + "]+(?![^" + s + "])|[" + s +
         "]+";
}

}  // namespace

struct Gpt2Splitter::Impl {
  pcre2_code* code = nullptr;
  ~Impl() { pcre2_code_free(code); }
};

Gpt2Splitter::Gpt2Splitter() : impl_(std::make_unique<Impl>()) {
  const std::string pattern = gpt2_pattern();
  int err = 0;
  PCRE2_SIZE at = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &err, &at, nullptr);
  if (impl_->code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    throw Error(fmt::format("GPT-2 pre-tokenisation pattern: PCRE2 refuses it at offset {}: {}", at,
                            reinterpret_cast<const char*>(msg)));
  }
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);  // no JIT (e.g. no executable memory): interpreted
}

Gpt2Splitter::~Gpt2Splitter() = default;

const Gpt2Splitter& Gpt2Splitter::instance() {
  static const Gpt2Splitter s;
  return s;
}

void Gpt2Splitter::each(std::string_view text, const std::function<void(std::string_view)>& f) const {
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  ATTO_CHECK(md != nullptr, "GPT-2 pre-tokenisation: out of memory");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  try {
    while (pos < text.size()) {
      const int rc = pcre2_match(impl_->code, subject, text.size(), pos, 0, md, nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      ATTO_CHECK(rc > 0, "GPT-2 pre-tokenisation: PCRE2 match error {}", rc);
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      const size_t s = ov[0], e = ov[1];
      ATTO_CHECK(e > s, "GPT-2 pre-tokenisation: an empty match at byte {}", s);
      if (s > pos) f(text.substr(pos, s - pos));  // bytes that are not valid UTF-8
      f(text.substr(s, e - s));
      pos = e;
    }
    if (pos < text.size()) f(text.substr(pos));
  } catch (...) {
    pcre2_match_data_free(md);
    throw;
  }
  pcre2_match_data_free(md);
}

}  // namespace atto
