// atto/generate/seq2seq_decode.h: greedy decoding and beam search for the encoder-decoder.
//
//   DecodeOptions opt;                      // beam 5, GNMT length penalty 0.6, 2 best
//   opt.beam = 5;
//   auto results = translate_batch(model, sources, opt);   // sources: token ids, no specials
//   results[i][0].tokens                     // the best translation of source i (no BOS/EOS)
//
// Beam search keeps `beam` (K) live hypotheses per source, all sources of a batch decoded together
// (rows = sources x beams) with the KV cache; the encoder output's keys and values are computed
// once per source. A hypothesis's score is its total log-probability divided by the GNMT length
// penalty lp(len) = ((5 + len) / 6)^alpha (len counts the EOS). The rule is that of fairseq's
// sequence generator, CTranslate2 and Hugging Face's BeamSearchScorer:
//   - each step ranks a source's candidates (live hypothesis x token) by log-probability and
//     looks at the top 2K. An EOS candidate ranked within the top K finishes its hypothesis; one
//     ranked lower is dropped. The best K non-EOS candidates are the next live set.
//   - a source keeps its K best finished hypotheses by score (a new one replaces the worst).
//   - a source stops when it holds K finished hypotheses and no live one can still beat the worst
//     of them. The bound is exact: log-probabilities only fall as tokens are added and lp grows
//     with length, so a live hypothesis with log-probability L (<= 0) can score at most
//     L / lp(length limit), L itself with alpha 0 (Hugging Face's early_stopping="never").
//   - at the length limit the live hypotheses are finished as they are (finished = false) and
//     compete with the others by score.
// The n-best list is sorted by score, best first. With a beam wide enough that no step's
// candidate falls outside it until the last step, the search is exhaustive.
// Length limit: max_len_a * source length + max_len_b target tokens (and the model's max_len).
// Greedy decoding is the argmax at every step (beam 1 gives the same tokens).
// Non-finite logits (NaN or Inf: broken weights) are an error, in greedy and beam decoding.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "models/seq2seq.h"

namespace atto::gen {

struct DecodeOptions {
  int64_t beam = 1;             // 1 = greedy
  float length_penalty = 0.6f;  // GNMT alpha; 0 = raw log-probability
  int64_t n_best = 1;           // hypotheses returned per source (<= beam)
  float max_len_a = 1.5f;       // target length limit = a * source length + b
  int64_t max_len_b = 10;
  bool keep_attention = false;  // record the cross-attention weights of the best hypothesis
  void validate() const;
};

struct Hypothesis {
  std::vector<int32_t> tokens;        // without BOS and EOS
  std::vector<float> token_logprobs;  // one per token, plus the EOS's last when finished
  double logprob = 0.0;               // total
  double score = 0.0;                 // logprob / lp(len)
  bool finished = false;              // ended with EOS (else cut at the length limit)
  // [n_layers][n_heads][target position][source position] cross-attention weights, when asked
  // (greedy decoding only records them; beam search re-runs the full decoder on the winner).
  std::vector<std::vector<std::vector<std::vector<float>>>> cross_attention;
};

// Decodes every source; returns, per source, n_best hypotheses sorted by score (best first).
// Sources are token ids without BOS/EOS; the special ids are the Tokenizer's (pad 0, bos 1,
// eos 2). Sources longer than the model's max_len are an error naming the source index.
std::vector<std::vector<Hypothesis>> translate_batch(Seq2Seq& model, const std::vector<std::vector<int32_t>>& sources,
                                                     const DecodeOptions& opt);

// Translates any number of sources batch_size at a time, the one policy of atto translate, atto
// eval and the trainer's validation BLEU: a source longer than the model's max_len is cut to its
// first max_len tokens (callers that warn check the length themselves); an empty source gets no
// hypotheses (nothing is decoded for it). on_batch(first, results) receives each batch's results
// (sources first, first + 1, ...) as soon as they are decoded: nothing is kept, for streaming.
void translate_chunks(Seq2Seq& model, const std::vector<std::vector<int32_t>>& sources, const DecodeOptions& opt,
                      int64_t batch_size,
                      const std::function<void(size_t first, std::vector<std::vector<Hypothesis>>& results)>& on_batch);
// translate_chunks, keeping every source's hypotheses.
std::vector<std::vector<Hypothesis>> translate_all(Seq2Seq& model, const std::vector<std::vector<int32_t>>& sources,
                                                   const DecodeOptions& opt, int64_t batch_size);

// The argmax decoder, kept separate as a reference for beam search (beam 1 must equal it).
std::vector<Hypothesis> greedy_decode(Seq2Seq& model, const std::vector<std::vector<int32_t>>& sources,
                                      const DecodeOptions& opt);

double gnmt_length_penalty(int64_t length, float alpha);

}  // namespace atto::gen
