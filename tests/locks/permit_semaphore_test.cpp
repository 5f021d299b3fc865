// The crash-safe semaphore's contract, run on the fake in virtual time and
// against a real redis-server (with the key layout checked there); crashes
// and hours of renewal run in simulation only.

#include <gtest/gtest.h>

#include <mutex>
#include <regex>

#include "lock_environment.h"
#include "semaphore_test_support.h"
#include "turnstile/errors.h"
#include "turnstile/semaphore.h"

namespace turnstile::testing {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

class PermitSemaphoreTest : public LockTest {};

// A client whose watchdog renews every 100 ms, so tests of renewal finish
// quickly against a real server too.
Client& short_watchdog_client(LockEnvironment& environment, std::function<void(std::exception_ptr)> on_error) {
  return environment.add_client(
      ClientOptions{.lease = milliseconds(300), .key_prefix = "", .on_background_error = std::move(on_error)});
}

TEST_P(PermitSemaphoreTest, KeyLayoutMatchesRedisson) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    PermitSemaphore semaphore = client.permit_semaphore("jobs");
    EXPECT_EQ(semaphore.timeout_key(), "{jobs}:timeout");
    EXPECT_EQ(semaphore.channel(), "redisson_sc:{jobs}");
    EXPECT_EQ(client.permit_semaphore("{shop}:jobs").timeout_key(), "{shop}:jobs:timeout");
    ASSERT_TRUE(semaphore.try_set_permits(3));
    const std::int64_t before_ms = client.runtime().wall_clock_ms();
    const PermitId permit = semaphore.acquire(seconds(10));
    const std::int64_t after_ms = client.runtime().wall_clock_ms();
    EXPECT_TRUE(std::regex_match(permit.hex(), std::regex("[0-9a-f]{32}"))) << permit.hex();
    EXPECT_EQ(inspect({"TYPE", "jobs"}), Reply::status("string"));
    EXPECT_EQ(inspect({"GET", "jobs"}), Reply::bulk("2"));
    EXPECT_EQ(inspect({"TYPE", "{jobs}:timeout"}), Reply::status("zset"));
    const std::int64_t expiry_ms = std::stoll(inspect({"ZSCORE", "{jobs}:timeout", permit.bytes()}).as_string());
    EXPECT_GE(expiry_ms, before_ms + 10'000);
    EXPECT_LE(expiry_ms, after_ms + 10'000);
    semaphore.release(permit);
    EXPECT_EQ(inspect({"GET", "jobs"}), Reply::bulk("3"));
    EXPECT_EQ(inspect({"EXISTS", "{jobs}:timeout"}), Reply::integer(0));
  });
  env().run();
}

TEST_P(PermitSemaphoreTest, CountsAndStatus) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    PermitSemaphore semaphore = client.permit_semaphore("counted");
    EXPECT_EQ(semaphore.total_permits(), 0);
    ASSERT_TRUE(semaphore.try_set_permits(4));
    const std::vector<PermitId> leased = semaphore.acquire_many(2, seconds(60));
    const PermitId watched = semaphore.acquire();
    EXPECT_EQ(semaphore.available_permits(), 1);
    EXPECT_EQ(semaphore.acquired_permits(), 3);
    EXPECT_EQ(semaphore.total_permits(), 4);
    const PermitSemaphoreStatus status = semaphore.status();
    EXPECT_EQ(status.available, 1);
    EXPECT_EQ(status.held, 3);
    ASSERT_EQ(status.permits.size(), 3u);
    // Earliest expiry first: the watchdog's 30 s lease before the 60 s ones.
    EXPECT_EQ(status.permits[0].id, watched);
    ASSERT_TRUE(status.permits[0].remaining.has_value());
    EXPECT_GT(*status.permits[0].remaining, seconds(25));
    EXPECT_LE(*status.permits[0].remaining, seconds(30));
    EXPECT_GT(*status.permits[2].remaining, seconds(55));
    semaphore.release(leased);
    semaphore.release(watched);
    EXPECT_EQ(semaphore.available_permits(), 4);
    EXPECT_EQ(semaphore.acquired_permits(), 0);
  });
  env().run();
}

