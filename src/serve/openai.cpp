#include "serve/openai.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>

#include <fmt/format.h>

#include "base/json.h"

namespace atto::serve {

namespace {

using json = nlohmann::json;
using ::atto::json_util::excerpt;  // every value echoed into a message: at most 80 characters, escaped

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw RequestError(400, fmt::format("'{}': {}", param, message), param, "invalid_value");
}

[[noreturn]] void unknown_model(const json& m, const Limits& limits) {
  throw RequestError(404,
                     fmt::format("the model {} does not exist; this server serves '{}'", excerpt(m), limits.model_id),
                     "model", "model_not_found");
}

const json* field(const json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

int64_t integer(const json& body, const char* key, int64_t def, int64_t lo, int64_t hi) {
  const json* v = field(body, key);
  if (!v) return def;
  if (!v->is_number_integer()) bad(key, fmt::format("expected an integer, got {}", excerpt(*v)));
  const int64_t x =
      v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : v->get<int64_t>();
  if (x < lo || x > hi) bad(key, fmt::format("{} is outside [{}, {}]", x, lo, hi));
  return x;
}

double number(const json& body, const char* key, double def, double lo, double hi) {
  const json* v = field(body, key);
  if (!v) return def;
  if (!v->is_number()) bad(key, fmt::format("expected a number, got {}", excerpt(*v)));
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) bad(key, fmt::format("{} is outside [{}, {}]", x, lo, hi));
  return x;
}

bool boolean(const json& body, const char* key, bool def) {
  const json* v = field(body, key);
  if (!v) return def;
  if (!v->is_boolean()) bad(key, fmt::format("expected true or false, got {}", excerpt(*v)));
  return v->get<bool>();
}

std::vector<std::string> strings(const json& body, const char* key, size_t max_count) {
  const json* v = field(body, key);
  if (!v) return {};
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array()) bad(key, fmt::format("expected a string or a list of strings, got {}", excerpt(*v)));
  if (v->size() > max_count) bad(key, fmt::format("at most {} entries, got {}", max_count, v->size()));
  std::vector<std::string> out;
  for (const json& s : *v) {
    if (!s.is_string()) bad(key, fmt::format("expected strings, got {}", excerpt(s)));
    out.push_back(s.get<std::string>());
  }
  return out;
}

// One prompt given as token ids (or param's ids): a non-empty list of integers in [0, 2^31).
std::vector<int32_t> token_ids(const json& v, const char* param = "prompt") {
  if (!v.is_array()) bad(param, fmt::format("expected a list of token ids, got {}", excerpt(v)));
  if (v.empty()) bad(param, "an empty list of token ids");
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (const json& t : v) {
    // The parser keeps a literal >= 0 as unsigned; negatives, floats and the rest are refused.
    if (!t.is_number_unsigned() || t.get<uint64_t>() > static_cast<uint64_t>(INT32_MAX))
      bad(param, fmt::format("token ids are integers in [0, 2147483647], got {}", excerpt(t)));
    ids.push_back(static_cast<int32_t>(t.get<uint64_t>()));
  }
  return ids;
}

// "prompt" as token ids: one list of ids, or a list of at most max_count such lists.
std::vector<std::vector<int32_t>> token_prompts(const json& v, size_t max_count) {
  if (!v.front().is_array()) return {token_ids(v)};
  if (v.size() > max_count) bad("prompt", fmt::format("at most {} entries, got {}", max_count, v.size()));
  std::vector<std::vector<int32_t>> out;
  for (const json& p : v) out.push_back(token_ids(p));
  return out;
}

// OpenAI's logit_bias: {"<token id>": bias in [-100, 100], ...}. Keys naming the same id
// ("7", "007") keep the last; the ids are checked against the model by Engine::check_sampler.
std::vector<std::pair<int32_t, float>> logit_bias(const json& v) {
  if (!v.is_object())
    bad("logit_bias", fmt::format("expected an object mapping token ids to biases, got {}", excerpt(v)));
  std::map<int32_t, float> bias;
  for (const auto& [key, b] : v.items()) {
    const bool digits = !key.empty() && key.size() <= 10 &&
                        std::all_of(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    if (!digits || std::stoll(key) > INT32_MAX)
      bad("logit_bias", fmt::format("the key {} is not a token id (a decimal integer in [0, 2147483647])",
                                    excerpt(json(key))));
    const auto id = static_cast<int32_t>(std::stoll(key));
    if (!b.is_number()) bad("logit_bias", fmt::format("the bias of token {} must be a number, got {}", id, excerpt(b)));
    const double x = b.get<double>();
    if (!std::isfinite(x) || x < -100.0 || x > 100.0)
      bad("logit_bias", fmt::format("the bias of token {} is {}, outside [-100, 100]", id, x));
    bias[id] = static_cast<float>(x);
  }
  return {bias.begin(), bias.end()};
}

}  // namespace

json error_body(int status, const std::string& message, const std::string& param, const std::string& code) {
  const char* type = status == 401   ? "invalid_request_error"
                     : status == 429 ? "rate_limit_error"
                     : status >= 500 ? "server_error"
                                     : "invalid_request_error";
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json() : json(param)},
            {"code", code.empty() ? json() : json(code)}}}};
}

