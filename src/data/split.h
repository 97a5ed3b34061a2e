// atto/data/split.h: how much of a corpus is held out for validation.
#pragma once

#include <cstdint>

namespace atto {

// The validation split of a tiny corpus. Below kMinSamplesForHoldout samples (lines, or sentence
// pairs) a held-out tenth would be a handful of samples that the model never sees and whose loss
// says little, so nothing is held out: the model trains on everything and "validation" scores the
// training set (the trainer labels it so). From there on: max(1, min(1000, n / 10)) samples,
// makemore's rule. Stream data holds nothing out below kMinTokensForHoldout tokens (a tenth
// would be under 10 tokens).
inline constexpr int64_t kMinSamplesForHoldout = 50;
inline constexpr int64_t kMinTokensForHoldout = 100;
int64_t holdout_size(int64_t n_samples, int64_t min_samples = kMinSamplesForHoldout);

}  // namespace atto