// An operator's reset (`turnstile semaphore --reset`): the count and every
// held permit go; a holder's release then finds its permit gone.
TEST_P(PermitSemaphoreTest, ResetDeletesTheCountAndHeldPermits) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    PermitSemaphore semaphore = client.permit_semaphore("reset-me");
    ASSERT_TRUE(semaphore.try_set_permits(3));
    const PermitId held = semaphore.acquire(seconds(60));
    EXPECT_TRUE(semaphore.reset());
    EXPECT_EQ(semaphore.total_permits(), 0);
    EXPECT_FALSE(semaphore.try_release(held));
    EXPECT_FALSE(semaphore.reset());
    EXPECT_TRUE(semaphore.try_set_permits(2));  // as if never set
  });
  env().run();
  EXPECT_EQ(inspect({"EXISTS", "{reset-me}:timeout"}), Reply::integer(0));
  EXPECT_EQ(inspect({"GET", "reset-me"}), Reply::bulk("2"));
}

TEST_P(PermitSemaphoreTest, CallersAgreeOnTheTotal) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    PermitSemaphore semaphore = client.permit_semaphore("agreed");
    EXPECT_EQ(semaphore.try_set_permits_or_get(4).set, true);
    const PermitId held = semaphore.acquire();
    const PermitTotal second = semaphore.try_set_permits_or_get(5);
    EXPECT_FALSE(second.set);
    EXPECT_EQ(second.total, 4);  // available 3 + held 1
    EXPECT_FALSE(semaphore.try_set_permits(4));
    semaphore.set_permits(2);
    EXPECT_EQ(semaphore.available_permits(), 1);
    EXPECT_EQ(semaphore.total_permits(), 2);
    semaphore.set_permits(0);
    EXPECT_EQ(semaphore.available_permits(), -1);
    EXPECT_FALSE(semaphore.try_acquire().has_value());
    semaphore.release(held);
    EXPECT_EQ(semaphore.total_permits(), 0);
  });
  env().run();
}

TEST_P(PermitSemaphoreTest, AcquireZeroSucceedsAtOnce) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    PermitSemaphore semaphore = client.permit_semaphore("zero");
    EXPECT_TRUE(semaphore.acquire_many(0).empty());
    const auto none = semaphore.try_acquire_many(0);
    ASSERT_TRUE(none.has_value());
    EXPECT_TRUE(none->empty());
    semaphore.release(std::span<const PermitId>());
  });
  env().run();
  EXPECT_EQ(inspect({"EXISTS", "zero"}), Reply::integer(0));
}

TEST_P(PermitSemaphoreTest, BadArgumentsAreTypedErrors) {
  Client& client = env().add_client();
  EXPECT_THROW(client.permit_semaphore(""), InvalidArgumentError);
  EXPECT_THROW(PermitId("not-an-id"), InvalidArgumentError);
  EXPECT_THROW(PermitId("0123456789ABCDEF0123456789abcdef"), InvalidArgumentError);
  EXPECT_THROW(PermitId(std::string(15, 'x')), InvalidArgumentError);
  // 16 raw bytes are the stored form of the same id.
  const PermitId from_bytes(std::string("\x01\x23\x45\x67\x89\xab\xcd\xef\x00\x11\x22\x33\x44\x55\x66\xff", 16));
  EXPECT_EQ(from_bytes.hex(), "0123456789abcdef00112233445566ff");
  EXPECT_EQ(PermitId(from_bytes.hex()).bytes(), from_bytes.bytes());
  env().spawn(client, [&] {
    PermitSemaphore semaphore = client.permit_semaphore("args");
    ASSERT_TRUE(semaphore.try_set_permits(2));
    EXPECT_THROW((void)semaphore.try_set_permits(-1), InvalidArgumentError);
    EXPECT_THROW(semaphore.set_permits(-1), InvalidArgumentError);
    EXPECT_THROW((void)semaphore.acquire_many(-1), InvalidArgumentError);
    EXPECT_THROW((void)semaphore.acquire_many(PermitSemaphore::kMaxPermitsPerCall + 1), InvalidArgumentError);
    EXPECT_THROW((void)semaphore.acquire(Duration::zero()), InvalidArgumentError);
    EXPECT_THROW((void)semaphore.try_acquire({.wait = seconds(1), .lease = milliseconds(-1)}), InvalidArgumentError);
    const PermitId permit = semaphore.acquire();
    EXPECT_THROW((void)semaphore.update_lease(permit, Duration::zero()), InvalidArgumentError);
    const std::vector<PermitId> twice = {permit, permit};
    EXPECT_THROW(semaphore.release(twice), InvalidArgumentError);
    EXPECT_EQ(semaphore.acquired_permits(), 1);
    semaphore.release(permit);
  });
  env().run();
}