namespace {

// A message's content: a string, or (as OpenAI's API allows) a list of content parts
// {"type": "text", "text": ...}, joined with newlines (as llama.cpp's server does). Other parts
// (images, audio, files) are refused by name: a text model cannot read them.
std::string message_text(const json& m) {
  const json& c = m["content"];
  if (c.is_string()) return c.get<std::string>();
  std::string out;
  for (const json& part : c) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      throw RequestError(400, fmt::format("'messages': a content part needs a string type, got {}", excerpt(part)),
                         "messages", "invalid_value");
    if (part["type"].get<std::string>() != "text")
      throw RequestError(400,
                         fmt::format("'messages': content parts of type {} are not supported (this model reads "
                                     "text: send {{\"type\": \"text\", \"text\": ...}} parts or a string)",
                                     excerpt(part["type"])),
                         "messages", "invalid_value");
    if (!part.contains("text") || !part["text"].is_string())
      throw RequestError(400, fmt::format("'messages': a text part needs a string text, got {}", excerpt(part)),
                         "messages", "invalid_value");
    if (&part != &c.front()) out += '\n';
    out += part["text"].get<std::string>();
  }
  return out;
}

}  // namespace

std::string render_chat(const json& messages) {
  if (!messages.is_array() || messages.empty())
    throw RequestError(400, "'messages': expected a non-empty list of {role, content}", "messages", "invalid_value");
  std::string out;
  for (const json& m : messages) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !(m["content"].is_string() || (m["content"].is_array() && !m["content"].empty())))
      throw RequestError(400,
                         fmt::format("'messages': each message needs a string role and content (a string or a "
                                     "non-empty list of text parts), got {}",
                                     excerpt(m)),
                         "messages", "invalid_value");
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant")
      throw RequestError(400,
                         fmt::format("'messages': unknown role {} (system, user or assistant)", excerpt(m["role"])),
                         "messages", "invalid_value");
    out += (role == "system" ? "System: "
            : role == "user" ? "User: "
                             : "Assistant: ") +
           message_text(m) + "\n";
  }
  return out + "Assistant:";
}

TokenizeRequest parse_tokenize(const json& body) {
  if (!body.is_object()) throw RequestError(400, "the request body must be a JSON object", "", "invalid_json");
  const json* c = field(body, "content");
  if (!c || !c->is_string()) bad("content", "required: the text to tokenize (a string)");
  return {c->get<std::string>(), boolean(body, "add_special", false), boolean(body, "with_pieces", false)};
}

std::vector<int32_t> parse_detokenize(const json& body) {
  if (!body.is_object()) throw RequestError(400, "the request body must be a JSON object", "", "invalid_json");
  const json* t = field(body, "tokens");
  if (!t) bad("tokens", "required: a list of token ids");
  if (t->is_array() && t->empty()) return {};
  if (t->is_array() && t->size() > kMaxTokenizeIds)
    bad("tokens", fmt::format("at most {} ids a request, got {} (send them in parts)", kMaxTokenizeIds, t->size()));
  return token_ids(*t, "tokens");
}

Translation parse_translation(const json& body, const Limits& limits) {
  if (!body.is_object()) throw RequestError(400, "the request body must be a JSON object", "", "invalid_json");
  if (const json* m = field(body, "model"); m && (!m->is_string() || m->get<std::string>() != limits.model_id))
    unknown_model(*m, limits);
  Translation t;
  if (!field(body, "input")) bad("input", "required (a string or a list of strings)");
  t.sources = strings(body, "input", 256);
  t.decode.beam = integer(body, "beam", 5, 1, 16);
  t.decode.n_best = integer(body, "n_best", 1, 1, t.decode.beam);
  t.decode.length_penalty = static_cast<float>(number(body, "length_penalty", 0.6, 0.0, 10.0));
  t.decode.max_len_a = static_cast<float>(number(body, "max_len_a", 1.5, 0.0, 100.0));
  t.decode.max_len_b = integer(body, "max_len_b", 10, 0, 4096);
  return t;
}

