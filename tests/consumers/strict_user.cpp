// A library user's translation unit compiled as strictly as users compile
// theirs (tests/consumers/check_strict_headers.py: -Wall -Wextra -Wpedantic
// -Werror, GCC and clang, the project's own warning exceptions left out):
// every public header is included before this file, and the calls below
// take the forms whose defaults live in the headers (a default argument,
// a convenience overload, a template instantiated in the user's code), so
// a warning those produce is a warning every user gets. Never run.

#include <chrono>
#include <cstdio>
#include <stop_token>

namespace {

[[maybe_unused]] void uses_the_header_defaults(turnstile::Client& client) {
  turnstile::ReentrantLock lock = client.lock("strict:lock");
  (void)lock.try_lock_for(std::chrono::seconds(1));
  (void)lock.try_lock_until(std::chrono::steady_clock::now() + std::chrono::seconds(1));
  turnstile::CountingSemaphore semaphore = client.counting_semaphore("strict:semaphore");
  (void)semaphore.try_acquire_for(std::chrono::milliseconds(10));
  (void)client.with_lock("strict:with", [](std::stop_token lost) {
    if (!lost.stop_requested()) std::puts("held");
  });
  turnstile::Future<int> chained =
      lock.try_lock_async({.wait = std::chrono::seconds(1), .lease = std::nullopt, .stop = {}})
          .then([](turnstile::Future<bool> got) { return got.get() ? 1 : 0; });
  (void)chained.get();
  turnstile::LockHold hold;
  (void)hold.held();
}

}  // namespace

int main() { return 0; }
