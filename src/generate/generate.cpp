#include "generate/generate.h"

#include <algorithm>

#include "autograd/tape.h"
#include "base/error.h"
#include "generate/decoder.h"

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

}  // namespace

int64_t reencode_length(int64_t block_size) { return std::max<int64_t>(1, block_size / 2); }

std::vector<Sample> generate_batch(GPT& model, const std::vector<std::vector<int32_t>>& prompts,
                                   const GenerateOptions& opt, Rng& rng) {
  check_prompts(model, prompts, opt);
  const SamplerChain chain = SamplerChain::from_options(opt.sampler);  // bad options throw before any work
  std::vector<Sample> out(prompts.size());
  if (opt.max_new_tokens == 0) return out;
  NoGradGuard no_grad;
  EvalModeGuard eval_mode(model);
  for (size_t first = 0; first < prompts.size(); first += static_cast<size_t>(opt.max_batch)) {
    const size_t last = std::min(prompts.size(), first + static_cast<size_t>(opt.max_batch));
    const std::vector<std::vector<int32_t>> chunk(prompts.begin() + first, prompts.begin() + last);
    GenerateOptions chunk_opt = opt;  // on_token and on_logits number the sequences among all the prompts
    if (opt.on_token) chunk_opt.on_token = [&opt, first](int64_t b, int32_t t) { return opt.on_token(first + b, t); };
    if (opt.on_logits)
      chunk_opt.on_logits = [&opt, first](int64_t b, std::span<const float> l) { opt.on_logits(first + b, l); };
    Decoder dec(model, std::move(chunk_opt));
    dec.start(chunk);
    for (;;) {
      dec.step(rng);
      if (dec.done()) break;
      Decoder* one[] = {&dec};
      feed(model, one);
    }
    std::vector<Sample> chunk_out = dec.take_samples();
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

PromptSet make_prompt_set(const GptTokenizer& tok, std::string_view text, int64_t block_size) {
  ATTO_CHECK(block_size >= 1, "make_prompts: block size must be >= 1, got {}", block_size);
  ATTO_CHECK(tok.vocab_size() > 0, "make_prompts: the tokenizer is empty");
  PromptSet ps;
  ps.text = std::string(text);
  ps.base = tok.encode(text);  // throws naming unknown characters
  if (tok.has_boundary()) {
    ps.base.insert(ps.base.begin(), tok.boundary_id());
  } else if (ps.base.empty()) {
    const int32_t newline = tok.single_token("\n");
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

PromptSet make_prompts(const GptTokenizer& tok, std::string_view text, int64_t n, int64_t block_size, Rng& rng) {
  ATTO_CHECK(n >= 1, "make_prompts: the number of samples must be >= 1, got {}", n);
  PromptSet ps = make_prompt_set(tok, text, block_size);
  ps.prompts = ps.draw(n, rng);
  return ps;
}

TextStream::TextStream(const GptTokenizer& tok, int64_t n, const std::vector<std::string>& stops, OnPiece on_piece)
    : tok_(tok),
      cut_(static_cast<size_t>(n), StopStrings(stops)),
      tail_(static_cast<size_t>(n)),
      out_(static_cast<size_t>(n)),
      ended_(static_cast<size_t>(n), 0),
      on_piece_(std::move(on_piece)) {}

namespace {

// Bytes of s up to an unfinished UTF-8 sequence at its end (a lead byte and fewer continuation
// bytes than it announces); all of s when it ends on a whole character or on invalid bytes.
size_t complete_utf8(std::string_view s) {
  for (size_t back = 1; back <= std::min<size_t>(3, s.size()); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 1;
    return need > back ? s.size() - back : s.size();
  }
  return s.size();
}

}  // namespace

bool TextStream::on_token(int64_t i, int32_t t) {
  const auto k = static_cast<size_t>(i);
  bool done = false;
  std::string piece = tail_[k] + cut_[k].push(tok_.decode({t}), done);
  const size_t whole = done ? piece.size() : complete_utf8(piece);
  tail_[k] = piece.substr(whole);
  piece.resize(whole);
  out_[k].text += piece;
  out_[k].tokens++;
  out_[k].stopped = done;
  ended_[k] = !on_piece_(i, piece, t, done) || done;
  return !ended_[k];
}

void TextStream::finish(int64_t i, const Sample& s) {
  const auto k = static_cast<size_t>(i);
  if (s.stopped && !ended_[k]) out_[k].stopped = true;  // the stop token
  if (ended_[k]) return;
  ended_[k] = 1;
  const std::string rest = tail_[k] + cut_[k].finish();  // no stop string ended it: release what was held back
  out_[k].text += rest;
  if (!rest.empty()) on_piece_(i, rest, -1, false);
}

std::vector<TextSample> generate_text(GPT& model, const GptTokenizer& tok, const PromptSet& ps, int64_t n,
                                      GenerateOptions opt, const std::vector<std::string>& stops, Rng& rng,
                                      const OnPiece& on_piece) {
  ATTO_CHECK(n >= 1, "generate: the number of samples must be >= 1, got {}", n);
  TextStream text(tok, n, stops, on_piece);
  opt.on_token = [&text](int64_t i, int32_t t) { return text.on_token(i, t); };
  generate_chunks(model, ps, n, opt, rng, [&](const SampleChunk& c) {
    for (size_t j = 0; j < c.samples.size(); ++j) text.finish(c.first + static_cast<int64_t>(j), c.samples[j]);
  });
  return text.take();
}

}  // namespace atto::gen
