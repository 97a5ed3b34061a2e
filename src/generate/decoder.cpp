#include "generate/decoder.h"

#include <algorithm>
#include <cstring>

#include "autograd/tape.h"
#include "base/error.h"

namespace atto::gen {

namespace {

// A cache holding only the given rows of `c` (in that order), for a smaller batch.
GPT::Cache select_rows(const GPT& model, const GPT::Cache& c, const std::vector<int64_t>& rows) {
  GPT::Cache out = model.make_cache(static_cast<int64_t>(rows.size()), c.max_len);
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const Tensor& src = c.layers[i].kv;  // [B, max_len, 2C]
    Tensor& dst = out.layers[i].kv;
    ATTO_CHECK(src.is_contiguous() && dst.is_contiguous(), "generate: KV cache tensors must be contiguous");
    const int64_t row = src.size(1) * src.size(2), used = c.layers[i].len * src.size(2);
    for (size_t r = 0; r < rows.size(); ++r)
      std::memcpy(dst.data() + static_cast<int64_t>(r) * row, src.data() + rows[r] * row, used * sizeof(float));
    out.layers[i].len = c.layers[i].len;
  }
  out.len = c.len;
  return out;
}

}  // namespace

void check_prompts(const GPT& model, const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& opt) {
  const GPTConfig& cfg = model.config();
  ATTO_CHECK(opt.max_new_tokens >= 0, "generate: max_new_tokens must be >= 0, got {}", opt.max_new_tokens);
  ATTO_CHECK(opt.max_batch >= 1, "generate: max_batch must be >= 1, got {}", opt.max_batch);
  ATTO_CHECK(opt.stop_token >= -1 && opt.stop_token < cfg.vocab_size,
             "generate: stop token {} is outside [-1, vocab size {})", opt.stop_token, cfg.vocab_size);
  const size_t P = prompts.empty() ? 0 : prompts[0].size();
  for (size_t i = 0; i < prompts.size(); ++i) {
    ATTO_CHECK(!prompts[i].empty(), "generate: prompt {} is empty (a sample needs at least one token to start from)",
               i);
    ATTO_CHECK(prompts[i].size() == P,
               "generate: prompts of one batch must have one length: prompt {} has {} "
               "tokens, prompt 0 has {}",
               i, prompts[i].size(), P);
    for (int32_t t : prompts[i])
      ATTO_CHECK(t >= 0 && t < cfg.vocab_size, "generate: prompt {} holds token {} outside [0, {})", i, t,
                 cfg.vocab_size);
  }
  ATTO_CHECK(static_cast<int64_t>(P) <= cfg.block_size,
             "generate: prompts of {} tokens exceed the block size {} (keep the last block_size tokens)", P,
             cfg.block_size);
}

Decoder::Decoder(GPT& model, GenerateOptions opt)
    : model_(model),
      opt_(std::move(opt)),
      chain_(SamplerChain::from_options(opt_.sampler)),
      V_(model.config().vocab_size),
      block_(model.config().block_size) {}

void Decoder::start(const std::vector<std::vector<int32_t>>& prompts) {
  check_prompts(model_, prompts, opt_);
  ATTO_CHECK(!prompts.empty() && seq_.empty(), "generate: a decoder starts once, with at least one prompt");
  const auto B = static_cast<int64_t>(prompts.size());
  const auto P = static_cast<int64_t>(prompts[0].size());
  std::vector<int32_t> ids;
  for (const auto& p : prompts) {
    seq_.push_back(p);
    hist_start_.push_back(p[0] == opt_.stop_token ? 1 : 0);
    ids.insert(ids.end(), p.begin(), p.end());
  }
  out_.resize(static_cast<size_t>(B));
  live_.resize(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) live_[b] = b;
  keep_ = live_;  // until the first step: every row
  // Positions beyond P + max_new_tokens - 1 are never fed: a shorter cache saves memory and
  // never fills up before block_size (so the re-encode rule is unchanged).
  cache_ = model_.make_cache(B, opt_.max_new_tokens >= block_ - P ? block_ : P + opt_.max_new_tokens);
  set_logits(model_.forward_cached(ids, B, P, cache_), P);
}

void Decoder::step(Rng& rng) {
  ATTO_CHECK(!seq_.empty(), "generate: Decoder::step before start");
  std::vector<int64_t> keep;
  std::vector<float> row(V_);
  for (size_t r = 0; r < live_.size(); ++r) {
    const int64_t b = live_[r];
    const float* src = logits_.data() + (static_cast<int64_t>(r) * Tn_ + Tn_ - 1) * V_;  // [r, Tn-1, :]
    std::copy(src, src + V_, row.begin());
    if (opt_.on_logits) opt_.on_logits(b, row);
    const std::span<const int32_t> history = std::span<const int32_t>(seq_[b]).subspan(hist_start_[b]);
    const int32_t tok = chain_.sample(row, history, rng);
    if (tok == opt_.stop_token) {
      out_[b].stopped = true;
      continue;
    }
    seq_[b].push_back(tok);
    out_[b].tokens.push_back(tok);
    if (opt_.on_token && !opt_.on_token(b, tok)) {
      out_[b].stopped = true;
      continue;
    }
    keep.push_back(static_cast<int64_t>(r));
  }
  keep_ = std::move(keep);
  steps_++;
}

bool Decoder::prepare_feed() {
  const bool shrinks = keep_.size() < live_.size();
  std::vector<int64_t> live;
  for (int64_t r : keep_) live.push_back(live_[r]);
  live_ = std::move(live);
  if (cache_.len == block_) {
    const auto B = static_cast<int64_t>(live_.size());
    const int64_t K = reencode_length(block_);
    std::vector<int32_t> ids;
    for (int64_t b : live_) ids.insert(ids.end(), seq_[b].end() - K, seq_[b].end());
    cache_ = model_.make_cache(B, block_);
    set_logits(model_.forward_cached(ids, B, K, cache_), K);
    return false;
  }
  if (shrinks) cache_ = select_rows(model_, cache_, keep_);
  return true;
}

void Decoder::set_logits(const Tensor& logits, int64_t Tn) {
  logits_ = logits.contiguous();  // [B, Tn, V]
  Tn_ = Tn;
  check_finite_logits(std::span<const float>(logits_.data(), logits_.numel()), "sampling");
}

void feed(GPT& model, std::span<Decoder* const> decoders) {
  std::vector<Decoder*> stepping;
  std::vector<GPT::Cache*> caches;
  std::vector<int32_t> ids;
  for (Decoder* d : decoders) {
    ATTO_CHECK(!d->done(), "generate: feed of a decoder that is done");
    if (!d->prepare_feed()) continue;  // re-encoded on its own
    stepping.push_back(d);
    caches.push_back(&d->cache_);
    for (int64_t b : d->live_) ids.push_back(d->seq_[b].back());
  }
  if (stepping.empty()) return;
  const Tensor logits = model.forward_step(ids, caches);  // [R, 1, V]
  if (stepping.size() == 1) {
    stepping[0]->set_logits(logits, 1);
    return;
  }
  int64_t r0 = 0;
  for (Decoder* d : stepping) {
    const auto rows = static_cast<int64_t>(d->live_.size());
    d->set_logits(slice(logits, 0, r0, r0 + rows), 1);
    r0 += rows;
  }
}

}  // namespace atto::gen
