#include "tensor/rng.h"

#include <cmath>

namespace atto {

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

void Rng::reseed(uint64_t seed) {
  uint64_t x = seed;
  for (auto& w : s_) w = splitmix64(x);
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

float Rng::uniform() { return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f); }

float Rng::normal() {
  // u1 in (0, 1] so log(u1) is finite.
  const double u1 = (static_cast<double>(next_u64() >> 11) + 1.0) * (1.0 / 9007199254740992.0);
  const double u2 = static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

uint64_t Rng::below(uint64_t n) {
  if (n <= 1) return 0;
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t r;
  do {
    r = next_u64();
  } while (r >= limit);
  return r % n;
}

}  // namespace atto