TEST_P(PermitSemaphoreTest, WrongTypeIsRefusedAndNothingIsOverwritten) {
  Client& client = env().add_client();
  inspect({"HSET", "hash-count", "field", "value"});
  inspect({"SET", "word-count", "precious"});
  inspect({"SET", "{string-timeout}:timeout", "precious"});
  env().spawn(client, [&] {
    for (const char* name : {"hash-count", "word-count", "string-timeout"}) {
      PermitSemaphore semaphore = client.permit_semaphore(name);
      EXPECT_THROW((void)semaphore.try_set_permits(1), WrongTypeError) << name;
      EXPECT_THROW((void)semaphore.try_acquire({.wait = milliseconds(10), .lease = std::nullopt}), WrongTypeError)
          << name;
      EXPECT_THROW((void)semaphore.status(), WrongTypeError) << name;
      EXPECT_THROW(semaphore.set_permits(3), WrongTypeError) << name;
    }
  });
  env().run();
  EXPECT_EQ(inspect({"HGET", "hash-count", "field"}), Reply::bulk("value"));
  EXPECT_EQ(inspect({"GET", "word-count"}), Reply::bulk("precious"));
  EXPECT_EQ(inspect({"GET", "{string-timeout}:timeout"}), Reply::bulk("precious"));
  EXPECT_EQ(inspect({"EXISTS", "string-timeout"}), Reply::integer(0));
}

TEST_P(PermitSemaphoreTest, ReleasingAListWithOneBadIdReleasesNothing) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    PermitSemaphore semaphore = client.permit_semaphore("listed");
    ASSERT_TRUE(semaphore.try_set_permits(3));
    const std::vector<PermitId> held = semaphore.acquire_many(2);
    const PermitId unknown("00000000000000000000000000000000");
    const std::vector<PermitId> with_bad = {held[0], unknown, held[1]};
    EXPECT_FALSE(semaphore.try_release(with_bad));
    EXPECT_EQ(semaphore.acquired_permits(), 2);
    EXPECT_EQ(semaphore.available_permits(), 1);
    try {
      semaphore.release(with_bad);
      ADD_FAILURE() << "released a list with an unknown id";
    } catch (const PermitNotHeldError& error) {
      EXPECT_NE(std::string(error.what()).find(unknown.hex()), std::string::npos) << error.what();
    }
    EXPECT_EQ(semaphore.acquired_permits(), 2);
    semaphore.release(held);
    EXPECT_EQ(semaphore.available_permits(), 3);
    EXPECT_FALSE(semaphore.try_release(held[0]));
    EXPECT_THROW(semaphore.release(held[1]), PermitNotHeldError);
    EXPECT_EQ(semaphore.available_permits(), 3);
  });
  env().run();
}

TEST_P(PermitSemaphoreTest, AnExpiredIdCannotBeReleasedOrRenewed) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    PermitSemaphore semaphore = client.permit_semaphore("expiring");
    ASSERT_TRUE(semaphore.try_set_permits(1));
    const PermitId permit = semaphore.acquire(milliseconds(50));
    EXPECT_FALSE(semaphore.try_acquire().has_value());
    client.runtime().sleep_for(milliseconds(80));
    EXPECT_FALSE(semaphore.update_lease(permit, seconds(10)));
    EXPECT_FALSE(semaphore.try_release(permit));
    EXPECT_THROW(semaphore.release(permit), PermitNotHeldError);
    // It went back to the pool once, not once per attempt.
    EXPECT_EQ(semaphore.available_permits(), 1);
    EXPECT_EQ(semaphore.acquired_permits(), 0);
  });
  env().run();
}

