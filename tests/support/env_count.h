// support/env_count.h
//
// Counts a long run can raise from the environment (the differential and
// model suites: how many commands, sequences, steps), and seeds to replay.
// Header-only: it reports a bad value with ADD_FAILURE, so it is compiled
// by the GoogleTest executables only.

#ifndef TURNSTILE_TESTS_SUPPORT_ENV_COUNT_H_
#define TURNSTILE_TESTS_SUPPORT_ENV_COUNT_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>

namespace turnstile::testing {

// The environment variable `name` if it is a positive integer (at most
// 100,000,000), else `fallback` (a bad value also fails the test).
inline int count_from_environment(const char* name, int fallback) {
  constexpr long kMaxCount = 100'000'000;
  const char* configured = std::getenv(name);
  if (configured == nullptr) return fallback;
  char* end = nullptr;
  const long count = std::strtol(configured, &end, 10);
  if (end == configured || *end != '\0' || count <= 0 || count > kMaxCount) {
    ADD_FAILURE() << name << "=" << configured << " is not a count from 1 to " << kMaxCount;
    return fallback;
  }
  return static_cast<int>(count);
}

// The environment variable `name` as a seed (any unsigned integer), else
// `fallback` (a bad value also fails the test).
inline std::uint64_t seed_from_environment(const char* name, std::uint64_t fallback) {
  const char* configured = std::getenv(name);
  if (configured == nullptr) return fallback;
  char* end = nullptr;
  const unsigned long long seed = std::strtoull(configured, &end, 10);
  if (end == configured || *end != '\0') {
    ADD_FAILURE() << name << "=" << configured << " is not a seed (an unsigned integer)";
    return fallback;
  }
  return seed;
}

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_SUPPORT_ENV_COUNT_H_
