// atto/serve/openai.h: the OpenAI API's request and response shapes for `atto serve`
// (docs/serve.md): requests parsed and validated into a Completion, errors that name the field.
//
//   Completion c = parse_completion(json::parse(body), limits, /*chat=*/false);   // RequestError
//   ... generate ...
//   json reply = completion_response(c, choices, usage, "atto", created);
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "generate/sampler.h"
#include "generate/seq2seq_decode.h"

namespace atto::serve {

// An HTTP error with OpenAI's body {"error": {"message", "type", "param", "code"}}.
struct RequestError : std::runtime_error {
  RequestError(int status, std::string message, std::string param = "", std::string code = "")
      : std::runtime_error(message), status(status), param(std::move(param)), code(std::move(code)) {}
  int status;
  std::string param, code;
};
nlohmann::json error_body(int status, const std::string& message, const std::string& param = "",
                          const std::string& code = "");

struct Limits {
  int64_t max_tokens_cap = 4096;  // the most tokens one choice may ask for
  int64_t default_max_tokens = 16;
  int64_t max_n = 16;    // choices per prompt
  std::string model_id;  // the one model served
};

struct Completion {
  bool chat = false;
  std::vector<std::string> prompts;  // chat: one, the rendered messages
  // Completions given token ids (a list of ids, or a list of such lists, as OpenAI's API allows):
  // one list per prompt, and `prompts` empty. The ids are checked against the model by
  // Engine::prepare_ids.
  std::vector<std::vector<int32_t>> prompt_ids;
  int64_t max_tokens = 16;
  int64_t n = 1;
  gen::SamplerOptions sampler;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  int64_t logprobs = -1;  // completions: top alternatives per token (0..5); chat: top_logprobs; -1 = none
  bool echo = false;
  bool stream = false;
  bool include_usage = false;
};

// Validates every field it uses (a wrong type, a value out of range, an unknown model); fields
// it does not know are ignored, as OpenAI's clients send more than a server needs.
Completion parse_completion(const nlohmann::json& body, const Limits& limits, bool chat);

// POST /v1/translations (atto's own route for seq2seq models): {"input": a string or a list of
// sources, "beam" (1-16, default 5), "n_best" (1-beam), "length_penalty", "max_len_a",
// "max_len_b"}.
struct Translation {
  std::vector<std::string> sources;
  gen::DecodeOptions decode;
};
Translation parse_translation(const nlohmann::json& body, const Limits& limits);

// POST /tokenize and /detokenize (llama.cpp server's routes): {"content": text, "add_special":
// false, "with_pieces": false} -> {"tokens": [ids]} (with_pieces: [{"id", "piece"}]);
// {"tokens": [ids]} -> {"content": text}.
// The most ids one /tokenize answer (or /detokenize request) holds, and with pieces: answers
// stay tens of MB whatever --body-limit allows.
constexpr size_t kMaxTokenizeIds = size_t{1} << 20;
constexpr size_t kMaxTokenizePieces = size_t{1} << 16;
struct TokenizeRequest {
  std::string content;
  bool add_special = false;  // the boundary token first, as a sequence starts (lines mode)
  bool with_pieces = false;
};
TokenizeRequest parse_tokenize(const nlohmann::json& body);
std::vector<int32_t> parse_detokenize(const nlohmann::json& body);

// The plain chat template (docs/serve.md): "System: ...\n", "User: ...\n", "Assistant: ...\n" per
// message, then "Assistant:" for the model to continue. A content given as a list of text parts
// is their texts joined with newlines; other part types are refused (RequestError 400).
std::string render_chat(const nlohmann::json& messages);

}  // namespace atto::serve
