// support/sanitized_build.h
//
// Whether this test executable is built with AddressSanitizer or
// ThreadSanitizer (.ci/run's sanitizer builds), where a simulated run
// costs many times what it costs in the normal build. Tests that repeat
// work for its own sake (swarm runs, regression seeds of one scenario)
// do less of it there, through sanitized_or(), and keep every assertion:
// the normal build keeps the full coverage. Header-only.

#ifndef TURNSTILE_TESTS_SUPPORT_SANITIZED_BUILD_H_
#define TURNSTILE_TESTS_SUPPORT_SANITIZED_BUILD_H_

namespace turnstile::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizedBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif
#else
inline constexpr bool kSanitizedBuild = false;
#endif

// `normal` in the normal build, `sanitized` under a sanitizer.
template <class T>
constexpr T sanitized_or(T normal, T sanitized) {
  return kSanitizedBuild ? sanitized : normal;
}

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_SUPPORT_SANITIZED_BUILD_H_
