// Test helper: a GPT whose logit for one token is not finite while every other logit is, with
// finite weights for -inf and +inf (the overflow a diverged model produces) or a NaN row.
#pragma once

#include "models/gpt.h"

namespace atto::testing {

// ln_f maps every hidden state to all ones (weight 0, bias 1), so logit t is the sum of lm_head's
// row t (tied to wte's row t, which a prompt without token t never reads): 3e38 per element
// overflows to +-inf once summed over d_model; a NaN gives NaN. Needs pre-norm with biases.
inline void break_logit(GPT& m, int32_t t, float row_value) {
  m.transformer.ln_f->weight.fill(0.0f);
  m.transformer.ln_f->bias.fill(1.0f);
  const int64_t C = m.config().d_model;
  float* row = m.lm_head.weight.data() + static_cast<int64_t>(t) * C;
  for (int64_t c = 0; c < C; ++c) row[c] = row_value;
}

}  // namespace atto::testing
