#include "data/synth.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "io/file.h"
#include "tensor/rng.h"

namespace atto {

namespace {

void check_options(int64_t n, const SynthOptions& o) {
  auto usage = [](bool ok, std::string msg) {
    if (!ok) throw UsageError(std::move(msg));
  };
  usage(n >= 1, fmt::format("-n (number of pairs) must be at least 1, got {}", n));
  usage(o.vocab >= 1, fmt::format("--vocab (number of symbols) must be at least 1, got {}", o.vocab));
  usage(o.min_len >= 1, fmt::format("--min-len must be at least 1, got {}", o.min_len));
  usage(o.max_len >= o.min_len, fmt::format("--max-len ({}) must be at least --min-len ({})", o.max_len, o.min_len));
}

std::string join(const std::vector<int64_t>& symbols) {
  std::string s;
  for (size_t i = 0; i < symbols.size(); ++i) {
    if (i) s += ' ';
    s += std::to_string(symbols[i]);
  }
  return s;
}


}  // namespace

SynthTask parse_synth_task(std::string_view name) {
  if (name == "reverse") return SynthTask::Reverse;
  if (name == "copy") return SynthTask::Copy;
  if (name == "sort") return SynthTask::Sort;
  throw UsageError(fmt::format("unknown synthetic task '{}'; use reverse, copy or sort", name));
}

const char* to_string(SynthTask task) {
  switch (task) {
    case SynthTask::Reverse: return "reverse";
    case SynthTask::Copy: return "copy";
    case SynthTask::Sort: return "sort";
  }
  return "?";
}

std::vector<int64_t> synth_target(SynthTask task, std::vector<int64_t> source) {
  if (task == SynthTask::Reverse) std::reverse(source.begin(), source.end());
  if (task == SynthTask::Sort) std::sort(source.begin(), source.end());
  return source;
}

std::vector<std::pair<std::string, std::string>> make_synth(SynthTask task, int64_t n, const SynthOptions& opts) {
  check_options(n, opts);
  Rng rng(opts.seed);
  const auto span = static_cast<uint64_t>(opts.max_len - opts.min_len + 1);
  std::vector<std::pair<std::string, std::string>> pairs;
  pairs.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = opts.min_len + static_cast<int64_t>(rng.below(span));
    std::vector<int64_t> src(static_cast<size_t>(len));
    for (int64_t& s : src) s = static_cast<int64_t>(rng.below(static_cast<uint64_t>(opts.vocab)));
    pairs.emplace_back(join(src), join(synth_target(task, src)));
  }
  return pairs;
}

void write_synth(SynthTask task, int64_t n, const SynthOptions& opts, const std::string& out_prefix) {
  ATTO_CHECK(!out_prefix.empty(),
             "no output prefix given; pass e.g. data/reverse to write "
             "data/reverse.src and data/reverse.tgt");
  const auto pairs = make_synth(task, n, opts);
  std::string src, tgt;
  for (const auto& [s, t] : pairs) {
    (src += s) += '\n';
    (tgt += t) += '\n';
  }
  io::write_file_atomic(out_prefix + ".src", src);
  io::write_file_atomic(out_prefix + ".tgt", tgt);
}

}  // namespace atto
