// fuzz/fuzz_check.h
//
// What the fuzz targets share: the input as text, and fuzz_check(), which
// ends the run with a message when a property of the code under test does
// not hold (libFuzzer then keeps the input as a crash).

#ifndef TURNSTILE_FUZZ_FUZZ_CHECK_H_
#define TURNSTILE_FUZZ_FUZZ_CHECK_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace turnstile::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Aborts with `what` unless `holds`.
inline void fuzz_check(bool holds, const char* what) {
  if (holds) return;
  std::fprintf(stderr, "fuzz property violated: %s\n", what);
  std::abort();
}

}  // namespace turnstile::fuzz

#endif  // TURNSTILE_FUZZ_FUZZ_CHECK_H_
