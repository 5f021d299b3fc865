// fake_redis/rand48.h
//
// Redis's rand48 (rand.c), the generator behind a script's math.random: the
// 48-bit linear congruential generator of lrand48, starting from the default
// seed, returning the top 31 bits. One per server, as Redis 7 has one per
// process: it is not reseeded per script, only by math.randomseed, and a
// restart puts it back to its start state.

#ifndef TURNSTILE_FAKE_REDIS_RAND48_H_
#define TURNSTILE_FAKE_REDIS_RAND48_H_

#include <cstdint>
#include <limits>

namespace turnstile::sim {

class Rand48 {
 public:
  static constexpr std::int32_t kMax = std::numeric_limits<std::int32_t>::max();
  void seed(std::int32_t value) {
    state_ = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(value)) << 16) | kLowSeedBits;
  }
  std::int32_t next() {
    state_ = (kMultiplier * state_ + kIncrement) & kMask;
    return static_cast<std::int32_t>(state_ >> 17);
  }
  void reset() { state_ = kDefaultState; }

 private:
  static constexpr std::uint64_t kMultiplier = 0x5DEECE66Dull;
  static constexpr std::uint64_t kIncrement = 0xB;
  static constexpr std::uint64_t kMask = (std::uint64_t{1} << 48) - 1;
  static constexpr std::uint64_t kLowSeedBits = 0x330E;
  static constexpr std::uint64_t kDefaultState = 0x1234ABCD330Eull;
  std::uint64_t state_ = kDefaultState;
};

}  // namespace turnstile::sim

#endif  // TURNSTILE_FAKE_REDIS_RAND48_H_
