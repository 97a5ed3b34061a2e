#include "generate/generate.h"

#include <algorithm>
#include <cstring>

#include "autograd/tape.h"
#include "base/error.h"
#include "generate/stop_strings.h"

namespace atto::gen {

namespace {

// Puts a module in eval mode for a scope and restores its training flag afterwards.
class EvalModeGuard {
 public:
  explicit EvalModeGuard(nn::Module& m) : m_(m), was_training_(m.training()) { m_.eval(); }
  ~EvalModeGuard() { m_.train(was_training_); }
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  nn::Module& m_;
  bool was_training_;
};

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

// One batch of sequences decoded together (see the header for the policies).
class Decoder {
 public:
  Decoder(GPT& model, const GenerateOptions& opt, const SamplerChain& chain)
      : model_(model), opt_(opt), chain_(chain), V_(model.config().vocab_size), block_(model.config().block_size) {}

  // Encodes the prompts in one call; afterwards logits_ holds their next-token logits.
  void start(const std::vector<std::vector<int32_t>>& prompts) {
    const auto B = static_cast<int64_t>(prompts.size());
    const auto P = static_cast<int64_t>(prompts[0].size());
    std::vector<int32_t> ids;
    for (const auto& p : prompts) {
      seq_.push_back(p);
      hist_start_.push_back(!p.empty() && p[0] == opt_.stop_token ? 1 : 0);
      ids.insert(ids.end(), p.begin(), p.end());
    }
    live_.resize(B);
    for (int64_t b = 0; b < B; ++b) live_[b] = b;
    // Positions beyond P + max_new_tokens - 1 are never fed: a shorter cache saves memory and
    // never fills up before block_size (so feed's re-encode rule is unchanged).
    cache_ = model_.make_cache(B, opt_.max_new_tokens >= block_ - P ? block_ : P + opt_.max_new_tokens);
    set_logits(model_.forward_cached(ids, B, P, cache_), P);
  }

  // Samples one token for every live sequence; returns the cache rows that go on.
  std::vector<int64_t> step(std::vector<Sample>& out, Rng& rng) {
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
        out[b].stopped = true;
        continue;
      }
      seq_[b].push_back(tok);
      out[b].tokens.push_back(tok);
      if (opt_.on_token && !opt_.on_token(b, tok)) {
        out[b].stopped = true;
        continue;
      }
      keep.push_back(static_cast<int64_t>(r));
    }
    return keep;
  }

  // Feeds the newest token of each kept row: one position each, or a re-encode of the last
  // K tokens into a fresh cache when the cache is full.
  void feed(const std::vector<int64_t>& keep) {
    std::vector<int64_t> live;
    for (int64_t r : keep) live.push_back(live_[r]);
    live_ = std::move(live);
    const auto B = static_cast<int64_t>(live_.size());
    std::vector<int32_t> ids;
    if (cache_.len == block_) {
      const int64_t K = reencode_length(block_);
      for (int64_t b : live_) ids.insert(ids.end(), seq_[b].end() - K, seq_[b].end());
      cache_ = model_.make_cache(B, block_);
      set_logits(model_.forward_cached(ids, B, K, cache_), K);
      return;
    }
    if (keep.size() < static_cast<size_t>(logits_.size(0))) cache_ = select_rows(model_, cache_, keep);
    for (int64_t b : live_) ids.push_back(seq_[b].back());
    set_logits(model_.forward_cached(ids, B, 1, cache_), 1);
  }

 private:
  void set_logits(const Tensor& logits, int64_t Tn) {
    logits_ = logits.contiguous();  // [B, Tn, V]
    Tn_ = Tn;
    check_finite_logits(std::span<const float>(logits_.data(), logits_.numel()), "sampling");
  }

  GPT& model_;
  const GenerateOptions& opt_;
  const SamplerChain& chain_;
  int64_t V_, block_;
  std::vector<std::vector<int32_t>> seq_;  // per sequence: prompt + generated tokens
  std::vector<size_t> hist_start_;         // where the repetition-penalty history starts
  std::vector<int64_t> live_;              // the sequence of each cache row
  GPT::Cache cache_;
  Tensor logits_;
  int64_t Tn_ = 0;
};

void check_inputs(const GPT& model, const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& opt) {
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

}  // namespace

int64_t reencode_length(int64_t block_size) { return std::max<int64_t>(1, block_size / 2); }

std::vector<Sample> generate_batch(GPT& model, const std::vector<std::vector<int32_t>>& prompts,
                                   const GenerateOptions& opt, Rng& rng) {
  check_inputs(model, prompts, opt);
  const SamplerChain chain = SamplerChain::from_options(opt.sampler);
  std::vector<Sample> out(prompts.size());
  if (opt.max_new_tokens == 0) return out;
  NoGradGuard no_grad;
  EvalModeGuard eval_mode(model);
  for (size_t first = 0; first < prompts.size(); first += static_cast<size_t>(opt.max_batch)) {
    const size_t last = std::min(prompts.size(), first + static_cast<size_t>(opt.max_batch));
    const std::vector<std::vector<int32_t>> chunk(prompts.begin() + first, prompts.begin() + last);
    std::vector<Sample> chunk_out(chunk.size());
    GenerateOptions chunk_opt = opt;  // on_token and on_logits number the sequences among all the prompts
    if (opt.on_token) chunk_opt.on_token = [&opt, first](int64_t b, int32_t t) { return opt.on_token(first + b, t); };
    if (opt.on_logits)
      chunk_opt.on_logits = [&opt, first](int64_t b, std::span<const float> l) { opt.on_logits(first + b, l); };
    Decoder dec(model, chunk_opt, chain);
    dec.start(chunk);
    for (int64_t s = 0; s < opt.max_new_tokens; ++s) {
      const std::vector<int64_t> keep = dec.step(chunk_out, rng);
      if (keep.empty() || s + 1 == opt.max_new_tokens) break;
      dec.feed(keep);
    }
    std::move(chunk_out.begin(), chunk_out.end(), out.begin() + first);
  }
  return out;
}

