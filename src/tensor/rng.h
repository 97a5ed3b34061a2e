// atto/tensor/rng.h: seeded, reproducible random numbers, always passed explicitly.
//
//   atto::Rng rng(1337);
//   float u = rng.uniform();          // [0, 1)
//   float z = rng.normal();           // N(0, 1)
//   uint64_t s = rng.next_u64();      // e.g. the seed of one dropout call
//
// There is no global generator: whoever needs randomness takes an Rng&. The state is four
// 64-bit words (xoshiro256**), so it can be saved in a checkpoint and restored for an exact
// resume. For work split over threads (dropout masks) use counter_hash(seed, i): a pure
// function of the seed and the element index, so the result is the same for any thread count.
#pragma once

#include <array>
#include <cstdint>

namespace atto {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }

  void reseed(uint64_t seed);
  uint64_t next_u64();
  // Uniform in [0, 1) with 24 random bits (every float is exactly representable).
  float uniform();
  // Uniform in [lo, hi).
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  // Standard normal by Box-Muller (two uniforms per call; no cached second value, so the
  // state alone determines the stream).
  float normal();
  float normal(float mean, float std) { return mean + std * normal(); }
  // Uniform integer in [0, n), unbiased (rejection sampling).
  uint64_t below(uint64_t n);

  std::array<uint64_t, 4> state() const { return s_; }
  void set_state(const std::array<uint64_t, 4>& s) { s_ = s; }

 private:
  std::array<uint64_t, 4> s_{};
};

// SplitMix64 finaliser of (seed, index): a stateless hash used for counter-based streams.
inline uint64_t counter_hash(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) from counter_hash, 24 bits.
inline float counter_uniform(uint64_t seed, uint64_t index) {
  return static_cast<float>(counter_hash(seed, index) >> 40) * (1.0f / 16777216.0f);
}

}  // namespace atto