TEST_P(PermitSemaphoreTest, UpdateLeaseSetsANewExpiry) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    PermitSemaphore semaphore = client.permit_semaphore("updated");
    ASSERT_TRUE(semaphore.try_set_permits(1));
    const PermitId permit = semaphore.acquire();
    EXPECT_TRUE(semaphore.update_lease(permit, hours(2)));
    const PermitSemaphoreStatus status = semaphore.status();
    ASSERT_EQ(status.permits.size(), 1u);
    EXPECT_GT(*status.permits[0].remaining, minutes(119));
    semaphore.release(permit);
  });
  env().run();
}

TEST_P(PermitSemaphoreTest, AWaiterWakesOnARelease) {
  Client& holder = env().add_client();
  Client& waiter = env().add_client();
  SharedInstant released_at;
  env().spawn(holder, [&] {
    PermitSemaphore semaphore = holder.permit_semaphore("handoff");
    ASSERT_TRUE(semaphore.try_set_permits(1));
    const PermitId permit = semaphore.acquire();
    holder.runtime().sleep_for(milliseconds(100));
    released_at.set(holder.runtime().now());
    semaphore.release(permit);
  });
  env().spawn(waiter, [&] {
    PermitSemaphore semaphore = waiter.permit_semaphore("handoff");
    waiter.runtime().sleep_for(milliseconds(20));
    const std::optional<PermitId> permit = semaphore.try_acquire({.wait = seconds(20), .lease = std::nullopt});
    ASSERT_TRUE(permit.has_value());
    // Woken by the message, not by the holder's 30 s lease running out.
    EXPECT_LT(waiter.runtime().now() - released_at.get(), seconds(2));
    semaphore.release(*permit);
  });
  env().run();
}

TEST_P(PermitSemaphoreTest, AWaiterForTwoIsWokenWhenTheSecondPermitArrives) {
  Client& holder = env().add_client();
  Client& waiter = env().add_client();
  SharedInstant second_released_at;
  env().spawn(holder, [&] {
    PermitSemaphore semaphore = holder.permit_semaphore("pair");
    ASSERT_TRUE(semaphore.try_set_permits(2));
    const std::vector<PermitId> permits = semaphore.acquire_many(2);
    holder.runtime().sleep_for(milliseconds(50));
    semaphore.release(permits[0]);
    holder.runtime().sleep_for(milliseconds(100));
    EXPECT_EQ(semaphore.available_permits(), 1) << "the waiter took a permit before both were free";
    second_released_at.set(holder.runtime().now());
    semaphore.release(permits[1]);
  });
  env().spawn(waiter, [&] {
    PermitSemaphore semaphore = waiter.permit_semaphore("pair");
    waiter.runtime().sleep_for(milliseconds(10));
    const auto permits = semaphore.try_acquire_many(2, {.wait = seconds(20), .lease = seconds(60)});
    ASSERT_TRUE(permits.has_value());
    EXPECT_EQ(permits->size(), 2u);
    EXPECT_LT(waiter.runtime().now() - second_released_at.get(), seconds(2));
    semaphore.release(*permits);
  });
  env().run();
  EXPECT_EQ(inspect({"GET", "pair"}), Reply::bulk("2"));
}

