// The expiry instant, decided one way everywhere (issue #34): a deadline
// equal to now is expired. The crash-safe semaphore's permit expiries
// (lua/permit_semaphore.lua: reclaim, release, lease update;
// lua/permit_semaphore_renew.lua), the fair queue's head eviction
// (lua/lib/fair_queue.lua), a hold's held() at its local deadline
// (tests/locks/lease_deadline_test.cpp) and the simulator's checkers all
// read it so. A Redis key's own expiry is Redis's (alive through its
// PEXPIREAT millisecond, gone after); the checkers keep that apart by
// recording every grant's last live millisecond (Grant::deadline_ms).
//
// Each script runs on the fake with `now` given exactly: at the deadline
// and at the millisecond before. Either comparison mutant (`<=` turned into
// `<`, or `>` into `>=`) fails one of the two.

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fake_redis/keyspace.h"
#include "fake_redis/server.h"
#include "lua_scripts.h"
#include "turnstile/key_layout.h"
#include "turnstile/reply.h"
#include "turnstile/script.h"
#include "turnstile/semaphore.h"
#include "turnstile/sim/checkers.h"
#include "turnstile/sim/world.h"

namespace turnstile::sim {
namespace {

constexpr std::int64_t kDeadline = 1'900'000'000'000;  // Unix ms, as the callers send it
constexpr char kHolder[] = "0123456789abcdef";         // a permit id: 16 raw bytes

class ExpiryBoundaryTest : public ::testing::Test {
 protected:
  ExpiryBoundaryTest() : world_(34), session_(world_.server(0).connect()) {}

  Reply run(const std::vector<std::string>& argv) { return world_.server(0).execute(*session_, argv); }
  Reply eval(const Script& script, const std::vector<std::string>& keys, const std::vector<std::string>& args) {
    std::vector<std::string> argv{"EVAL", std::string(script.source), std::to_string(keys.size())};
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv);
  }
  std::vector<std::int64_t> integers(const Reply& reply) {
    std::vector<std::int64_t> values;
    for (const Reply& value : reply.as_array()) values.push_back(value.as_integer());
    return values;
  }

  // A crash-safe semaphore "sem" with no permit free and one held until kDeadline.
  KeyLayout one_permit_held_until_the_deadline() {
    const KeyLayout layout = key_layout(Flavor::semaphore, "sem");
    (void)run({"DEL", layout.name, layout.permit_timeouts});
    (void)run({"SET", layout.name, "0"});
    (void)run({"ZADD", layout.permit_timeouts, std::to_string(kDeadline), kHolder});
    return layout;
  }
  Reply permit_call(const KeyLayout& layout, std::int64_t now, std::vector<std::string> operation,
                    const std::string& reclaim_limit = "100") {
    std::vector<std::string> args{std::to_string(now), "PUBLISH", reclaim_limit};
    args.insert(args.end(), operation.begin(), operation.end());
    return eval(scripts::permit_semaphore, {layout.name, layout.permit_timeouts, layout.channel}, args);
  }

