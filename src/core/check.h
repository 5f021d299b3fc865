// core/check.h
//
// Invariants that stay on in release builds. The build uses
// b_ndebug=if-release, so `assert` vanishes there; TURNSTILE_CHECK does not:
//
//   TURNSTILE_CHECK(queue->credits.size() <= queue->waiters.size());
//   TURNSTILE_CHECK_MSG(open_count_ > 0, "a connection comes back to the pool it left");
//   TURNSTILE_UNREACHABLE("every flavor has a row");   // after an exhaustive switch
//
// On failure it prints "file:line: invariant failed: <expression> (<message>)"
// to stderr and calls std::abort(). A check states what can only be false
// through a bug of turnstile: never bad user input, a server's reply or a
// lost connection (those are typed errors, turnstile/errors.h). Keep the
// expression cheap (a comparison, a size, a pointer): it runs every time.
//
// Header-only and internal: both libraries and the CLI may include it
// (tools/check_layers.py); it is not installed and exports nothing.

#ifndef TURNSTILE_CORE_CHECK_H_
#define TURNSTILE_CORE_CHECK_H_

#include <cstdio>
#include <cstdlib>

namespace turnstile::detail {

[[noreturn, gnu::cold, gnu::noinline, gnu::visibility("hidden")]] inline void check_failed(
    const char* file, int line, const char* expression, const char* message) noexcept {
  if (message == nullptr) {
    std::fprintf(stderr, "%s:%d: invariant failed: %s\n", file, line, expression);
  } else {
    std::fprintf(stderr, "%s:%d: invariant failed: %s (%s)\n", file, line, expression, message);
  }
  std::fflush(stderr);
  std::abort();
}

}  // namespace turnstile::detail

#define TURNSTILE_CHECK(condition)                   \
  (__builtin_expect(static_cast<bool>(condition), 1) \
       ? static_cast<void>(0)                        \
       : ::turnstile::detail::check_failed(__FILE__, __LINE__, #condition, nullptr))

#define TURNSTILE_CHECK_MSG(condition, message)      \
  (__builtin_expect(static_cast<bool>(condition), 1) \
       ? static_cast<void>(0)                        \
       : ::turnstile::detail::check_failed(__FILE__, __LINE__, #condition, message))

#define TURNSTILE_UNREACHABLE(message) ::turnstile::detail::check_failed(__FILE__, __LINE__, "unreachable", message)

#endif  // TURNSTILE_CORE_CHECK_H_
