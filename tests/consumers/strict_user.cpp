// A library user's translation unit compiled as strictly as users compile
// theirs (tests/consumers/check_strict_headers.py: -Wall -Wextra -Wpedantic
// -Werror, GCC and clang, the project's own warning exceptions left out):
// every public header is included before this file, and the calls below
// take the forms whose defaults live in the headers (a default argument,
// a convenience overload, a template instantiated in the user's code), so
// a warning those produce is a warning every user gets. Every options
// struct is also made with designated initializers naming one member, as
// the docs write them: GCC 12's -Wmissing-field-initializers (in -Wextra)
// warns about each member left out that has no default member
// initializer. Never run.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
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

// The Asio forms as docs/locks.md and turnstile/asio.h write them: the
// options as a temporary inside the co_await (safe under GCC 12 for
// asio::AcquireOptions), the error_code and exception_ptr forms, a release.
// Where Boost.Asio has co_await (Debian 12's Boost 1.74 gives it to GCC,
// not to clang over libstdc++).
#if defined(BOOST_ASIO_HAS_CO_AWAIT)
[[maybe_unused]] boost::asio::awaitable<void> acquires_from_a_coroutine(turnstile::ReentrantLock& lock,
                                                                        const std::stop_source& shutdown) {
  using namespace std::chrono_literals;
  boost::system::error_code error;
  turnstile::LockHold held = co_await turnstile::asio::async_acquire(
      lock, {.wait = 5s, .stop = &shutdown}, boost::asio::redirect_error(boost::asio::use_awaitable, error));
  if (error) co_return;
  co_await turnstile::asio::async_release(std::move(held), boost::asio::use_awaitable);
  const turnstile::AcquireOptions wait_forever{.wait = turnstile::kWaitForever};
  turnstile::LockHold again =
      co_await turnstile::asio::async_acquire_hold(lock, wait_forever, boost::asio::use_awaitable);
  again.release();
}
#endif

[[maybe_unused]] void names_one_member_of_each_options_struct(turnstile::Client& client) {
  using namespace std::chrono_literals;
  turnstile::ReentrantLock lock = client.lock("strict:options");
  (void)lock.try_lock({.wait = 3s});
  (void)lock.try_lock(turnstile::AcquireOptions{.lease = 10s});
  [[maybe_unused]] const turnstile::ClientOptions client_options{.key_prefix = "app:"};
  [[maybe_unused]] const turnstile::asio::AcquireOptions asio_options{.wait = 3s};
  [[maybe_unused]] const turnstile::FairLockOptions fair{.waiter_timeout = 5s};
  [[maybe_unused]] const turnstile::EvalOptions eval{.send_within = 1s};
  [[maybe_unused]] const turnstile::SubscribeOptions subscribe{.confirm_within = 1s};
  [[maybe_unused]] const turnstile::InspectOptions inspect{.flavor = turnstile::Flavor::reentrant};
  [[maybe_unused]] const turnstile::ListOptions list{.pattern = "app:*"};
  [[maybe_unused]] const turnstile::LockRule rule{.pattern = "app:*"};
  [[maybe_unused]] const turnstile::TlsOptions tls{.ca_file = "/etc/ca.pem"};
  [[maybe_unused]] const turnstile::RedisEndpoint endpoint{.host = "127.0.0.1"};
  [[maybe_unused]] const turnstile::RedisOptions redis{.host = "127.0.0.1"};
  [[maybe_unused]] const turnstile::ScanOptions scan{.match = "app:*"};
  [[maybe_unused]] const turnstile::sim::WorldOptions world{.servers = 2};
  [[maybe_unused]] const turnstile::sim::FaultPlan faults{.crash_per_client_hour = 1};
  [[maybe_unused]] const turnstile::sim::ServerOptions server{.clock_drift_ppm = 100};
  [[maybe_unused]] const turnstile::sim::WatchOptions watch{.liveness_bound = 30s};
  [[maybe_unused]] const turnstile::sim::ScenarioOptions scenario{.scenario = "contention"};
  [[maybe_unused]] const turnstile::sim::SwarmOptions swarm{.max_duration = std::chrono::minutes(1)};
}

}  // namespace

int main() { return 0; }