  World world_;
  std::unique_ptr<Session> session_;
};

TEST_F(ExpiryBoundaryTest, APermitIsReclaimedAtItsExpiryNotBefore) {
  const std::vector<std::string> acquire{"acquire", "1", std::to_string(kDeadline + 30'000),
                                         std::to_string(PermitSemaphore::kNeverExpiresMs), "fedcba9876543210"};
  KeyLayout layout = one_permit_held_until_the_deadline();
  EXPECT_EQ(integers(permit_call(layout, kDeadline - 1, acquire)), (std::vector<std::int64_t>{0, 1}));
  layout = one_permit_held_until_the_deadline();
  EXPECT_EQ(integers(permit_call(layout, kDeadline, acquire)), (std::vector<std::int64_t>{1, 0}));
}

TEST_F(ExpiryBoundaryTest, APermitIsHeldUntilTheMillisecondBeforeItsExpiry) {
  // Release: held the millisecond before, not at the expiry.
  KeyLayout layout = one_permit_held_until_the_deadline();
  EXPECT_EQ(integers(permit_call(layout, kDeadline - 1, {"release", kHolder})), (std::vector<std::int64_t>{1, 1}));
  layout = one_permit_held_until_the_deadline();
  EXPECT_EQ(integers(permit_call(layout, kDeadline, {"release", kHolder})), (std::vector<std::int64_t>{0, 1}));
  // Past the reclaim limit an expired permit is still listed: the held
  // check itself decides, likewise.
  layout = one_permit_held_until_the_deadline();
  (void)run({"ZADD", layout.permit_timeouts, std::to_string(kDeadline - 5), "expired earlier!"});
  EXPECT_EQ(integers(permit_call(layout, kDeadline, {"release", kHolder}, "1")), (std::vector<std::int64_t>{0, 1}));
  // extend(): likewise.
  const std::string later = std::to_string(kDeadline + 30'000);
  layout = one_permit_held_until_the_deadline();
  EXPECT_EQ(permit_call(layout, kDeadline - 1, {"update_lease", kHolder, later}).as_integer(), 1);
  layout = one_permit_held_until_the_deadline();
  EXPECT_EQ(permit_call(layout, kDeadline, {"update_lease", kHolder, later}).as_integer(), 0);
  // The watchdog's renewal: likewise.
  for (const std::int64_t now : {kDeadline - 1, kDeadline}) {
    layout = one_permit_held_until_the_deadline();
    const Reply renewed =
        eval(scripts::permit_semaphore_renew, {layout.permit_timeouts}, {"30000", std::to_string(now), kHolder});
    EXPECT_EQ(integers(renewed), (std::vector<std::int64_t>{now < kDeadline ? 1 : 0})) << "now " << now;
  }
}

// A fair queue's head whose deadline is now is dead: evicted, and a free
// lock goes to the next comer. The millisecond before, it keeps its place.
// Both kinds of head: a turnstile waiter (its liveness deadline) and a
// Redisson one (its chained deadline only).
TEST_F(ExpiryBoundaryTest, AFairQueueHeadIsEvictedAtItsDeadlineNotBefore) {
  const KeyLayout layout = key_layout(Flavor::fair, "fair");
  for (const bool turnstile_waiter : {true, false}) {
    for (const std::int64_t now : {kDeadline - 1, kDeadline}) {
      SCOPED_TRACE(std::string(turnstile_waiter ? "turnstile" : "Redisson") + " head, now " + std::to_string(now));
      (void)run({"DEL", layout.name, layout.fair_queue, layout.fair_timeouts, layout.fair_waiters});
      (void)run({"RPUSH", layout.fair_queue, "head:1"});
      (void)run({"ZADD", layout.fair_timeouts, std::to_string(kDeadline), "head:1"});
      if (turnstile_waiter) (void)run({"ZADD", layout.fair_waiters, std::to_string(kDeadline), "head:1"});
      const Reply reply =
          eval(scripts::fair_lock_acquire,
               {layout.name, layout.fair_queue, layout.fair_timeouts, layout.channel, layout.fair_waiters},
               {"30000", "comer:1", "5000", std::to_string(now), "0", "PUBLISH", "0", "10", "5000"});
      const bool evicted = now >= kDeadline;
      EXPECT_EQ(integers(reply)[0], evicted ? 1 : 0);
      EXPECT_EQ(run({"LLEN", layout.fair_queue}).as_integer(), evicted ? 0 : 1);
    }
  }
}

// The checkers hold a permit granted until its expiry's previous
// millisecond (its last live one), as the script does; a key's grant lasts
// through its PEXPIREAT millisecond, as Redis keeps it.
TEST_F(ExpiryBoundaryTest, CheckersRecordTheLastLiveMillisecondOfEachGrant) {
  Server& server = world_.server(0);
  const std::int64_t unix_offset_ms = server.clock().unix_time_ms() - server.keyspace().now_ms();
  const std::int64_t expiry_unix_ms = server.clock().unix_time_ms() + 5'000;
  const KeyLayout permits = key_layout(Flavor::semaphore, "sem");
  (void)run({"SET", permits.name, "0"});
  (void)run({"ZADD", permits.permit_timeouts, std::to_string(expiry_unix_ms), kHolder});
  const ResourceState permit_state = permit_semaphore_reader(permits.name)(server);
  ASSERT_EQ(permit_state.grants.size(), 1u);
  EXPECT_EQ(permit_state.grants[0].deadline_ms, expiry_unix_ms - unix_offset_ms - 1);

  (void)run({"SET", "token", "holder", "PX", "5000"});
  const ResourceState key_state = string_lock_reader("token")(server);
  ASSERT_EQ(key_state.grants.size(), 1u);
  EXPECT_EQ(key_state.grants[0].deadline_ms, server.keyspace().now_ms() + 5'000);
}

}  // namespace
}  // namespace turnstile::sim
