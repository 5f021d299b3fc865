// locks/engine/random_hex.h
//
// Random identifiers (lock tokens, unlock request ids) from the runtime's
// randomness, so they are seeded in simulation.

#ifndef TURNSTILE_LOCKS_ENGINE_RANDOM_HEX_H_
#define TURNSTILE_LOCKS_ENGINE_RANDOM_HEX_H_

#include <cstdio>
#include <string>

#include "turnstile/runtime.h"

namespace turnstile::detail {

// 32 lower-case hex digits (128 bits), like Redisson's permit and request ids.
inline std::string random_hex128(Runtime& runtime) {
  char text[33];
  std::snprintf(text, sizeof(text), "%016llx%016llx", static_cast<unsigned long long>(runtime.random_u64()),
                static_cast<unsigned long long>(runtime.random_u64()));
  return text;
}

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_ENGINE_RANDOM_HEX_H_
