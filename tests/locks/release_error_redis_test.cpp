// A release the server refuses, against a real redis-server. A Redis at its
// maxmemory (noeviction, the policy locks need) refuses a script's writes
// that may grow memory (HINCRBY, SET, ZADD: OOM, not a transient error) but
// still runs PEXPIRE, the renewal of a reentrant lock. An unlock refused so
// must still stop the renewals: the caller let the lock go, and a watchdog
// that kept renewing it would hold it for as long as the process lives. The
// hold stays believed until its deadline (a retried unlock works) and its
// lease frees it on the server.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "redis_server.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/lock.h"
#include "turnstile/redis_backend.h"

namespace turnstile {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::RedisServer;

// Bounds every wait on a loaded machine; reaching it fails.
constexpr auto kPatience = seconds(30);
// Short, so that a lease left alone runs out quickly; the watchdog renews
// every third of it.
constexpr auto kWatchdogTimeout = milliseconds(900);

bool eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

class ReleaseErrorTest : public ::testing::Test {
 protected:
  void TearDown() override { server_.command({"CONFIG", "SET", "maxmemory", "0"}); }

  ClientOptions options() {
    ClientOptions options;
    options.lease = kWatchdogTimeout;
    options.on_background_error = [this](std::exception_ptr error) {
      try {
        std::rethrow_exception(error);
      } catch (const OutOfMemoryError&) {
        out_of_memory_.fetch_add(1);
      } catch (...) {
        other_errors_.fetch_add(1);
      }
    };
    return options;
  }

  std::shared_ptr<Backend> backend() { return make_redis_backend(RedisOptions::from_url(server_.url())); }

  void fill_memory() { server_.command({"CONFIG", "SET", "maxmemory", "1"}); }

  bool exists(const std::string& key) { return server_.command({"EXISTS", key}) == "(integer) 1"; }

  RedisServer server_;
  std::atomic<int> out_of_memory_{0};
  std::atomic<int> other_errors_{0};
};

TEST_F(ReleaseErrorTest, AnUnlockRefusedForMemoryStopsTheRenewals) {
  Client client(backend(), options());
  ReentrantLock kept = client.lock("kept");
  ReentrantLock released = client.lock("released");
  kept.lock();
  // Held twice: the first unlock's first write is HINCRBY, which a full
  // server refuses (a last unlock DELs first, and a script that has written
  // may go on).
  released.lock();
  released.lock();
  fill_memory();
  released.unlock();  // quiet: the refusal goes to the background handler
  EXPECT_EQ(out_of_memory_.load(), 1);
  // Left to its lease, it ends within it; renewed, it would live on.
  EXPECT_TRUE(eventually([&] { return !exists("released"); })) << "the watchdog still renews a released lock";
  // The renewals do run on the full server: the lock nobody released lives
  // on through two more leases.
  std::this_thread::sleep_for(2 * kWatchdogTimeout);
  EXPECT_TRUE(exists("kept"));
  EXPECT_TRUE(kept.is_held_by_current_thread());
  EXPECT_EQ(other_errors_.load(), 0);
  server_.command({"CONFIG", "SET", "maxmemory", "0"});
  kept.unlock();
}

}  // namespace
}  // namespace turnstile
