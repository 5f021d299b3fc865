// An order service on one Boost.Asio thread: every request is a coroutine
// that takes the order's lock as a hold (turnstile/asio.h), reads the
// order's count, waits for "the database" (a timer: the thread is free
// meanwhile, and other requests run), writes the count back and gives the
// hold back. Without the lock, requests for the same order interleave at
// the timer and updates are lost; with it, none is.
//
//   turnstile-asio-demo redis://127.0.0.1:6379 [REQUESTS] [ORDERS]
//
// Exits 0 if every order's count equals the requests it was sent and every
// order's fencing tokens rose; 1 otherwise; 64 for bad arguments; 69 if
// Redis cannot be reached.

// First: Boost 1.74's awaitable.hpp uses std::exchange without including it.
#include <utility>
// clang-format off
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
// clang-format on
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "turnstile/asio.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/redis_backend.h"

namespace {

namespace asio = boost::asio;

struct Order {
  std::int64_t count = 0;       // the "database" row
  std::int64_t expected = 0;    // requests sent for it
  std::int64_t last_token = 0;  // the latest fencing token seen
  bool tokens_rose = true;      // every token above the one before
};

// One request: lock the order, read, wait for the database, write, unlock.
asio::awaitable<void> handle_request(turnstile::Client& client, Order& order, std::string order_id) {
  turnstile::ReentrantLock lock = client.fenced_lock("demo:order:" + order_id);
  const turnstile::AcquireOptions wait_for_it{.wait = turnstile::kWaitForever};
  turnstile::LockHold hold = co_await turnstile::asio::async_acquire_hold(lock, wait_for_it, asio::use_awaitable);
  const std::int64_t token = hold.fencing_token().value_or(0);
  if (token <= order.last_token) order.tokens_rose = false;
  order.last_token = token;

  const std::int64_t read = order.count;
  asio::steady_timer database(co_await asio::this_coro::executor, std::chrono::milliseconds(1));
  co_await database.async_wait(asio::use_awaitable);
  order.count = read + 1;

  co_await turnstile::asio::async_release(std::move(hold), asio::use_awaitable);
}

int parse_count(const char* text, int fallback) {
  if (text == nullptr) return fallback;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 1 || value > 100'000) return -1;
  return static_cast<int>(value);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: turnstile-asio-demo REDIS_URL [REQUESTS] [ORDERS]\n");
    return 64;
  }
  const int requests = parse_count(argc > 2 ? argv[2] : nullptr, 400);
  const int orders = parse_count(argc > 3 ? argv[3] : nullptr, 8);
  if (requests < 0 || orders < 0) {
    std::fprintf(stderr, "turnstile-asio-demo: REQUESTS and ORDERS are whole numbers from 1 to 100000\n");
    return 64;
  }
  try {
    turnstile::Client client(turnstile::make_redis_backend(turnstile::RedisOptions::from_url(argv[1])));
    (void)client.backend().command({"PING"});  // unreachable: exit 69 now, not after the waits give up
    std::map<std::string, Order> book;
    asio::io_context io;
    int failed = 0;
    for (int i = 0; i < requests; ++i) {
      const std::string order_id = std::to_string(i % orders);
      Order& order = book[order_id];
      ++order.expected;
      asio::co_spawn(io, handle_request(client, order, order_id), [&](std::exception_ptr error) {
        if (!error || ++failed > 1) return;  // the first failure is told
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "turnstile-asio-demo: a request failed: %s\n", e.what());
        }
      });
    }
    const auto started = std::chrono::steady_clock::now();
    io.run();  // this thread only: every request waits here without blocking it
    const auto took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

    bool ok = failed == 0;
    for (const auto& [id, order] : book) {
      if (order.count != order.expected || !order.tokens_rose) {
        ok = false;
        std::fprintf(stderr, "order %s: %lld of %lld updates kept, tokens %s\n", id.c_str(),
                     static_cast<long long>(order.count), static_cast<long long>(order.expected),
                     order.tokens_rose ? "rose" : "did not rise");
      }
    }
    std::printf("%d requests over %d orders on one io_context thread in %.2f s: %s\n", requests, orders, took,
                ok ? "no update lost" : "UPDATES LOST");
    return ok ? 0 : 1;
  } catch (const turnstile::ConnectionError& error) {
    std::fprintf(stderr, "turnstile-asio-demo: %s\n", error.what());
    return 69;
  } catch (const turnstile::InvalidArgumentError& error) {
    std::fprintf(stderr, "turnstile-asio-demo: %s\n", error.what());
    return 64;
  }
}