TEST_P(PermitSemaphoreTest, ALostPermitIsReported) {
  std::vector<std::string> background_errors;
  std::mutex errors_mutex;
  Client& holder = short_watchdog_client(env(), [&](std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const LockLostError& lost) {
      std::lock_guard guard(errors_mutex);
      background_errors.emplace_back(lost.what());
    } catch (...) {
    }
  });
  Client& admin = env().add_client();
  std::vector<std::string> lost_ids;
  env().spawn(holder, [&] {
    PermitSemaphore semaphore = holder.permit_semaphore("taken-away");
    semaphore.set_lost_handler([&](const PermitLost& lost) {
      EXPECT_EQ(lost.semaphore_name, "taken-away");
      EXPECT_EQ(lost.reason, LockLostReason::gone);
      std::lock_guard guard(errors_mutex);
      lost_ids.push_back(lost.permit.hex());
    });
    ASSERT_TRUE(semaphore.try_set_permits(1));
    const PermitId permit = semaphore.acquire();
    holder.runtime().sleep_for(milliseconds(250));
    EXPECT_THROW(semaphore.release(permit), PermitNotHeldError);
    std::lock_guard guard(errors_mutex);
    EXPECT_EQ(lost_ids, std::vector<std::string>{permit.hex()});
  });
  env().spawn(admin, [&] {
    admin.runtime().sleep_for(milliseconds(50));
    EXPECT_EQ(admin.backend().command({"DEL", "{taken-away}:timeout"}), Reply::integer(1));
  });
  env().run();
  std::lock_guard guard(errors_mutex);
  ASSERT_EQ(background_errors.size(), 1u);
  EXPECT_NE(background_errors[0].find("taken-away"), std::string::npos) << background_errors[0];
}

TEST_P(PermitSemaphoreTest, RedissonPermitsWithoutALeaseNeverExpire) {
  Client& client = env().add_client();
  // Redisson (since 3.17.0) stores the id's 16 raw bytes and shows the hex.
  const std::string redisson_id = "0123456789abcdef0123456789abcdef";
  inspect({"SET", "mixed", "0"});
  inspect({"ZADD", "{mixed}:timeout", std::to_string(PermitSemaphore::kNeverExpiresMs), PermitId(redisson_id).bytes()});
  env().spawn(client, [&] {
    PermitSemaphore semaphore = client.permit_semaphore("mixed");
    const PermitSemaphoreStatus status = semaphore.status();
    ASSERT_EQ(status.permits.size(), 1u);
    EXPECT_EQ(status.permits[0].id.hex(), redisson_id);
    EXPECT_FALSE(status.permits[0].remaining.has_value());
    EXPECT_FALSE(semaphore.try_acquire({.wait = milliseconds(20), .lease = std::nullopt}).has_value());
    semaphore.release(PermitId(redisson_id));
    EXPECT_TRUE(semaphore.try_acquire({.wait = Duration::zero(), .lease = seconds(5)}).has_value());
  });
  env().run();
}

TEST_P(PermitSemaphoreTest, ExpiredPermitsBeyondOneCallsBoundAreAllReclaimed) {
  Client& client = env().add_client();
  // Expired long ago (score 1), more than one call reclaims.
  const std::int64_t expired = PermitSemaphore::kMaxReclaimedPerCall + 250;
  std::vector<std::string> zadd = {"ZADD", "{crowded}:timeout"};
  for (std::int64_t i = 0; i < expired; ++i) {
    char id[33];
    std::snprintf(id, sizeof id, "%032llx", static_cast<unsigned long long>(i));
    zadd.emplace_back("1");
    zadd.emplace_back(id);
  }
  inspect(zadd);
  inspect({"SET", "crowded", "0"});
  env().spawn(client, [&] {
    PermitSemaphore semaphore = client.permit_semaphore("crowded");
    const auto permits = semaphore.try_acquire_many(2, {.wait = Duration::zero(), .lease = seconds(5)});
    ASSERT_TRUE(permits.has_value());
    EXPECT_EQ(semaphore.acquired_permits(), 2);
    EXPECT_EQ(semaphore.available_permits(), expired - 2);
  });
  env().run();
}

TEST_P(PermitSemaphoreTest, AsyncForms) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    PermitSemaphore semaphore = client.permit_semaphore("async");
    Future<std::optional<PermitId>> waiting = semaphore.try_acquire_async({.wait = seconds(5), .lease = std::nullopt});
    ASSERT_TRUE(semaphore.try_set_permits(1));
    std::optional<PermitId> permit = waiting.get();
    ASSERT_TRUE(permit.has_value());
    semaphore.release_async(*permit).get();
    const PermitId again = semaphore.acquire_async(seconds(5)).get();
    EXPECT_THROW(semaphore.release_async(*permit).get(), PermitNotHeldError);
    semaphore.release(again);
  });
  env().run();
}

