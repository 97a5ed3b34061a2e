// atto/data/seq2seq_batches.h: batches of sentence pairs for the encoder-decoder.
//
//   std::vector<EncodedPair> pairs = encode_pairs(corpus, src_tok, tgt_tok);   // data/parallel.h
//   auto batches = bucket_batches(pairs, {.max_tokens = 4096});   // similar lengths together
//   Seq2SeqBatch b = make_batch(pairs, batches[i]);
//   // b.src [B, S] (+ src_mask), b.tgt_in = [BOS, y...] and b.tgt_out = [y..., EOS] [B, T]
//
// Batching by token count (as fairseq's --max-tokens and Marian's mini-batch-words): pairs are
// sorted by length (source, then target, then their index, so the order is deterministic),
// and cut into consecutive groups whose padded size B * max(S, T) stays within max_tokens
// (and B within max_sentences). Length-sorted groups waste little on padding. Training draws
// whole groups at random (with replacement) from an Rng, so a batch is a pure function of the
// Rng state and a resumed run sees the same batches.
#pragma once

#include <cstdint>
#include <vector>

#include "data/parallel.h"

namespace atto {

struct Seq2SeqBatch {
  std::vector<int32_t> src;       // [B, S], padded with pad_id
  std::vector<uint8_t> src_mask;  // [B, S], 1 = token
  std::vector<int32_t> tgt_in;    // [B, T]: BOS y1 .. yn, then pad_id
  std::vector<int32_t> tgt_out;   // [B, T]: y1 .. yn EOS, then -1 (ignored by the loss)
  std::vector<uint8_t> tgt_mask;  // [B, T], 1 = token (of tgt_in)
  std::vector<int64_t> index;     // which pairs, in batch order
  int64_t B = 0, S = 0, T = 0;
  int64_t num_targets() const;  // tgt_out entries != -1
  int64_t num_tokens() const { return B * (S + T); }
};

struct BucketOptions {
  int64_t max_tokens = 4096;  // padded tokens per batch: B * max(S, T + 1)
  int64_t max_sentences = 0;  // 0 = no limit
  bool sort = true;           // false: keep the pairs' order (evaluation output order)
};

// Groups of pair indices. Throws atto::Error if one pair alone exceeds max_tokens.
std::vector<std::vector<int64_t>> bucket_batches(const std::vector<EncodedPair>& pairs, const BucketOptions& opt);

struct SpecialIds {
  int32_t pad = 0, bos = 1, eos = 2;
};
Seq2SeqBatch make_batch(const std::vector<EncodedPair>& pairs, const std::vector<int64_t>& index,
                        const SpecialIds& ids = {});
// Rows [r0, r1) of a batch, padded to the batch's S and T (a data-parallel shard's part).
Seq2SeqBatch slice_rows(const Seq2SeqBatch& b, int64_t r0, int64_t r1);

}  // namespace atto
