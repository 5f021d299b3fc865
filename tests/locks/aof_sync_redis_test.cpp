// Durable grants (RedisOptions::aof_sync) against a real redis-server: on
// Redis 7.2 or later with appendonly yes each grant is followed by WAITAOF
// 1 0 and the holder proceeds once the master has fsynced it; a server
// that cannot confirm the fsync (older than 7.2, appendonly no) grants
// nothing and says why. Which of these the server on PATH shows depends
// on its release: `./dev test servers` runs this against each.
// (tests/sim/aof_sync_test.cpp shows, in virtual time, what the fsync
// buys: the grant survives a machine crash.)

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "redis_server.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/lock.h"
#include "turnstile/redis_backend.h"

namespace turnstile {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;
using testing::RedisServer;

constexpr char kName[] = "durable";

// Whether `server` runs Redis 7.2 or later (Valkey reports the Redis
// release it matches as redis_version), which has WAITAOF.
bool has_waitaof(const RedisServer& server) {
  const std::string info = server.command({"INFO", "server"});
  const std::size_t at = info.find("redis_version:");
  int major = 0;
  int minor = 0;
  if (at == std::string::npos || std::sscanf(info.c_str() + at, "redis_version:%d.%d", &major, &minor) != 2) {
    ADD_FAILURE() << "no redis_version in " << info;
  }
  return major > 7 || (major == 7 && minor >= 2);
}

std::unique_ptr<Client> durable_client(const RedisServer& server) {
  return std::make_unique<Client>(make_redis_backend(RedisOptions::from_url(server.url() + "?aof_sync=on")));
}

// The WAITAOF calls the server has answered so far.
int waitaof_calls(const RedisServer& server) {
  const std::string stats = server.command({"INFO", "commandstats"});
  const std::size_t at = stats.find("cmdstat_waitaof:calls=");
  int calls = 0;
  if (at != std::string::npos) (void)std::sscanf(stats.c_str() + at, "cmdstat_waitaof:calls=%d", &calls);
  return calls;
}

TEST(AofSyncRedisTest, AGrantIsFsyncedBeforeItsHolderProceeds) {
  RedisServer server({"--appendonly", "yes", "--appendfsync", "always"});
  const std::unique_ptr<Client> client = durable_client(server);
  ReentrantLock lock = client->lock(kName);
  if (!has_waitaof(server)) {
    try {
      lock.lock(seconds(10));
      ADD_FAILURE() << "granted on a server without WAITAOF";
    } catch (const UnsafeServerError& refused) {
      EXPECT_THAT(refused.what(), HasSubstr("no WAITAOF"));
    }
    EXPECT_EQ(server.command({"EXISTS", kName}), "(integer) 0");
    return;
  }
  lock.lock(seconds(10));  // the first also loads the script: its NOSCRIPT try was followed by one too
  EXPECT_TRUE(lock.is_held_by_current_thread());
  const int after_first = waitaof_calls(server);
  EXPECT_GE(after_first, 1);
  lock.unlock();
  EXPECT_EQ(waitaof_calls(server), after_first) << "a release waits for no fsync";
  lock.lock(seconds(10));
  EXPECT_EQ(waitaof_calls(server), after_first + 1);
  lock.unlock();
  EXPECT_EQ(client->metrics().unreplicated_grants, 0u);
}

TEST(AofSyncRedisTest, AServerWithoutAppendonlyGrantsNothingAndSaysWhy) {
  RedisServer server;  // --appendonly no
  const std::unique_ptr<Client> client = durable_client(server);
  ReentrantLock lock = client->lock(kName);
  try {
    (void)lock.try_lock({.wait = seconds(2), .lease = seconds(10)});
    ADD_FAILURE() << "granted without an append-only file";
  } catch (const UnsafeServerError& refused) {
    EXPECT_THAT(refused.what(), HasSubstr(has_waitaof(server) ? "appendonly no" : "no WAITAOF"));
    EXPECT_THAT(refused.what(), HasSubstr(server.url().substr(std::string("redis://").size())));
  }
  EXPECT_EQ(server.command({"EXISTS", kName}), "(integer) 0");
  EXPECT_EQ(waitaof_calls(server), 0);
}

}  // namespace
}  // namespace turnstile
