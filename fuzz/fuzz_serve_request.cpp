// The request bodies `atto serve` accepts (serve/openai.h): /v1/completions,
// /v1/chat/completions (messages rendered by the chat template), /v1/translations, /tokenize and
// /detokenize. A rejected request is an ApiError (the server's 400 with OpenAI's error body).
#include "base/json.h"
#include "common.h"
#include "serve/openai.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The same parse as the server's (base/json.h: depth-limited, errors named).
  nlohmann::json body;
  try {
    body = atto::json_util::parse(atto::fuzz::bytes(data, size), "the request body");
  } catch (const atto::Error&) {
    return 0;
  }
  const atto::serve::Limits limits{.model_id = "atto"};
  auto api = [](auto&& f) {
    try {
      atto::fuzz::expect_errors(f);
    } catch (const atto::serve::RequestError& e) {
      (void)atto::serve::error_body(e.status, e.what(), e.param, e.code).dump();
    }
  };
  api([&] { (void)atto::serve::parse_completion(body, limits, /*chat=*/false); });
  api([&] { (void)atto::serve::parse_completion(body, limits, /*chat=*/true); });
  api([&] { (void)atto::serve::parse_translation(body, limits); });
  api([&] { (void)atto::serve::parse_tokenize(body); });
  api([&] { (void)atto::serve::parse_detokenize(body); });
  return 0;
}
