// atto/optim/param_groups.h: parameters grouped by their weight decay and learning-rate scale.
//
//   std::vector<atto::optim::ParamGroup> groups =
//       atto::optim::default_param_groups(model.named_parameters(), /*weight_decay=*/0.1f);
//   // groups[0]: every ParamKind::Weight parameter, weight_decay 0.1
//   // groups[1]: Bias, Norm and Embedding parameters, weight_decay 0
//   atto::optim::AdamW opt(groups, {.beta1 = 0.9f, .beta2 = 0.95f});
//
// Conventions
// - A group's learning rate is the lr passed to Optimizer::step times its lr_scale.
// - Tied parameters (the same Tensor under two names, e.g. wte.weight and lm_head.weight) appear
//   once: the first name wins. The optimizer rejects a tensor that appears twice.
// - Weight decay follows the nanoGPT / GPT-2 rule: decay the matrices of Linear layers only.
//   Embeddings are not decayed here (PyTorch-minGPT convention); put them in a decayed group by
//   hand to get nanoGPT's "every 2-D tensor" rule.
#pragma once

#include <vector>

#include "autograd/parameter.h"

namespace atto::optim {

struct ParamGroup {
  NamedParameters params;
  float weight_decay = 0.0f;  // >= 0; L2 for Adam and SGD, decoupled for AdamW
  float lr_scale = 1.0f;      // >= 0; this group's lr = step's lr * lr_scale
};

// Two groups, always in this order (either may be empty):
//   [0] ParamKind::Weight parameters with `weight_decay`,
//   [1] Bias, Norm and Embedding parameters with weight decay 0.
std::vector<ParamGroup> default_param_groups(const NamedParameters& params, float weight_decay);

// One group with every parameter and the given weight decay.
std::vector<ParamGroup> single_param_group(const NamedParameters& params, float weight_decay = 0.0f);

// `params` without repeats of a tensor already seen (Tensor::same); the first name is kept.
NamedParameters unique_parameters(const NamedParameters& params);

}  // namespace atto::optim
