// What 64-byte alignment is worth to an AMX bf16 GEMM (docs/precision.md, "Alignment").
//
//   g++ -O2 -std=c++20 bench/amx/tile_alignment.cpp -o /tmp/tile_alignment && /tmp/tile_alignment
//
// Runs atto's AMX block (2 x 2 accumulator tiles over 32 x 32 blocks of C, A row-major, B packed
// in 16-column VNNI panels) over C[M, N] = A[M, K] B[K, N] for the shapes of model (d)'s linear
// layers, once with every operand on a 64-byte boundary and once with each 16 bytes past one (as
// malloc returns them), and prints GFLOP/s on one core. Linux on a CPU with AMX-BF16 only.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

__attribute__((target("amx-tile,amx-bf16"))) void configure() {
  TileConfig c;
  for (int t = 0; t < 8; t++) {
    c.colsb[t] = 64;
    c.rows[t] = 16;
  }
  asm volatile("" : : "r"(&c) : "memory");  // GCC 12 drops the stores to c otherwise
  _tile_loadconfig(&c);
}

__attribute__((target("amx-tile"))) void release() { _tile_release(); }

// out[32, 32] (row stride ldo floats) = A[32, Kp] (row-major) @ (B0 | B1), B panels of Kp x 16.
__attribute__((target("amx-tile,amx-bf16"), noinline)) void block(float* out, long ldo, const uint16_t* A, long Kp,
                                                                 const uint16_t* B0, const uint16_t* B1) {
  const long stride = Kp * 2, cs = ldo * 4;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (long kb = 0; kb < Kp / 32; kb++) {
    _tile_loadd(4, A + kb * 32, stride);
    _tile_loadd(6, B0 + kb * 512, 64);
    _tile_loadd(7, B1 + kb * 512, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_loadd(5, A + 16 * Kp + kb * 32, stride);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, out, cs);
  _tile_stored(1, out + 16, cs);
  _tile_stored(2, out + 16 * ldo, cs);
  _tile_stored(3, out + 16 * ldo + 16, cs);
}

// A buffer of n elements that starts `offset` bytes past a 64-byte boundary.
template <class T>
T* buffer(std::vector<unsigned char>& store, size_t n, size_t offset) {
  store.assign(n * sizeof(T) + 128, 0);
  const auto p = (reinterpret_cast<uintptr_t>(store.data()) + 63) / 64 * 64 + offset;
  return reinterpret_cast<T*>(p);
}

double gflops(long M, long N, long K, size_t offset) {
  std::vector<unsigned char> sa, sb, sc;
  uint16_t* A = buffer<uint16_t>(sa, M * K, offset);
  uint16_t* B = buffer<uint16_t>(sb, K * N, offset);
  float* C = buffer<float>(sc, M * N, offset);
  srand(1);
  for (long i = 0; i < M * K; i++) A[i] = 0x3f80 + (rand() & 0x7f);  // bf16 values in [1, 2)
  for (long i = 0; i < K * N; i++) B[i] = 0x3f80 + (rand() & 0x7f);
  const long panels = N / 32, blocks = M / 32;
  double best = 1e30;
  for (int r = 0; r < 7; r++) {
    const auto t0 = std::chrono::steady_clock::now();
    for (long t = 0; t < panels * blocks; t++) {  // atto's task order: every panel of a row block
      const long p = t % panels, m0 = (t / panels) * 32;
      const uint16_t* b0 = B + 2 * p * K * 16;
      block(C + m0 * N + p * 32, N, A + m0 * K, K, b0, b0 + K * 16);
    }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * M * N * K / best / 1e9;
}

}  // namespace

int main() {
  if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) != 0) {
    std::fprintf(stderr, "tile_alignment: Linux does not grant AMX tile data here\n");
    return 1;
  }
  configure();
  const long shapes[][3] = {{1024, 1152, 384}, {1024, 384, 384}, {1024, 1536, 384}, {1024, 384, 1536}};
  std::printf("%-22s %12s %12s %7s\n", "M x N x K", "aligned", "+16 bytes", "ratio");
  for (const auto& s : shapes) {
    const double a = gflops(s[0], s[1], s[2], 0), u = gflops(s[0], s[1], s[2], 16);
    std::printf("%5ld x %4ld x %4ld    %7.0f GF/s %7.0f GF/s %6.2fx\n", s[0], s[1], s[2], a, u, a / u);
  }
  release();
}