void generate_chunks(GPT& model, const PromptSet& ps, int64_t n, const GenerateOptions& opt, Rng& rng,
                     const std::function<void(const SampleChunk&)>& emit) {
  ATTO_CHECK(n >= 0, "generate: the number of samples must be >= 0, got {}", n);
  ATTO_CHECK(opt.max_batch >= 1, "generate: max_batch must be >= 1, got {}", opt.max_batch);
  SampleChunk c;
  for (c.first = 0; c.first < n; c.first += opt.max_batch) {
    c.prompts = ps.draw(std::min(opt.max_batch, n - c.first), rng);
    GenerateOptions chunk_opt = opt;
    const int64_t first = c.first;
    if (opt.on_token) chunk_opt.on_token = [&opt, first](int64_t b, int32_t t) { return opt.on_token(first + b, t); };
    if (opt.on_logits)
      chunk_opt.on_logits = [&opt, first](int64_t b, std::span<const float> l) { opt.on_logits(first + b, l); };
    c.samples = generate_batch(model, c.prompts, chunk_opt, rng);
    emit(c);
  }
}

std::vector<Sample> generate(GPT& model, const std::vector<int32_t>& prompt, int64_t n, const GenerateOptions& opt,
                             Rng& rng) {
  ATTO_CHECK(n >= 1, "generate: the number of samples must be >= 1, got {}", n);
  return generate_batch(model, std::vector<std::vector<int32_t>>(n, prompt), opt, rng);
}

PromptSet make_prompt_set(const CharTokenizer& tok, std::string_view text, int64_t block_size) {
  ATTO_CHECK(block_size >= 1, "make_prompts: block size must be >= 1, got {}", block_size);
  ATTO_CHECK(tok.vocab_size() > 0, "make_prompts: the tokenizer is empty");
  PromptSet ps;
  ps.text = std::string(text);
  ps.base = tok.encode(text);  // throws naming unknown characters
  if (tok.has_boundary()) {
    ps.base.insert(ps.base.begin(), tok.boundary_id());
  } else if (ps.base.empty()) {
    const int32_t newline = tok.id_of(U'\n');
    if (newline < 0) {  // no newline to start from: a random token per sample
      ps.random_start_vocab = tok.vocab_size();
      return ps;
    }
    ps.base.push_back(newline);
  }
  if (static_cast<int64_t>(ps.base.size()) > block_size) {
    ps.cropped = static_cast<int64_t>(ps.base.size()) - block_size;
    ps.base.erase(ps.base.begin(), ps.base.begin() + ps.cropped);
  }
  return ps;
}

std::vector<std::vector<int32_t>> PromptSet::draw(int64_t count, Rng& rng) const {
  if (random_start_vocab == 0) return std::vector<std::vector<int32_t>>(static_cast<size_t>(count), base);
  std::vector<std::vector<int32_t>> out;
  for (int64_t i = 0; i < count; ++i)
    out.push_back({static_cast<int32_t>(rng.below(static_cast<uint64_t>(random_start_vocab)))});
  return out;
}

PromptSet make_prompts(const CharTokenizer& tok, std::string_view text, int64_t n, int64_t block_size, Rng& rng) {
  ATTO_CHECK(n >= 1, "make_prompts: the number of samples must be >= 1, got {}", n);
  PromptSet ps = make_prompt_set(tok, text, block_size);
  ps.prompts = ps.draw(n, rng);
  return ps;
}

std::vector<TextSample> generate_text(GPT& model, const CharTokenizer& tok, const PromptSet& ps, int64_t n,
                                      GenerateOptions opt, const std::vector<std::string>& stops, Rng& rng,
                                      const OnPiece& on_piece) {
  ATTO_CHECK(n >= 1, "generate: the number of samples must be >= 1, got {}", n);
  std::vector<StopStrings> cut(static_cast<size_t>(n), StopStrings(stops));
  std::vector<TextSample> out(static_cast<size_t>(n));
  std::vector<char> ended(static_cast<size_t>(n), 0);
  opt.on_token = [&](int64_t i, int32_t t) {
    const auto k = static_cast<size_t>(i);
    bool done = false;
    const std::string piece = cut[k].push(tok.decode({t}), done);
    out[k].text += piece;
    out[k].tokens++;
    out[k].stopped = done;
    ended[k] = !on_piece(i, piece, t, done) || done;
    return !ended[k];
  };
  generate_chunks(model, ps, n, opt, rng, [&](const SampleChunk& c) {
    for (size_t j = 0; j < c.samples.size(); ++j) {
      const size_t k = static_cast<size_t>(c.first) + j;
      if (c.samples[j].stopped && !ended[k]) out[k].stopped = true;  // the stop token
      if (ended[k]) continue;
      const std::string rest = cut[k].finish();  // no stop string ended it: release what was held back
      out[k].text += rest;
      if (!rest.empty()) on_piece(static_cast<int64_t>(k), rest, -1, false);
    }
  });
  return out;
}

}  // namespace atto::gen
