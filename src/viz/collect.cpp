// Gathering what the report shows: the input, one traced forward pass, the training metrics.
#include <algorithm>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "autograd/tape.h"
#include "base/error.h"
#include "base/files.h"
#include "base/json.h"
#include "generate/sampler.h"
#include "viz/report.h"
#include "viz/report_parts.h"

namespace atto::viz {

void InspectOptions::validate() const {
  gen::SamplerOptions s;
  s.temperature = temperature, s.top_k = top_k, s.top_p = top_p;
  s.validate();  // names --temperature / --top-k / --top-p
  if (max_attention_tokens < 1)
    throw UsageError(fmt::format("--max-attention-tokens must be at least 1, got {}", max_attention_tokens));
  if (max_pe_positions < 2 || max_pe_dims < 2 || top_n < 1)
    throw UsageError(fmt::format("inspect: the position caps must be >= 2 and top_n >= 1 (got {}, {}, {})",
                                 max_pe_positions, max_pe_dims, top_n));
}

std::string token_label(const GptTokenizer& tok, int32_t id) {
  std::string s = tok.id_to_string(id);
  return s == " " ? "\u2423" : s;
}

std::vector<int32_t> encode_input(const GptTokenizer& tok, const std::string& text, int64_t block_size,
                                  int64_t* dropped) {
  std::vector<int32_t> ids;
  if (tok.has_boundary()) ids.push_back(tok.boundary_id());
  std::vector<int32_t> body;
  try {
    body = tok.encode(text);
  } catch (const Error& e) {
    fail("--text: {}", e.what());
  }
  ids.insert(ids.end(), body.begin(), body.end());
  if (ids.empty()) throw UsageError("--text is empty: a stream-mode model needs at least one character to look at");
  const int64_t cut = std::max<int64_t>(0, static_cast<int64_t>(ids.size()) - block_size);
  ids.erase(ids.begin(), ids.begin() + cut);
  if (dropped) *dropped = cut;
  return ids;
}

namespace {

Matrix to_matrix(const Tensor& t, int64_t rows, int64_t cols) { return Matrix(rows, cols, t.contiguous().to_vector()); }

}  // namespace

// L2 norm of each position of a [1, T, C] tensor.
std::vector<double> detail::row_norms(const Tensor& t) {
  const std::vector<float> v = t.contiguous().to_vector();
  const int64_t C = t.size(-1), T = t.numel() / C;
  std::vector<double> out(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) {
    double s = 0.0;
    for (int64_t c = 0; c < C; ++c)
      s += static_cast<double>(v[static_cast<size_t>(i * C + c)]) * v[static_cast<size_t>(i * C + c)];
    out[static_cast<size_t>(i)] = std::sqrt(s);
  }
  return out;
}

ModelView collect(GPT& model, const GptTokenizer& tok, const std::string& text) {
  const GPTConfig& cfg = model.config();
  ATTO_CHECK(tok.vocab_size() == cfg.vocab_size, "inspect: the tokenizer has {} tokens but the model expects {}",
             tok.vocab_size(), cfg.vocab_size);
  ModelView v;
  v.config = cfg;
  v.ids = encode_input(tok, text, cfg.block_size, &v.dropped);
  for (int32_t id : v.ids) v.tokens.push_back(token_label(tok, id));
  const int64_t T = static_cast<int64_t>(v.ids.size()), C = cfg.d_model, NH = cfg.n_heads, V = cfg.vocab_size;

  const bool was_training = model.training();
  model.eval();
  NoGradGuard no_grad;
  GPT::Trace trace;
  const Tensor logits = model.forward(v.ids, 1, T, &trace).contiguous();  // [1, T, V]
  model.train(was_training);
  gen::check_finite_logits(std::span<const float>(logits.data(), logits.numel()), "inspecting");

  for (const nn::BlockTrace& b : trace.blocks) {
    const std::vector<float> w = b.attn_weights.contiguous().to_vector();  // [1, NH, T, T]
    std::vector<Matrix> heads;
    for (int64_t h = 0; h < NH; ++h)
      heads.emplace_back(T, T, std::vector<float>(w.begin() + h * T * T, w.begin() + (h + 1) * T * T));
    v.attention.push_back(std::move(heads));
    v.residual.push_back(
        {detail::row_norms(b.input), detail::row_norms(b.attn_update), detail::row_norms(b.ffn_update)});
  }
  if (cfg.pos != PosKind::Rope) {  // rotary positions have no table to show
    const Tensor& table = cfg.pos == PosKind::Learned ? model.transformer.wpe->weight : model.transformer.pe->table();
    v.positions = to_matrix(table, cfg.block_size, C);
  }
  v.wte = to_matrix(model.transformer.wte.weight, V, C);
  for (int32_t id = 0; id < V; ++id) v.vocab.push_back(token_label(tok, id));
  v.last_logits.assign(logits.data() + (T - 1) * V, logits.data() + T * V);
  return v;
}

TrainingCurves read_metrics(const std::string& path, std::vector<std::string>& notes) {
  TrainingCurves c;
  std::string text;
  try {  // a regular file of at most kMetricsCap bytes (never a FIFO or /dev/zero)
    text = files::read(path, files::kMetricsCap, "metrics.jsonl");
  } catch (const Error& e) {
    notes.push_back(fmt::format("no training curves: {}", e.what()));
    return c;
  }
  int64_t n = 0, skipped = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const nlohmann::json j = json_util::parse_or_discard(line);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number()) {
      if (++skipped <= 3) notes.push_back(fmt::format("{} line {} is not a metrics record; skipped", path, n));
      continue;
    }
    const double step = j["step"].get<double>();
    auto num = [&](const char* key, std::vector<double>& xs, std::vector<double>& ys) {
      if (j.contains(key) && j[key].is_number()) xs.push_back(step), ys.push_back(j[key].get<double>());
    };
    num("train_loss", c.train_step, c.train_loss);
    num("val_loss", c.val_step, c.val_loss);
    num("lr", c.lr_step, c.lr);
    num("val_bleu", c.val_bleu_step, c.val_bleu);
  }
  if (skipped > 3) notes.push_back(fmt::format("{}: {} malformed lines skipped in all", path, skipped));
  return c;
}

}  // namespace atto::viz
