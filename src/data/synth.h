// atto/data/synth.h: synthetic sequence-to-sequence tasks, for checking that a seq2seq model
// (and its attention) learns before spending time on real translation data.
//
//   auto pairs = atto::make_synth(atto::SynthTask::Reverse, 3, {.seed = 1});
//   // {"2 0 3 1 2 6 9 1", "1 9 6 2 1 3 0 2"}, {"1 0 1", "1 0 1"}, {"1 9 5 1 0 7 5 7", ...}
//   atto::write_synth(atto::SynthTask::Sort, 10000, {}, "data/sort");  // data/sort.src, .tgt
//
// Semantics (the CLI's `atto data synth reverse|copy|sort`; docs/seq2seq-data.md)
// - A source is a sequence of symbols, separated by single spaces. Its length is uniform in
//   [min_len, max_len]; each symbol is uniform over the `vocab` symbols. The symbols are the
//   decimal numbers 0 .. vocab-1 ("0".."9" by default: 10 digits).
// - reverse: target = the source backwards; copy: target = the source; sort: target = the
//   source in ascending numeric order (duplicates kept).
// - Randomness: one Rng(seed); per pair, first the length (rng.below), then each symbol in
//   order. The same options give the same pairs, and the first k pairs of a larger n are the
//   same as those of n = k.
// - write_synth() writes <out_prefix>.src and <out_prefix>.tgt, one sequence per line, each
//   line ending in '\n' (aligned files for read_parallel()). Files are written to a temporary
//   name and renamed; the folder must exist.
// Bad options throw atto::UsageError naming the flag (--vocab, --min-len, --max-len, -n).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace atto {

enum class SynthTask { Reverse, Copy, Sort };

// "reverse", "copy", "sort" -> SynthTask; anything else throws atto::UsageError.
SynthTask parse_synth_task(std::string_view name);
const char* to_string(SynthTask task);

struct SynthOptions {
  int64_t vocab = 10;    // number of symbols: "0" .. "vocab-1"
  int64_t min_len = 3;   // shortest source (symbols)
  int64_t max_len = 10;  // longest source (symbols)
  uint64_t seed = 1337;
};

// The target of one source (symbols as numbers).
std::vector<int64_t> synth_target(SynthTask task, std::vector<int64_t> source);

// n (source, target) pairs of space-separated symbols.
std::vector<std::pair<std::string, std::string>> make_synth(SynthTask task, int64_t n, const SynthOptions& opts = {});

void write_synth(SynthTask task, int64_t n, const SynthOptions& opts, const std::string& out_prefix);

}  // namespace atto
