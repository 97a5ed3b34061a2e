// atto/api/c_api_weights.cpp: the C API's weights section (include/atto/atto.h, "Weights"): a
// model's tensors by name, read without a copy. The list holds references to the tensors'
// storage, so its pointers stay valid until atto_weights_free, also after the model is freed;
// a model's weights never change after atto_model_open, so they are read-only. A matrix that a
// q8_0/q4_0/Q4_K/Q6_K GGUF file keeps quantized (run_dir.h, WeightStorage) is given as its dequantized
// values: a float copy, the values the integer kernels compute with.
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/c_api_internal.h"
#include "kernels/kernels.h"

struct atto_weights {
  std::vector<std::string> names;
  std::vector<atto::Tensor> tensors;  // contiguous; they share the model's storage
};

extern "C" {

atto_status atto_model_weights(const atto_model* m, atto_weights** out) {
  if (out) *out = nullptr;
  return atto::capi::guarded([&] {
    atto::capi::need(m, "the model");
    atto::capi::need(out, "out");
    const atto::nn::Module& module =
        m->gpt ? static_cast<const atto::nn::Module&>(*m->gpt->model) : *m->s2s->model;
    auto w = std::make_unique<atto_weights>();
    std::map<const atto::QuantizedData*, atto::Tensor> dequantized;  // a tied matrix: one copy, as its floats
    for (auto& [name, t] : module.state_dict()) {
      w->names.push_back(name);
      if (const atto::QuantizedData* q = t.quantized()) {  // [N, K] rows of ggml blocks
        auto [it, fresh] = dequantized.try_emplace(q);
        if (fresh) {
          const int64_t N = t.size(0), K = t.size(1);
          it->second = atto::Tensor::empty(t.shape());
          std::vector<int32_t> rows(static_cast<size_t>(N));
          std::iota(rows.begin(), rows.end(), 0);
          atto::kernels::dequantize_rows(it->second.data(), q->bytes.data(),
                                         static_cast<atto::kernels::QuantType>(q->type),
                                         static_cast<atto::kernels::QuantLayout>(q->layout), N, K, rows.data(), N);
        }
        w->tensors.push_back(it->second);
      } else {
        w->tensors.push_back(t.detach().contiguous());  // a parameter is contiguous: no copy
      }
    }
    *out = w.release();
  });
}

size_t atto_weights_count(const atto_weights* w) { return w ? w->names.size() : 0; }

bool atto_weights_get(const atto_weights* w, size_t i, atto_weight* out) {
  if (!w || !out || i >= w->names.size() || w->tensors[i].ndim() > ATTO_WEIGHT_MAX_DIMS) return false;
  const atto::Tensor& t = w->tensors[i];
  *out = atto_weight{};
  out->name = w->names[i].c_str();
  out->data = t.data();
  out->n_elements = static_cast<size_t>(t.numel());
  out->ndim = t.ndim();
  for (int d = 0; d < t.ndim(); ++d) out->shape[d] = t.shape()[static_cast<size_t>(d)];
  return true;
}

void atto_weights_free(atto_weights* w) { delete w; }

}  // extern "C"
