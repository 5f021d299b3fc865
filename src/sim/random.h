// sim/random.h
//
// The simulation's only source of randomness: xoshiro256** (Blackman and
// Vigna), seeded through splitmix64. Small, fast, and the same sequence on
// every platform and standard library, unlike std::mt19937_64 with
// std::*_distribution. Every simulated client and the world itself own one
// generator, derived from the world seed and a stream number, so adding a
// client does not change the numbers another client draws.

#ifndef TURNSTILE_SIM_RANDOM_H_
#define TURNSTILE_SIM_RANDOM_H_

#include <array>
#include <cstdint>

#include "core/check.h"

namespace turnstile::sim {

// One step of splitmix64: advances `state` and returns the next output.
constexpr std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class Random {
 public:
  // Generator number `stream` of the world seeded with `seed`.
  explicit Random(std::uint64_t seed, std::uint64_t stream = 0) {
    std::uint64_t state = seed ^ (stream * 0xd1342543de82ef95ULL);
    // Burn one output so that seed 0 / stream 0 is not special.
    (void)splitmix64(state);
    for (std::uint64_t& word : state_) word = splitmix64(state);
  }

  std::uint64_t next_u64() {
    const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, bound), bound > 0 (Lemire's multiply-shift; the tiny bias
  // is irrelevant for simulation choices).
  std::uint64_t below(std::uint64_t bound) {
    TURNSTILE_CHECK(bound > 0);
    __extension__ using Wide = unsigned __int128;
    return static_cast<std::uint64_t>((static_cast<Wide>(next_u64()) * bound) >> 64);
  }

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::array<std::uint64_t, 4> state_{};
};

}  // namespace turnstile::sim

#endif  // TURNSTILE_SIM_RANDOM_H_
