// atto/kernels/attention_naive.cpp: reference attention (one full row of scores at a time) and
// attention_probs, which materialises the weights for inspection.
#include <omp.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/parallel.h"

namespace ATTO_KERNELS_NS {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The dims with defaults filled in (ld = NH*HS, scale = 1/sqrt(HS)).
AttentionDims resolve(const AttentionDims& d) {
  AttentionDims r = d;
  const int64_t C = d.NH * d.HS;
  if (r.ldq == 0) r.ldq = C;
  if (r.ldk == 0) r.ldk = C;
  if (r.ldv == 0) r.ldv = C;
  if (r.ldo == 0) r.ldo = C;
  if (r.scale == 0.0f) r.scale = 1.0f / std::sqrt(static_cast<float>(d.HS));
  return r;
}

bool masked(const AttentionDims& d, const uint8_t* key_mask, int64_t b, int64_t i, int64_t j) {
  if (d.causal && j > i + (d.Tk - d.Tq)) return true;
  return key_mask != nullptr && key_mask[b * d.Tk + j] == 0;
}

// scores[j] = scale <q_i, k_j> (or -inf where masked) for query row i of head (b, h);
// returns the row maximum.
float score_row(float* scores, const float* q, const float* k, const uint8_t* key_mask, const AttentionDims& d,
                int64_t b, int64_t h, int64_t i) {
  const float* qi = q + (b * d.Tq + i) * d.ldq + h * d.HS;
  float m = kNegInf;
  for (int64_t j = 0; j < d.Tk; j++) {
    if (masked(d, key_mask, b, i, j)) {
      scores[j] = kNegInf;
      continue;
    }
    const float* kj = k + (b * d.Tk + j) * d.ldk + h * d.HS;
    float s = 0.0f;
    for (int64_t e = 0; e < d.HS; e++) s += qi[e] * kj[e];
    scores[j] = s * d.scale;
    m = std::max(m, scores[j]);
  }
  return m;
}

}  // namespace

void attention_forward_naive(float* out, float* lse, const float* q, const float* k, const float* v,
                             const uint8_t* key_mask, const AttentionDims& dims) {
  const AttentionDims d = resolve(dims);
  std::vector<float> scores(static_cast<size_t>(d.Tk));
  for (int64_t b = 0; b < d.B; b++) {
    for (int64_t h = 0; h < d.NH; h++) {
      for (int64_t i = 0; i < d.Tq; i++) {
        const float m = score_row(scores.data(), q, k, key_mask, d, b, h, i);
        float* oi = out + (b * d.Tq + i) * d.ldo + h * d.HS;
        for (int64_t e = 0; e < d.HS; e++) oi[e] = 0.0f;
        float& l = lse[(b * d.NH + h) * d.Tq + i];
        if (m == kNegInf) {  // every key masked
          l = kNegInf;
          continue;
        }
        float sum = 0.0f;
        for (int64_t j = 0; j < d.Tk; j++) sum += std::exp(scores[j] - m);
        for (int64_t j = 0; j < d.Tk; j++) {
          const float p = std::exp(scores[j] - m) / sum;
          const float* vj = v + (b * d.Tk + j) * d.ldv + h * d.HS;
          for (int64_t e = 0; e < d.HS; e++) oi[e] += p * vj[e];
        }
        l = m + std::log(sum);
      }
    }
  }
}

// p_j = exp(s_j - lse);  D = <dout_i, out_i>
// dv_j += p_j dout_i;  dp_j = <dout_i, v_j>;  ds_j = p_j (dp_j - D)
// dq_i += scale sum_j ds_j k_j;  dk_j += scale ds_j q_i
void attention_backward_naive(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                              const float* q, const float* k, const float* v, const uint8_t* key_mask,
                              const AttentionDims& dims) {
  const AttentionDims d = resolve(dims);
  std::vector<float> scores(static_cast<size_t>(d.Tk));
  for (int64_t b = 0; b < d.B; b++) {
    for (int64_t h = 0; h < d.NH; h++) {
      for (int64_t i = 0; i < d.Tq; i++) {
        const float l = lse[(b * d.NH + h) * d.Tq + i];
        if (l == kNegInf) continue;  // fully masked row: no gradient
        score_row(scores.data(), q, k, key_mask, d, b, h, i);
        const float* qi = q + (b * d.Tq + i) * d.ldq + h * d.HS;
        const float* doi = dout + (b * d.Tq + i) * d.ldo + h * d.HS;
        const float* oi = out + (b * d.Tq + i) * d.ldo + h * d.HS;
        float D = 0.0f;
        for (int64_t e = 0; e < d.HS; e++) D += doi[e] * oi[e];
        for (int64_t j = 0; j < d.Tk; j++) {
          if (scores[j] == kNegInf) continue;
          const float p = std::exp(scores[j] - l);
          const float* kj = k + (b * d.Tk + j) * d.ldk + h * d.HS;
          const float* vj = v + (b * d.Tk + j) * d.ldv + h * d.HS;
          float dp = 0.0f;
          for (int64_t e = 0; e < d.HS; e++) dp += doi[e] * vj[e];
          const float ds = p * (dp - D);
          for (int64_t e = 0; e < d.HS; e++) {
            if (dv != nullptr) dv[(b * d.Tk + j) * d.ldv + h * d.HS + e] += p * doi[e];
            if (dq != nullptr) dq[(b * d.Tq + i) * d.ldq + h * d.HS + e] += d.scale * ds * kj[e];
            if (dk != nullptr) dk[(b * d.Tk + j) * d.ldk + h * d.HS + e] += d.scale * ds * qi[e];
          }
        }
      }
    }
  }
}

// probs[b, h, i, :] = softmax of the masked score row; masked entries exactly 0, and a row with
// every key masked is all zeros.
void attention_probs(float* probs, const float* q, const float* k, const uint8_t* key_mask, const AttentionDims& dims) {
  const AttentionDims d = resolve(dims);
  const int64_t rows = d.B * d.NH * d.Tq;
  const bool par = rows > 1 && rows * d.Tk * d.HS >= (1 << 15);
  parallel_for(rows, par, [&](int64_t r) {
    const int64_t b = r / (d.NH * d.Tq), h = (r / d.Tq) % d.NH, i = r % d.Tq;
    float* p = probs + r * d.Tk;
    const float m = score_row(p, q, k, key_mask, d, b, h, i);
    if (m == kNegInf) {
      for (int64_t j = 0; j < d.Tk; j++) p[j] = 0.0f;
      return;
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < d.Tk; j++) {
      p[j] = std::exp(p[j] - m);  // exp(-inf) = 0 exactly
      sum += p[j];
    }
    for (int64_t j = 0; j < d.Tk; j++) p[j] /= sum;
  });
}

}  // namespace atto::kernels
