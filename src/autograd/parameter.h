// atto/autograd/parameter.h: a named trainable tensor and what kind of weight it is.
//
//   for (const NamedParameter& p : model.named_parameters())
//     fmt::print("{} {} {}\n", p.name, shape_str(p.tensor.shape()), to_string(p.kind));
//
// Names follow PyTorch state_dict conventions ("transformer.h.0.attn.c_attn.weight"). The kind
// lets the optimizer build parameter groups without matching on names: by default AdamW
// decays Weight parameters (matrices of Linear layers) and not Bias, Norm or Embedding ones.
#pragma once

#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace atto {

enum class ParamKind { Weight, Bias, Norm, Embedding };

inline const char* to_string(ParamKind k) {
  switch (k) {
    case ParamKind::Weight: return "weight";
    case ParamKind::Bias: return "bias";
    case ParamKind::Norm: return "norm";
    case ParamKind::Embedding: return "embedding";
  }
  return "?";
}

struct NamedParameter {
  std::string name;
  Tensor tensor;  // requires_grad; its gradient is tensor.grad()
  ParamKind kind = ParamKind::Weight;
};

using NamedParameters = std::vector<NamedParameter>;

}  // namespace atto
