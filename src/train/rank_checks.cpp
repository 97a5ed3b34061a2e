#include "train/rank_checks.h"

#include <fmt/format.h>

#include <cstring>
#include <sstream>

#include "base/error.h"
#include "base/hash.h"

namespace atto {

namespace {

uint64_t weights_hash(nn::Module& model) {
  uint64_t h = kFnv1a64Offset;
  for (const NamedParameter& p : model.named_parameters()) {
    h = fnv1a64(p.name.data(), p.name.size(), h);
    const Tensor t = p.tensor.contiguous();
    h = fnv1a64(t.data(), sizeof(float) * static_cast<size_t>(t.numel()), h);
  }
  return h;
}

}  // namespace

void check_ranks_agree(Collective& c, const RunConfig& cfg, nn::Module& model, int64_t step) {
  const std::string config = to_json(cfg).dump();
  const std::vector<std::string> fields = {cfg.data.fingerprint,
                                           fmt::format("{:016x}", fnv1a64(config.data(), config.size())),
                                           std::to_string(step), fmt::format("{:016x}", weights_hash(model))};
  std::string mine = c.host();
  for (const std::string& f : fields) mine += "\n" + f;
  const std::vector<std::string> all = c.all_gather(mine);
  auto split = [](const std::string& s) {
    std::vector<std::string> v;
    std::istringstream in(s);
    for (std::string line; std::getline(in, line);) v.push_back(line);
    return v;
  };
  const std::vector<std::string> ref = split(all.at(0));
  const char* what[] = {"the data file's fingerprint", "the resolved configuration", "the step", "the weights"};
  const char* fix[] = {"every host must read the same data file (copy it, or use a shared file system)",
                       "launch every rank with the same flags and the same atto",
                       "every host must see the same run directory (a shared file system, or identical copies)",
                       "every host must see the same run directory (a shared file system, or identical copies)"};
  for (size_t r = 1; r < all.size(); ++r) {
    const std::vector<std::string> got = split(all[r]);
    ATTO_CHECK(got.size() == ref.size(), "rank {} sent a malformed check", r);
    for (size_t i = 1; i < ref.size(); ++i)
      ATTO_CHECK(got[i] == ref[i], "rank {} on {} differs from rank 0 on {} in {} ({} vs {}): {}", r, got[0], ref[0],
                 what[i - 1], got[i], ref[i], fix[i - 1]);
  }
}

void check_weights_agree(Collective& c, nn::Module& model, int64_t step) {
  const std::string mine = fmt::format("{:016x}", weights_hash(model));
  const std::vector<std::string> all = c.all_gather_same_size(mine);
  for (size_t r = 1; r < all.size(); ++r)
    ATTO_CHECK(all[r] == all[0],
               "rank {}'s weights differ from rank 0's at step {}: the hosts compute differently (run the same atto "
               "build on every host; with different CPUs, build it for the oldest one: cmake -DATTO_NATIVE=OFF)",
               r, step);
}

void adopt_rank0_plan(Collective& c, RunConfig& cfg, double& planned_seconds) {
  const std::string plan =
      c.from_rank0(fmt::format("{}\n{}\n{:.17g}", cfg.train.size, cfg.train.steps, planned_seconds));
  std::istringstream in(plan);
  std::string size, steps, planned;
  std::getline(in, size);
  std::getline(in, steps);
  std::getline(in, planned);
  cfg.train.size = size;
  cfg.train.steps = std::stoll(steps);
  planned_seconds = std::stod(planned);
}

bool any_rank(Collective* c, bool mine) {
  if (c == nullptr) return mine;
  for (const std::string& v : c->all_gather_same_size(mine ? "1" : "0"))
    if (v == "1") return true;
  return false;
}

}  // namespace atto
