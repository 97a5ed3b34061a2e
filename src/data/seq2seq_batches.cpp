#include "data/seq2seq_batches.h"

#include <algorithm>
#include <numeric>
#include <type_traits>

#include "base/error.h"

namespace atto {

int64_t Seq2SeqBatch::num_targets() const {
  return std::count_if(tgt_out.begin(), tgt_out.end(), [](int32_t t) { return t != -1; });
}

namespace {
int64_t cost(const EncodedPair& p) {
  return std::max<int64_t>(static_cast<int64_t>(p.src.size()), static_cast<int64_t>(p.tgt.size()) + 1);
}
}  // namespace

std::vector<std::vector<int64_t>> bucket_batches(const std::vector<EncodedPair>& pairs, const BucketOptions& opt) {
  ATTO_CHECK(opt.max_tokens > 0, "--batch-tokens must be positive, got {}", opt.max_tokens);
  ATTO_CHECK(opt.max_sentences >= 0, "max sentences per batch must be >= 0, got {}", opt.max_sentences);
  std::vector<int64_t> order(pairs.size());
  std::iota(order.begin(), order.end(), 0);
  if (opt.sort)
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      const auto ka = std::make_tuple(pairs[a].src.size(), pairs[a].tgt.size(), a);
      const auto kb = std::make_tuple(pairs[b].src.size(), pairs[b].tgt.size(), b);
      return ka < kb;
    });
  std::vector<std::vector<int64_t>> batches;
  std::vector<int64_t> cur;
  int64_t width = 0;
  for (int64_t i : order) {
    const int64_t c = cost(pairs[i]);
    ATTO_CHECK(c <= opt.max_tokens,
               "sentence pair {} needs {} tokens, more than --batch-tokens {}: raise "
               "--batch-tokens or lower --max-len",
               i, c, opt.max_tokens);
    const int64_t w = std::max(width, c);
    const bool full = (static_cast<int64_t>(cur.size()) + 1) * w > opt.max_tokens ||
                      (opt.max_sentences > 0 && static_cast<int64_t>(cur.size()) >= opt.max_sentences);
    if (!cur.empty() && full) {
      batches.push_back(std::move(cur));
      cur.clear();
      width = 0;
    }
    cur.push_back(i);
    width = std::max(width, c);
  }
  if (!cur.empty()) batches.push_back(std::move(cur));
  return batches;
}

Seq2SeqBatch make_batch(const std::vector<EncodedPair>& pairs, const std::vector<int64_t>& index,
                        const SpecialIds& ids) {
  ATTO_CHECK(!index.empty(), "make_batch: no pairs");
  Seq2SeqBatch b;
  b.index = index;
  b.B = static_cast<int64_t>(index.size());
  for (int64_t i : index) {
    b.S = std::max<int64_t>(b.S, static_cast<int64_t>(pairs[i].src.size()));
    b.T = std::max<int64_t>(b.T, static_cast<int64_t>(pairs[i].tgt.size()) + 1);
  }
  b.S = std::max<int64_t>(b.S, 1);
  b.src.assign(b.B * b.S, ids.pad);
  b.src_mask.assign(b.B * b.S, 0);
  b.tgt_in.assign(b.B * b.T, ids.pad);
  b.tgt_out.assign(b.B * b.T, -1);
  b.tgt_mask.assign(b.B * b.T, 0);
  for (int64_t r = 0; r < b.B; ++r) {
    const EncodedPair& p = pairs[index[r]];
    for (size_t t = 0; t < p.src.size(); ++t) {
      b.src[r * b.S + t] = p.src[t];
      b.src_mask[r * b.S + t] = 1;
    }
    const auto n = static_cast<int64_t>(p.tgt.size());
    b.tgt_in[r * b.T] = ids.bos;
    for (int64_t t = 0; t < n; ++t) {
      b.tgt_in[r * b.T + t + 1] = p.tgt[t];
      b.tgt_out[r * b.T + t] = p.tgt[t];
    }
    b.tgt_out[r * b.T + n] = ids.eos;
    for (int64_t t = 0; t <= n; ++t) b.tgt_mask[r * b.T + t] = 1;
  }
  return b;
}

Seq2SeqBatch slice_rows(const Seq2SeqBatch& b, int64_t r0, int64_t r1) {
  ATTO_CHECK(0 <= r0 && r0 < r1 && r1 <= b.B, "slice_rows: rows [{}, {}) of a batch of {}", r0, r1, b.B);
  Seq2SeqBatch s;
  s.B = r1 - r0;
  s.S = b.S;
  s.T = b.T;
  auto rows = [&](const auto& v, int64_t len) {
    return std::remove_cvref_t<decltype(v)>(v.begin() + r0 * len, v.begin() + r1 * len);
  };
  s.src = rows(b.src, b.S);
  s.src_mask = rows(b.src_mask, b.S);
  s.tgt_in = rows(b.tgt_in, b.T);
  s.tgt_out = rows(b.tgt_out, b.T);
  s.tgt_mask = rows(b.tgt_mask, b.T);
  if (!b.index.empty()) s.index.assign(b.index.begin() + r0, b.index.begin() + r1);
  return s;
}

}  // namespace atto
