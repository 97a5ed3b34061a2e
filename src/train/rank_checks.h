// atto/train/rank_checks.h: what the ranks of a distributed run agree on before and during it.
//
// Every rank reads the data and builds (or loads) the model itself; these checks make sure they
// built the same thing before the first step, and keep their decisions in step afterwards.
#pragma once

#include <cstdint>

#include "nn/module.h"
#include "run/run_config.h"
#include "train/collective.h"

namespace atto {

// Compares every rank's data fingerprint, resolved configuration, step and weights with rank
// 0's; throws naming the rank, its host and what differs (a data file that is not the same on
// every host, a run directory that differs, ...).
void check_ranks_agree(Collective& c, const RunConfig& cfg, nn::Module& model, int64_t step);

// At each evaluation: every rank's weights must still be rank 0's (the same gradients and the
// same optimizer give the same bits, unless the hosts run builds that compute differently);
// throws naming the first rank that drifted.
void check_weights_agree(Collective& c, nn::Module& model, int64_t step);

// --time: every rank planned alone (timings differ a little); all take rank 0's size and steps.
void adopt_rank0_plan(Collective& c, RunConfig& cfg, double& planned_seconds);

// Whether `mine` is true on any rank (c == nullptr: mine). Every rank must call it.
bool any_rank(Collective* c, bool mine);

}  // namespace atto
