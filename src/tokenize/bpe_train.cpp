// BpeTokenizer::train: byte-level BPE merges learned from pre-tokenised text.
//
// The words (chunks) are counted once; each distinct word is a sequence of token ids weighted
// by its count. Pair counts are kept up to date as merges rewrite the words that hold the pair
// (found through a pair -> words index), and a max-heap with lazy deletion picks the next pair:
// the highest count, ties to the smaller (first id, second id). Nothing depends on hash order
// or threads, so the same texts give the same merges.
#include <algorithm>
#include <map>
#include <queue>

#include "base/error.h"
#include "tokenize/bpe.h"
#include "tokenize/pretokenize.h"

namespace atto {

namespace {

struct Candidate {
  int64_t count;
  int32_t a, b;
  bool operator<(const Candidate& o) const {  // the heap's top: largest count, then smallest (a, b)
    if (count != o.count) return count < o.count;
    return std::tie(a, b) > std::tie(o.a, o.b);
  }
};

uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }

struct Words {
  std::vector<std::vector<int32_t>> symbols;
  std::vector<int64_t> count;
};

// Distinct chunks of all texts with their counts, in byte order (a fixed order).
Words count_words(std::span<const std::string_view> texts) {
  std::unordered_map<std::string_view, int64_t> counts;
  for (std::string_view text : texts) Gpt2Splitter::instance().each(text, [&](std::string_view c) { counts[c]++; });
  std::vector<std::pair<std::string_view, int64_t>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end());
  Words w;
  for (const auto& [chunk, n] : sorted) {
    w.symbols.emplace_back(chunk.begin(), chunk.end());
    for (int32_t& s : w.symbols.back()) s = static_cast<uint8_t>(s);
    w.count.push_back(n);
  }
  return w;
}

// Rewrites every word of `holders` that holds the pair (a, b) with `id` in its place (left to
// right, not overlapping), indexes the words under their new pairs, and returns the change of
// every pair count, in a fixed order.
std::map<uint64_t, int64_t> apply_merge(Words& w, const std::vector<int32_t>& holders, int32_t a, int32_t b, int32_t id,
                                        std::vector<int32_t>& last_visit,
                                        std::unordered_map<uint64_t, std::vector<int32_t>>& where) {
  std::map<uint64_t, int64_t> delta;
  for (int32_t wi : holders) {
    if (last_visit[wi] == id) continue;
    last_visit[wi] = id;
    auto& s = w.symbols[wi];
    const int64_t n = w.count[wi];
    std::vector<int32_t> out;
    out.reserve(s.size());
    for (size_t j = 0; j < s.size(); ++j) {
      const bool hit = j + 1 < s.size() && s[j] == a && s[j + 1] == b;
      out.push_back(hit ? id : s[j]);
      j += hit ? 1 : 0;
    }
    if (out.size() == s.size()) continue;
    for (size_t j = 0; j + 1 < s.size(); ++j) delta[pair_key(s[j], s[j + 1])] -= n;
    for (size_t j = 0; j + 1 < out.size(); ++j) {
      const uint64_t nk = pair_key(out[j], out[j + 1]);
      delta[nk] += n;
      if (out[j] == id || out[j + 1] == id) {
        auto& list = where[nk];
        if (list.empty() || list.back() != wi) list.push_back(wi);
      }
    }
    s = std::move(out);
  }
  return delta;
}

}  // namespace

BpeTokenizer BpeTokenizer::train(std::span<const std::string_view> texts, const BpeTrainOptions& opt) {
  ATTO_CHECK(opt.vocab_size >= 257,
             "BPE training: the vocabulary size must be at least 257 (256 bytes and "
             "<|endoftext|>), got {}",
             opt.vocab_size);
  ATTO_CHECK(opt.vocab_size <= (int64_t{1} << 31) - 1, "BPE training: vocabulary size {} is too large", opt.vocab_size);
  ATTO_CHECK(opt.min_frequency >= 1, "BPE training: min_frequency must be >= 1, got {}", opt.min_frequency);
  Words w = count_words(texts);
  BpeTokenizer t;
  for (int b = 0; b < 256; ++b) t.tokens_.emplace_back(1, static_cast<char>(b));
  std::unordered_map<uint64_t, int64_t> pairs;
  std::unordered_map<uint64_t, std::vector<int32_t>> where;  // pair -> words holding it (may repeat, or be stale)
  for (size_t i = 0; i < w.symbols.size(); ++i) {
    const auto& s = w.symbols[i];
    for (size_t j = 0; j + 1 < s.size(); ++j) {
      const uint64_t k = pair_key(s[j], s[j + 1]);
      pairs[k] += w.count[i];
      auto& list = where[k];
      if (list.empty() || list.back() != static_cast<int32_t>(i)) list.push_back(static_cast<int32_t>(i));
    }
  }
  std::priority_queue<Candidate> heap;
  {
    std::vector<std::pair<uint64_t, int64_t>> all(pairs.begin(), pairs.end());
    std::sort(all.begin(), all.end());
    for (const auto& [k, n] : all) heap.push({n, static_cast<int32_t>(k >> 32), static_cast<int32_t>(k & 0xffffffffu)});
  }
  std::vector<int32_t> last_visit(w.symbols.size(), -1);
  const int64_t reserved = opt.end_of_text ? 1 : 0;
  while (static_cast<int64_t>(t.tokens_.size()) + reserved < opt.vocab_size && !heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const uint64_t k = pair_key(c.a, c.b);
    const auto pit = pairs.find(k);
    const int64_t now = pit == pairs.end() ? 0 : pit->second;
    if (now != c.count) {  // stale: its count went down since it was pushed
      if (now > 0) heap.push({now, c.a, c.b});
      continue;
    }
    if (c.count < opt.min_frequency) break;
    const auto id = static_cast<int32_t>(t.tokens_.size());
    t.tokens_.push_back(t.tokens_[c.a] + t.tokens_[c.b]);
    t.merges_.emplace_back(c.a, c.b);
    const std::map<uint64_t, int64_t> delta = apply_merge(w, where[k], c.a, c.b, id, last_visit, where);
    where.erase(k);
    for (const auto& [dk, d] : delta) {
      if (d == 0) continue;
      int64_t& v = pairs[dk];
      v += d;
      if (d > 0) heap.push({v, static_cast<int32_t>(dk >> 32), static_cast<int32_t>(dk & 0xffffffffu)});
      if (v == 0) pairs.erase(dk);
    }
  }
  if (opt.end_of_text) {
    t.tokens_.emplace_back(kEndOfText);
    t.special_.emplace_back(kEndOfText, static_cast<int32_t>(t.tokens_.size() - 1));
  }
  t.index("BPE training");
  return t;
}

}  // namespace atto
