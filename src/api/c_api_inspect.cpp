// atto/api/c_api_inspect.cpp: the C API's inspection section (include/atto/atto.h,
// "Inspection"): one traced forward pass of a GPT on a text, the numbers `atto inspect` draws
// (src/viz/collect.cpp: GPT::Trace, nn::BlockTrace), as float arrays: every layer's attention
// weights and the residual stream (the embeddings, then each block's output).
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api/c_api_internal.h"
#include "autograd/tape.h"
#include "kernels/kernels.h"

struct atto_inspection {
  std::vector<int32_t> ids;       // [T] the model input
  int64_t n_layers = 0, n_heads = 0, d_model = 0;
  std::vector<float> attention;   // [n_layers, n_heads, T, T]
  std::vector<float> residual;    // [n_layers + 1, T, d_model]
};

namespace {

using namespace atto;
using namespace atto::capi;

// The model input for `text`, as atto inspect makes it (viz::encode_input): in lines mode the
// <eos> that starts a line, then the text's tokens. A text longer than the block size is an
// error here (atto inspect keeps its last block_size tokens).
std::vector<int32_t> inspect_input(const LoadedModel& lm, std::string_view text) {
  const GptTokenizer& tok = *lm.tokenizer;
  std::vector<int32_t> ids;
  if (tok.has_boundary()) ids.push_back(tok.boundary_id());
  try {
    const std::vector<int32_t> body = tok.encode(text);
    ids.insert(ids.end(), body.begin(), body.end());
  } catch (const Error& e) {
    fail_with(ATTO_ERR_BAD_INPUT, fmt::format("atto_inspect: the text: {}", e.what()));
  }
  if (ids.empty())
    fail_with(ATTO_ERR_INVALID_ARGUMENT,
              "atto_inspect: the text is empty: a stream-mode model needs at least one token to look at");
  const int64_t block = lm.model->config().block_size;
  if (static_cast<int64_t>(ids.size()) > block)
    fail_with(ATTO_ERR_INVALID_ARGUMENT,
              fmt::format("atto_inspect: the text is {} tokens{}, more than the model's block size of {}",
                          ids.size(), tok.has_boundary() ? " with the <eos> that starts it" : "", block));
  return ids;
}

void append(std::vector<float>& out, const Tensor& t) {
  const std::vector<float> v = t.contiguous().to_vector();
  out.insert(out.end(), v.begin(), v.end());
}

// The residual stream of a traced pass: the embeddings, the input of blocks 1 .. L-1 (the output
// of the block before), then the last block's output: the input of ln_f, which is
// (input + attention update) + FFN update for a pre-norm block, the same two additions the block
// made; a post-norm GPT has no ln_f and its last block's output is final_hidden.
void residual_stream(const GPT& model, const GPT::Trace& trace, std::vector<float>& out) {
  append(out, trace.embeddings);
  for (size_t l = 1; l < trace.blocks.size(); ++l) append(out, trace.blocks[l].input);
  if (!model.transformer.ln_f) {
    append(out, trace.final_hidden);
    return;
  }
  const nn::BlockTrace& last = trace.blocks.back();
  const std::vector<float> x = last.input.contiguous().to_vector();
  const std::vector<float> a = last.attn_update.contiguous().to_vector();
  const std::vector<float> f = last.ffn_update.contiguous().to_vector();
  ATTO_CHECK(x.size() == a.size() && x.size() == f.size(), "atto_inspect: the last block's trace has {}, {} and {} values",
             x.size(), a.size(), f.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float h = x[i] + a[i];
    out.push_back(h + f[i]);
  }
}

}  // namespace

extern "C" {

atto_status atto_inspect(atto_context* c, const char* text, size_t text_len, atto_inspection** out) {
  if (out) *out = nullptr;
  return guarded([&] {
    need(c, "the context");
    need(out, "out");
    if (!text && text_len > 0) fail_with(ATTO_ERR_INVALID_ARGUMENT, "atto_inspect: the text is NULL");
    if (!c->model->gpt)
      fail_with(ATTO_ERR_INVALID_ARGUMENT,
                "atto_inspect: this model is an encoder-decoder (seq2seq); atto_inspect runs a GPT "
                "(`atto inspect --src` shows a seq2seq model)");
    const LoadedModel& lm = *c->model->gpt;
    GPT& model = *lm.model;
    auto r = std::make_unique<atto_inspection>();
    r->ids = inspect_input(lm, text ? std::string_view(text, text_len) : std::string_view());
    const GPTConfig& cfg = model.config();
    r->n_layers = cfg.n_layers, r->n_heads = cfg.n_heads, r->d_model = cfg.d_model;
    const auto T = static_cast<int64_t>(r->ids.size());
    kernels::ThreadScope threads(c->threads);
    NoGradGuard no_grad;
    GPT::Trace trace;
    model.forward(r->ids, 1, T, &trace);
    ATTO_CHECK(static_cast<int64_t>(trace.blocks.size()) == cfg.n_layers, "atto_inspect: {} traced blocks for {} layers",
               trace.blocks.size(), cfg.n_layers);
    for (const nn::BlockTrace& b : trace.blocks) append(r->attention, b.attn_weights);  // [1, NH, T, T] each
    residual_stream(model, trace, r->residual);
    ATTO_CHECK(r->attention.size() == static_cast<size_t>(cfg.n_layers * cfg.n_heads * T * T) &&
                   r->residual.size() == static_cast<size_t>((cfg.n_layers + 1) * T * cfg.d_model),
               "atto_inspect: the trace has {} attention and {} residual values for T={}", r->attention.size(),
               r->residual.size(), T);
    *out = r.release();
  });
}

size_t atto_inspection_n_tokens(const atto_inspection* x) { return x ? x->ids.size() : 0; }

const int32_t* atto_inspection_tokens(const atto_inspection* x) { return x ? x->ids.data() : nullptr; }

const float* atto_inspection_attention(const atto_inspection* x, int64_t shape[4]) {
  if (!x) return nullptr;
  const auto T = static_cast<int64_t>(x->ids.size());
  if (shape) shape[0] = x->n_layers, shape[1] = x->n_heads, shape[2] = T, shape[3] = T;
  return x->attention.data();
}

const float* atto_inspection_residual(const atto_inspection* x, int64_t shape[3]) {
  if (!x) return nullptr;
  if (shape) shape[0] = x->n_layers + 1, shape[1] = static_cast<int64_t>(x->ids.size()), shape[2] = x->d_model;
  return x->residual.data();
}

void atto_inspection_free(atto_inspection* x) { delete x; }

}  // extern "C"