TEST_P(PermitSemaphoreTest, HoldersNeverExceedThePermits) {
  inspect({"SET", "pool", "2"});
  expect_at_most_permits_in_use(env(), /*clients=*/5, /*rounds=*/6, /*permits=*/2,
                                [](Client& client, const std::function<void()>& critical_section) {
                                  PermitSemaphore semaphore = client.permit_semaphore("pool");
                                  const PermitId permit = semaphore.acquire();
                                  critical_section();
                                  semaphore.release(permit);
                                });
  EXPECT_EQ(inspect({"GET", "pool"}), Reply::bulk("2"));
  EXPECT_EQ(inspect({"EXISTS", "{pool}:timeout"}), Reply::integer(0));
}

// ---- virtual time only ---------------------------------------------------------

TEST_P(PermitSemaphoreTest, ACrashedHoldersPermitsComeBackAfterTheLease) {
  TURNSTILE_SIM_ONLY();
  Client& doomed = env().add_client();
  Client& survivor = env().add_client();
  env().spawn(doomed, [&] {
    PermitSemaphore semaphore = doomed.permit_semaphore("crashy");
    ASSERT_TRUE(semaphore.try_set_permits(2));
    (void)semaphore.acquire_many(2);
    doomed.runtime().sleep_for(hours(1));  // never finishes: crashed below
  });
  env().spawn(survivor, [&] {
    PermitSemaphore semaphore = survivor.permit_semaphore("crashy");
    // Renewed every 9.899 s (a third of the lease less its margin: 30 s -
    // 1 % - 2 ms), the last time at 89.094 s (expiry 119.093 s, in whole Unix ms); crashed at
    // 95 s.
    survivor.runtime().sleep_for(seconds(95));
    const Instant crashed_at = survivor.runtime().now();
    env().crash(doomed);
    // Nothing is published when a lease runs out: the waiter wakes at the
    // earliest expiry it was told.
    const auto permits = semaphore.try_acquire_many(2, {.wait = minutes(5), .lease = std::nullopt});
    ASSERT_TRUE(permits.has_value());
    const Duration waited = survivor.runtime().now() - crashed_at;
    EXPECT_GE(waited, milliseconds(24'093));
    EXPECT_LE(waited, milliseconds(24'093) + milliseconds(5));
    semaphore.release(*permits);
  });
  env().run();
  EXPECT_EQ(inspect({"GET", "crashy"}), Reply::bulk("2"));
}

TEST_P(PermitSemaphoreTest, ALiveHolderKeepsItsPermitsThroughAnHour) {
  TURNSTILE_SIM_ONLY();
  Client& holder = env().add_client();
  Client& other = env().add_client();
  int lost = 0;
  env().spawn(holder, [&] {
    PermitSemaphore semaphore = holder.permit_semaphore("long-job");
    semaphore.set_lost_handler([&](const PermitLost&) { ++lost; });
    ASSERT_TRUE(semaphore.try_set_permits(1));
    const PermitId permit = semaphore.acquire();
    for (int minute = 0; minute < 60; ++minute) {
      holder.runtime().sleep_for(minutes(1));
      const PermitSemaphoreStatus status = semaphore.status();
      ASSERT_EQ(status.permits.size(), 1u) << "lost after " << minute + 1 << " min";
      EXPECT_GE(*status.permits[0].remaining, seconds(20));
    }
    semaphore.release(permit);
  });
  env().spawn(other, [&] {
    PermitSemaphore semaphore = other.permit_semaphore("long-job");
    other.runtime().sleep_for(seconds(1));
    EXPECT_FALSE(semaphore.try_acquire({.wait = minutes(59), .lease = std::nullopt}).has_value());
  });
  env().run();
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(inspect({"GET", "long-job"}), Reply::bulk("1"));
}

INSTANTIATE_TEST_SUITE_P(Environments, PermitSemaphoreTest, ::testing::ValuesIn(lock_environments()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace turnstile::testing
