// RedLock against three real redis-servers (each its own master on a free
// loopback port), with the real runtime and the hiredis backend: a killed
// server does not stop it, and an unlock after a restart without
// persistence does not throw.

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "redis_server.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/multi_lock.h"
#include "turnstile/redis_backend.h"

namespace turnstile::testing {
namespace {

using std::chrono::seconds;

constexpr std::size_t kServers = 3;
constexpr char kName[] = "redlock-real";

class RedLockRedisTest : public ::testing::Test {
 protected:
  RedLockRedisTest() : runtime_(make_real_runtime()) {
    for (std::size_t i = 0; i < kServers; ++i) servers_.push_back(std::make_unique<RedisServer>());
  }

  // One Client per server, sharing the process's runtime.
  std::vector<std::unique_ptr<Client>> make_clients() {
    std::vector<std::unique_ptr<Client>> clients;
    ClientOptions options;
    options.on_background_error = [this](std::exception_ptr error) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        std::lock_guard guard(background_mutex_);
        background_.emplace_back(e.what());
      }
    };
    for (const auto& server : servers_) {
      clients.push_back(
          std::make_unique<Client>(make_redis_backend(RedisOptions::from_url(server->url())), runtime_, options));
    }
    return clients;
  }

  static RedLock make_redlock(std::vector<std::unique_ptr<Client>>& clients) {
    std::vector<std::unique_ptr<Lock>> nodes;
    for (auto& client : clients) nodes.push_back(std::make_unique<ReentrantLock>(client->lock(kName)));
    return RedLock(std::move(nodes));
  }

  std::string exists(std::size_t server) { return servers_[server]->command({"EXISTS", kName}); }

  std::vector<std::string> background() {
    std::lock_guard guard(background_mutex_);
    return background_;
  }

  std::shared_ptr<Runtime> runtime_;
  std::vector<std::unique_ptr<RedisServer>> servers_;
  std::mutex background_mutex_;
  std::vector<std::string> background_;
};

TEST_F(RedLockRedisTest, AcquiresOnAllThenStillWithOneServerKilled) {
  auto clients = make_clients();
  RedLock lock = make_redlock(clients);
  ASSERT_TRUE(lock.try_lock({.wait = seconds(1), .lease = seconds(10)}));
  EXPECT_GT(lock.remaining_validity(), seconds(9));
  for (std::size_t i = 0; i < kServers; ++i) EXPECT_EQ(exists(i), "(integer) 1") << i;
  lock.unlock();
  for (std::size_t i = 0; i < kServers; ++i) EXPECT_EQ(exists(i), "(integer) 0") << i;

  servers_[2]->kill();
  ASSERT_TRUE(lock.try_lock({.wait = seconds(1), .lease = seconds(10)}));
  EXPECT_EQ(exists(0), "(integer) 1");
  EXPECT_EQ(exists(1), "(integer) 1");
  EXPECT_NO_THROW(lock.unlock());
  EXPECT_EQ(exists(0), "(integer) 0");
  EXPECT_EQ(exists(1), "(integer) 0");

  // Two of three down: no majority, and the error says why.
  servers_[1]->kill();
  EXPECT_THROW((void)lock.try_lock({.wait = seconds(1), .lease = seconds(10)}), ConnectionError);
  EXPECT_EQ(exists(0), "(integer) 0");  // the node it got was released
}

TEST_F(RedLockRedisTest, UnlockAfterAServerRestartDoesNotThrow) {
  auto clients = make_clients();
  RedLock lock = make_redlock(clients);
  lock.lock();  // the watchdog lease
  servers_[0]->stop();
  servers_[0]->start();  // same port, empty keyspace
  EXPECT_NO_THROW(lock.unlock());
  EXPECT_FALSE(lock.is_held_by_current_thread());
  EXPECT_EQ(exists(1), "(integer) 0");
  EXPECT_EQ(exists(2), "(integer) 0");
  const std::vector<std::string> reported = background();
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_NE(reported[0].find("node 0"), std::string::npos) << reported[0];
}

TEST_F(RedLockRedisTest, ThreadsOfTwoProcessesNeverHoldItTogether) {
  auto alice_clients = make_clients();
  auto bob_clients = make_clients();
  RedLock alice = make_redlock(alice_clients);
  RedLock bob = make_redlock(bob_clients);
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> rounds{0};
  const auto contend = [&](RedLock& lock) {
    for (int round = 0; round < 20; ++round) {
      if (!lock.try_lock({.wait = seconds(5), .lease = seconds(5)})) continue;
      if (inside.fetch_add(1) != 0) ++overlaps;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      inside.fetch_sub(1);
      ++rounds;
      lock.unlock();
    }
  };
  std::thread first([&] { contend(alice); });
  std::thread second([&] { contend(bob); });
  first.join();
  second.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(rounds.load(), 40);
  for (std::size_t i = 0; i < kServers; ++i) EXPECT_EQ(exists(i), "(integer) 0") << i;
}

}  // namespace
}  // namespace turnstile::testing
