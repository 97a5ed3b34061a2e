// Gathering what the seq2seq report shows: the source, the (greedy or forced) target, one traced
// encode + decode.
#include <cmath>

#include <fmt/format.h>

#include "autograd/tape.h"
#include "base/error.h"
#include "generate/sampler.h"
#include "generate/seq2seq_decode.h"
#include "viz/report_parts.h"
#include "viz/seq2seq_report.h"

namespace atto::viz {

namespace {

// [1, NH, R, K] weights -> NH matrices [R, K].
std::vector<Matrix> heads_of(const Tensor& w) {
  const std::vector<float> d = w.contiguous().to_vector();
  const int64_t NH = w.size(1), R = w.size(2), K = w.size(3);
  std::vector<Matrix> heads;
  for (int64_t h = 0; h < NH; ++h)
    heads.emplace_back(R, K, std::vector<float>(d.begin() + h * R * K, d.begin() + (h + 1) * R * K));
  return heads;
}

Matrix square_matrix(const Tensor& t) { return Matrix(t.size(0), t.size(1), t.contiguous().to_vector()); }

std::vector<int32_t> encode_flag(const Tokenizer& tok, const std::string& text, const char* flag) {
  try {
    return tok.encode(text);
  } catch (const Error& e) {
    fail("{}: {}", flag, e.what());
  }
}

}  // namespace

std::string token_label(const Tokenizer& tok, int32_t id) {
  std::string s = tok.id_to_string(id);
  return s == " " ? "\u2423" : s;
}

namespace {

// The target to inspect: --tgt forced, else the greedy translation; cut to fit max_len.
std::vector<int32_t> target_tokens(Seq2Seq& model, const Tokenizer& tgt_tok, const std::optional<std::string>& tgt,
                                   Seq2SeqView& v) {
  const int64_t max_len = model.config().max_len;
  std::vector<int32_t> target;
  if (tgt) {
    target = encode_flag(tgt_tok, *tgt, "--tgt");
    v.forced = true;
  } else {
    gen::DecodeOptions o;
    o.beam = 1;
    const gen::Hypothesis h = gen::translate_batch(model, {v.src_ids}, o)[0][0];
    target = h.tokens;
    v.finished = h.finished;
  }
  if (static_cast<int64_t>(target.size()) > max_len - 1) {  // <bos> takes one position
    v.tgt_dropped = static_cast<int64_t>(target.size()) - (max_len - 1);
    target.resize(static_cast<size_t>(max_len - 1));
  }
  return target;
}

}  // namespace

Seq2SeqView collect_seq2seq(Seq2Seq& model, const Tokenizer& src_tok, const Tokenizer& tgt_tok, const std::string& src,
                            const std::optional<std::string>& tgt) {
  const Seq2SeqConfig& cfg = model.config();
  ATTO_CHECK(src_tok.vocab_size() == cfg.src_vocab && tgt_tok.vocab_size() == cfg.tgt_vocab,
             "inspect: the tokenizers have {} / {} tokens but the model expects {} / {}", src_tok.vocab_size(),
             tgt_tok.vocab_size(), cfg.src_vocab, cfg.tgt_vocab);
  Seq2SeqView v;
  v.config = cfg;
  v.src_text = src;
  v.src_ids = encode_flag(src_tok, src, "--src");
  if (v.src_ids.empty()) throw UsageError("--src is empty: give the source sentence to translate");
  if (static_cast<int64_t>(v.src_ids.size()) > cfg.max_len) {
    v.src_dropped = static_cast<int64_t>(v.src_ids.size()) - cfg.max_len;
    v.src_ids.resize(static_cast<size_t>(cfg.max_len));
  }
  const bool was_training = model.training();
  model.eval();
  NoGradGuard no_grad;
  const std::vector<int32_t> target = target_tokens(model, tgt_tok, tgt, v);
  v.translation = tgt_tok.decode(target);
  v.tgt_ids = {tgt_tok.bos_id()};
  v.tgt_ids.insert(v.tgt_ids.end(), target.begin(), target.end());
  for (int32_t id : v.src_ids) v.src_tokens.push_back(token_label(src_tok, id));
  for (int32_t id : v.tgt_ids) v.tgt_tokens.push_back(token_label(tgt_tok, id));

  const auto S = static_cast<int64_t>(v.src_ids.size()), T = static_cast<int64_t>(v.tgt_ids.size());
  std::vector<nn::BlockTrace> enc, dec;
  nn::BlockRecorder enc_recorder(enc), dec_recorder(dec);
  const Tensor memory = model.encode(v.src_ids, 1, S, {}, &enc_recorder);                           // [1, S, C]
  const Tensor logits = model.decode(v.tgt_ids, 1, T, memory, {}, {}, &dec_recorder).contiguous();  // [1, T, V]
  model.train(was_training);
  gen::check_finite_logits(std::span<const float>(logits.data(), logits.numel()), "inspecting");
  for (const nn::BlockTrace& b : enc) {
    v.enc_attention.push_back(heads_of(b.attn_weights));
    v.enc_residual.push_back(
        {detail::row_norms(b.input), detail::row_norms(b.attn_update), {}, detail::row_norms(b.ffn_update)});
  }
  for (const nn::BlockTrace& b : dec) {
    v.dec_attention.push_back(heads_of(b.attn_weights));
    v.cross_attention.push_back(heads_of(b.cross_weights));
    v.dec_residual.push_back({detail::row_norms(b.input), detail::row_norms(b.attn_update),
                              detail::row_norms(b.cross_update), detail::row_norms(b.ffn_update)});
  }
  const Seq2Seq::Stack& e = model.encoder;
  v.positions = square_matrix(e.embed_positions ? e.embed_positions->weight : e.pe->table());
  v.src_embed = square_matrix(model.encoder.embed_tokens.weight);
  v.tgt_embed = square_matrix(model.decoder.embed_tokens.weight);
  for (int32_t id = 0; id < cfg.src_vocab; ++id) v.src_vocab.push_back(token_label(src_tok, id));
  for (int32_t id = 0; id < cfg.tgt_vocab; ++id) v.tgt_vocab.push_back(token_label(tgt_tok, id));
  v.last_logits.assign(logits.data() + (T - 1) * cfg.tgt_vocab, logits.data() + T * cfg.tgt_vocab);
  return v;
}

}  // namespace atto::viz
