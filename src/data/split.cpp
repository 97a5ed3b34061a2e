#include "data/split.h"

#include <algorithm>

namespace atto {

int64_t holdout_size(int64_t n_samples, int64_t min_samples) {
  if (n_samples < min_samples) return 0;
  return std::max<int64_t>(1, std::min<int64_t>(1000, n_samples / 10));
}

}  // namespace atto
