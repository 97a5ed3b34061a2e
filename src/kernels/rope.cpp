// atto/kernels/rope.cpp: rotary position embeddings on the Q and K blocks of a fused qkv buffer.
#include <cmath>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/parallel.h"

namespace ATTO_KERNELS_NS {

namespace {

// cos and sin of p * base^(-2i / HS), i in [0, HS/2), computed in double and rounded once.
void angles(int64_t p, int64_t HS, float base, float* c, float* s) {
  for (int64_t i = 0; i < HS / 2; ++i) {
    const double a = static_cast<double>(p) * std::pow(static_cast<double>(base), -2.0 * static_cast<double>(i) / HS);
    c[i] = static_cast<float>(std::cos(a));
    s[i] = static_cast<float>(std::sin(a));
  }
}

// Rotates the Q and K blocks of every row [B*T, 3C] by sign * angle; V is copied (or added).
void rotate(float* out, const float* in, int64_t B, int64_t T, int64_t C, int64_t NH, int64_t offset, float base,
            float sign, bool accumulate) {
  const int64_t HS = C / NH, H2 = HS / 2, rows = B * T;
  // The angles of the T positions, once per call (every batch row shares them).
  std::vector<float> cs(static_cast<size_t>(T * H2)), sn(static_cast<size_t>(T * H2));
  for (int64_t t = 0; t < T; ++t) angles(offset + t, HS, base, cs.data() + t * H2, sn.data() + t * H2);
  auto body = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* c = cs.data() + (r % T) * H2;
      const float* s = sn.data() + (r % T) * H2;
      const float* x = in + r * 3 * C;
      float* y = out + r * 3 * C;
      for (int64_t h = 0; h < 2 * NH; ++h) {  // the Q heads, then the K heads
        const float* xh = x + h * HS;
        float* yh = y + h * HS;
        for (int64_t i = 0; i < H2; ++i) {
          const float x0 = xh[2 * i], x1 = xh[2 * i + 1], si = sign * s[i];
          const float y0 = x0 * c[i] - x1 * si, y1 = x0 * si + x1 * c[i];
          yh[2 * i] = accumulate ? yh[2 * i] + y0 : y0;
          yh[2 * i + 1] = accumulate ? yh[2 * i + 1] + y1 : y1;
        }
      }
      for (int64_t j = 2 * C; j < 3 * C; ++j) y[j] = accumulate ? y[j] + x[j] : x[j];
    }
  };
  // Rows are independent: which thread computes a row changes nothing in it.
  if (use_threads(rows * C >= (int64_t{1} << 14) && rows > 1)) {
#pragma omp parallel
    {
      const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
      body(rows * t / nt, rows * (t + 1) / nt);
    }
  } else {
    body(0, rows);
  }
}

}  // namespace

void rope_forward(float* out, const float* qkv, int64_t B, int64_t T, int64_t C, int64_t n_heads, int64_t offset,
                  float base) {
  rotate(out, qkv, B, T, C, n_heads, offset, base, 1.0f, false);
}

void rope_backward(float* dqkv, const float* dout, int64_t B, int64_t T, int64_t C, int64_t n_heads, int64_t offset,
                   float base, bool accumulate) {
  rotate(dqkv, dout, B, T, C, n_heads, offset, base, -1.0f, accumulate);
}

}  // namespace atto::kernels