namespace {

// Fields that ask for what this server does not do are refused by name (400, code
// "unsupported_value") rather than dropped, so that a client does not take a plain completion for
// what it asked: tool and function calls and a JSON response format (chat), text after the
// insertion point and best-of-N ranking (completions). Their neutral values pass (tools: [],
// tool_choice "none" or "auto", response_format {"type": "text"}, suffix "", best_of 1 or n), as
// do fields that change nothing here (user, parallel_tool_calls, store, metadata).
void refuse_unsupported(const json& body, bool chat, int64_t n) {
  const auto refuse = [](const char* key, const std::string& why) {
    throw RequestError(400, fmt::format("'{}': {}", key, why), key, "unsupported_value");
  };
  if (!chat) {
    if (const json* s = field(body, "suffix"); s && !(s->is_string() && s->get_ref<const std::string&>().empty()))
      refuse("suffix", "not supported: this server completes a prompt left to right (no text after the insertion point)");
    if (const json* b = field(body, "best_of")) {
      if (!b->is_number_integer()) bad("best_of", fmt::format("expected an integer, got {}", excerpt(*b)));
      if (*b != 1 && *b != n)
        refuse("best_of", fmt::format("{} is not supported: only 1 (or n); ask for several completions with n", excerpt(*b)));
    }
    return;
  }
  for (const char* key : {"tools", "functions"})
    if (const json* v = field(body, key); v && !(v->is_array() && v->empty()))
      refuse(key, "tool and function calls are not supported: this server's models answer in plain text");
  for (const char* key : {"tool_choice", "function_call"})
    if (const json* v = field(body, key); v && !(v->is_string() && (*v == "none" || *v == "auto")))
      refuse(key, fmt::format("{} is not supported: no tools can be called here (\"none\" or \"auto\")", excerpt(*v)));
  if (const json* rf = field(body, "response_format")) {
    const json* type = rf->is_object() ? field(*rf, "type") : nullptr;
    if (type == nullptr || !type->is_string())
      bad("response_format", fmt::format("expected {{\"type\": \"text\"}}, got {}", excerpt(*rf)));
    if (*type != "text")
      refuse("response_format",
             fmt::format("type {} is not supported: only \"text\" (no JSON mode or schema)", excerpt(*type)));
  }
}

// The prompts of a completion (c.prompts or c.prompt_ids) or a chat (its messages rendered).
void read_prompts(const json& body, bool chat, Completion& c) {
  if (chat) {
    if (!field(body, "messages")) bad("messages", "required");
    c.prompts = {render_chat(body["messages"])};
  } else {
    const json* p = field(body, "prompt");
    if (!p) bad("prompt", "required (a string or a list of strings)");
    if (p->is_array() && !p->empty() && (p->front().is_number() || p->front().is_array())) {
      c.prompt_ids = token_prompts(*p, 64);
    } else {
      c.prompts = strings(body, "prompt", 64);
      if (c.prompts.empty()) bad("prompt", "an empty list");
    }
  }
}

}  // namespace

Completion parse_completion(const json& body, const Limits& limits, bool chat) {
  if (!body.is_object()) throw RequestError(400, "the request body must be a JSON object", "", "invalid_json");
  Completion c;
  c.chat = chat;
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) bad("model", "expected a string");
    if (m->get<std::string>() != limits.model_id) unknown_model(*m, limits);
  }
  read_prompts(body, chat, c);
  const char* max_key = chat && field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  c.max_tokens = integer(body, max_key, limits.default_max_tokens, 0, limits.max_tokens_cap);
  c.n = integer(body, "n", 1, 1, limits.max_n);
  refuse_unsupported(body, chat, c.n);
  const double temperature = number(body, "temperature", 1.0, 0.0, 100.0);
  c.sampler.greedy = temperature == 0.0;
  c.sampler.temperature = temperature == 0.0 ? 1.0f : static_cast<float>(temperature);
  c.sampler.top_p = static_cast<float>(number(body, "top_p", 1.0, 0.0, 1.0));
  if (c.sampler.top_p == 0.0f) bad("top_p", "must be > 0");
  c.sampler.top_k = static_cast<int>(integer(body, "top_k", 0, 0, 1 << 20));
  c.sampler.min_p = static_cast<float>(number(body, "min_p", 0.0, 0.0, 1.0));
  c.sampler.repetition_penalty = static_cast<float>(number(body, "repeat_penalty", 1.0, 0.01, 100.0));
  c.sampler.frequency_penalty = static_cast<float>(number(body, "frequency_penalty", 0.0, -2.0, 2.0));
  c.sampler.presence_penalty = static_cast<float>(number(body, "presence_penalty", 0.0, -2.0, 2.0));
  if (const json* lb = field(body, "logit_bias")) c.sampler.logit_bias = logit_bias(*lb);
  if (const json* s = field(body, "seed")) {
    if (!s->is_number_integer()) bad("seed", fmt::format("expected an integer, got {}", excerpt(*s)));
    c.seed = s->is_number_unsigned() ? s->get<uint64_t>() : static_cast<uint64_t>(s->get<int64_t>());
  }
  c.stop = strings(body, "stop", 4);
  for (const std::string& s : c.stop)
    if (s.empty()) bad("stop", "a stop string must not be empty");
  if (chat) {
    if (boolean(body, "logprobs", false)) c.logprobs = integer(body, "top_logprobs", 0, 0, 20);
  } else {
    c.logprobs = integer(body, "logprobs", -1, 0, 5);
    c.echo = boolean(body, "echo", false);
  }
  c.stream = boolean(body, "stream", false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) bad("stream_options", "expected an object");
    c.include_usage = boolean(*so, "include_usage", false);
  }
  try {
    c.sampler.validate(gen::SamplerOptions::Names::Fields);
  } catch (const std::exception& e) {
    throw RequestError(400, e.what(), "", "invalid_value");
  }
  return c;
}

}  // namespace atto::serve
