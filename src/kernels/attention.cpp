// atto/kernels/attention.cpp: the fused attention's entry points and the choice of kernel path.
//
//   attention_forward(out, lse, q, k, v, key_mask, dims);   // kernels.h: layouts and masks
//   attention_backward(dq, dk, dv, dout, out, lse, q, k, v, key_mask, dims);
//
// Four kernel paths, one file each (attention_impl.h lists them with their bounds):
//   decode  a few query rows (decoding), forward only       attention_decode.cpp
//   tiny    short keys, head size <= 16: rows in lanes      attention_tiny.cpp
//   short   short keys, head size <= 64: keys in lanes      attention_short.cpp
//   flash   everything else: tiles, online softmax          attention_flash.cpp
//           in bf16 under a BF16 PrecisionScope              attention_bf16.cpp
//           (up to 1024 keys on AVX512_BF16: whole rows      attention_bf16_rows.cpp)
// choose_path below is the only place a path is chosen, for both directions, so that a backward
// runs on the path whose forward computed lse (decoding rows excepted: see choose_path).

#include <algorithm>
#include <cmath>

#include "kernels/attention_impl.h"
#include "kernels/bf16_impl.h"
#include "kernels/kernels.h"

namespace ATTO_KERNELS_NS {

namespace {

using attn::Pass;
using attn::Path;
using attn::Problem;

// The dims with ld and scale resolved, plus what every path derives from them.
Problem make_problem(const AttentionDims& dims, const uint8_t* key_mask) {
  Problem p;
  p.d = dims;
  const int64_t C = dims.NH * dims.HS;
  if (p.d.ldq == 0) p.d.ldq = C;
  if (p.d.ldk == 0) p.d.ldk = C;
  if (p.d.ldv == 0) p.d.ldv = C;
  if (p.d.ldo == 0) p.d.ldo = C;
  if (p.d.scale == 0.0f) p.d.scale = 1.0f / std::sqrt(static_cast<float>(dims.HS));
  p.HSp = attn::round_up(dims.HS, attn::W);
  p.off = dims.Tk - dims.Tq;
  p.bk = std::min(attn::BK, attn::round_up(std::max<int64_t>(dims.Tk, 1), attn::W));
  p.key_mask = key_mask;
  return p;
}

// The path for shape d, in order (bounds in attention_impl.h; AVX2 and ARM64 builds: no short):
//   decode  Tq <= kDecodeMaxRows                                  (forward only)
//   tiny    1 <= Tk <= kTinyMaxKeys  and HS <= kTinyMaxHeadSize   (Tq > kDecodeMaxRows)
//   short   1 <= Tk <= kShortMaxKeys and HS <= kShortMaxHeadSize
//   flash   anything else (Tk == 0 included)
// Forward and backward agree on every shape except decoding rows: the decode path has no
// backward, and a backward with Tq <= kDecodeMaxRows goes to short (or flash), never to tiny.
// There the backward recomputes the scores as one in-order FMA chain each (short, flash) while
// the forward's lse came from the decode path's 16-lane partial sums: equal up to rounding, not
// bit for bit.
Path choose_path(const AttentionDims& d, Pass pass) {
  if (d.Tq <= attn::kDecodeMaxRows) {
    if (pass == Pass::kForward) return Path::kDecode;
  } else if (d.Tk >= 1 && d.Tk <= attn::kTinyMaxKeys && d.HS <= attn::kTinyMaxHeadSize) {
    return Path::kTiny;  // at the native width on every level
  }
#if !ATTO_ATTN_SHORT
  // AVX2 builds: the short path holds blocks of 16-lane vectors that GCC splits into 8-lane
  // halves through memory (stores and reloads on every step); the flash path's 8-lane
  // micro-kernel ran those shapes 1.0-2.8x faster (forward and backward, bench_micro, 1 thread).
  // ARM64 builds likewise (4-lane NEON quarters; the flash path's mm_block4), unmeasured.
  return Path::kFlash;
#else
  if (d.Tk >= 1 && d.Tk <= attn::kShortMaxKeys && d.HS <= attn::kShortMaxHeadSize) return Path::kShort;
  return Path::kFlash;
#endif
}

}  // namespace

void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, const uint8_t* key_mask,
                       const AttentionDims& dims) {
  const Problem p = make_problem(dims, key_mask);
  switch (choose_path(p.d, Pass::kForward)) {
    case Path::kDecode: attn::decode_forward(out, lse, q, k, v, p); return;
    case Path::kTiny: attn::tiny_forward(out, lse, q, k, v, p); return;
#if ATTO_ATTN_SHORT
    case Path::kShort: attn::short_forward(out, lse, q, k, v, p); return;
#else
    case Path::kShort: [[fallthrough]];  // never chosen in this build (choose_path); flash serves any shape
#endif
    case Path::kFlash:
      if (detail::bf16_active() && attn::rows_bf16_fits(p.d)) {
        attn::rows_forward_bf16(out, lse, q, k, v, p);
      } else if (detail::bf16_active()) {
        attn::flash_forward_bf16(out, lse, q, k, v, p);
      } else {
        attn::flash_forward(out, lse, q, k, v, p);
      }
      return;
  }
}

void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                        const float* q, const float* k, const float* v, const uint8_t* key_mask,
                        const AttentionDims& dims) {
  if (dq == nullptr && dk == nullptr && dv == nullptr) return;
  const Problem p = make_problem(dims, key_mask);
  switch (choose_path(p.d, Pass::kBackward)) {
    case Path::kTiny: attn::tiny_backward(dq, dk, dv, dout, out, lse, q, k, v, p); return;
#if ATTO_ATTN_SHORT
    case Path::kShort: attn::short_backward(dq, dk, dv, dout, out, lse, q, k, v, p); return;
#else
    case Path::kShort: [[fallthrough]];  // never chosen in this build (choose_path); flash serves any shape
#endif
    case Path::kFlash:
      if (detail::bf16_active() && attn::rows_bf16_fits(p.d)) {
        attn::rows_backward_bf16(dq, dk, dv, dout, out, lse, q, k, v, p);
      } else if (detail::bf16_active()) {
        attn::flash_backward_bf16(dq, dk, dv, dout, out, lse, q, k, v, p);
      } else {
        attn::flash_backward(dq, dk, dv, dout, out, lse, q, k, v, p);
      }
      return;
    case Path::kDecode: break;  // never chosen for a backward
  }
}

}  // namespace atto::kernels
