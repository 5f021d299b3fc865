// locks/engine/random_hex.h
//
// Random identifiers (lock tokens, unlock request ids) from the runtime's
// randomness, so they are seeded in simulation.

#ifndef TURNSTILE_LOCKS_ENGINE_RANDOM_HEX_H_
#define TURNSTILE_LOCKS_ENGINE_RANDOM_HEX_H_

#include <cstdint>
#include <string>

#include "turnstile/runtime.h"

namespace turnstile::detail {

// Writes `value` as 16 lower-case hex digits at `at`.
inline void write_hex64(char* at, std::uint64_t value) {
  constexpr char kDigits[] = "0123456789abcdef";
  for (int i = 15; i >= 0; --i) {
    at[i] = kDigits[value & 0xf];
    value >>= 4;
  }
}

// 32 lower-case hex digits (128 bits), like Redisson's permit and request
// ids: two draws, the second one's digits first. (The order is fixed here:
// it was left to the compiler's order of evaluating arguments, which differ,
// so one seed made other ids under clang than under GCC.)
inline std::string random_hex128(Runtime& runtime) {
  const std::uint64_t first = runtime.random_u64();
  const std::uint64_t second = runtime.random_u64();
  std::string text(32, '0');
  write_hex64(text.data(), second);
  write_hex64(text.data() + 16, first);
  return text;
}

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_ENGINE_RANDOM_HEX_H_
