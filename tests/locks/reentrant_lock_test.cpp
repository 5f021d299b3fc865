// The reentrant lock's contract, run on the fake in virtual time and against
// a real redis-server (tests that need hours of waiting or crashes run in
// simulation only).

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <regex>

#include "lock_environment.h"
#include "lua_scripts.h"
#include "turnstile/errors.h"
#include "turnstile/fencing.h"
#include "turnstile/lock.h"

namespace turnstile::testing {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

class ReentrantLockTest : public LockTest {};

TEST_P(ReentrantLockTest, ReentrancyCountsHolds) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("reentrant");
    lock.lock();
    lock.lock();
    EXPECT_EQ(lock.hold_count(), 2);
    EXPECT_TRUE(lock.is_held_by_current_thread());
    lock.unlock();
    EXPECT_EQ(lock.hold_count(), 1);
    EXPECT_TRUE(lock.is_locked());
    lock.unlock();
    EXPECT_EQ(lock.hold_count(), 0);
    EXPECT_FALSE(lock.is_locked());
    EXPECT_FALSE(lock.remaining_lease().has_value());
  });
  env().run();
  EXPECT_EQ(inspect({"EXISTS", "reentrant"}), Reply::integer(0));
}

TEST_P(ReentrantLockTest, KeyLayoutMatchesRedisson) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("layout");
    lock.lock();
    EXPECT_EQ(inspect({"TYPE", "layout"}), Reply::status("hash"));
    const Reply fields = inspect({"HGETALL", "layout"});
    ASSERT_EQ(fields.as_array().size(), 2u);
    const std::string& field = fields.as_array()[0].as_string();
    EXPECT_EQ(field, lock.current_owner());
    EXPECT_TRUE(std::regex_match(
        field, std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}:[0-9]+")))
        << field;
    EXPECT_EQ(fields.as_array()[1], Reply::bulk("1"));
    const std::int64_t pttl = inspect({"PTTL", "layout"}).as_integer();
    EXPECT_GT(pttl, 29'000);
    EXPECT_LE(pttl, 30'000);
    lock.unlock();
  });
  env().run();
}

TEST_P(ReentrantLockTest, UnlockPublishesZeroOnRedissonChannel) {
  Client& holder = env().add_client();
  std::vector<std::string> messages;
  std::mutex messages_mutex;
  Subscription subscription =
      env().inspector().subscribe("redisson_lock__channel:{channel-test}", [&](const PubSubEvent& event) {
        std::lock_guard guard(messages_mutex);
        if (event.kind == PubSubEvent::Kind::message) messages.emplace_back(event.payload);
      });
  env().spawn(holder, [&] {
    ReentrantLock lock = holder.lock("channel-test");
    lock.lock();
    lock.unlock();
    // Against a real server the message arrives on another thread.
    for (int i = 0; i < 200; ++i) {
      {
        std::lock_guard guard(messages_mutex);
        if (!messages.empty()) break;
      }
      holder.runtime().sleep_for(milliseconds(5));
    }
  });
  env().run();
  std::lock_guard guard(messages_mutex);
  EXPECT_EQ(messages, std::vector<std::string>{"0"});
}

TEST_P(ReentrantLockTest, NameWithBracesKeepsItsOwnHashTag) {
  EXPECT_EQ(side_key("redisson_lock__channel", "plain"), "redisson_lock__channel:{plain}");
  EXPECT_EQ(side_key("redisson_lock__channel", "{order}:42"), "redisson_lock__channel:{order}:42");
}

TEST_P(ReentrantLockTest, UnlockByAnotherOwnerThrows) {
  Client& alice = env().add_client();
  Client& bob = env().add_client();
  env().spawn(alice, [&] {
    ReentrantLock lock = alice.lock("owned");
    lock.lock();
    ReentrantLock bobs_view = bob.lock("owned");
    EXPECT_THROW(bobs_view.unlock(), NotOwnerError);
    EXPECT_FALSE(bobs_view.is_held_by_current_thread());
    EXPECT_TRUE(bobs_view.is_locked());
    EXPECT_EQ(lock.hold_count(), 1);
    lock.unlock();
    EXPECT_THROW(lock.unlock(), NotOwnerError);
  });
  env().run();
}

TEST_P(ReentrantLockTest, AnotherClientWaitsUntilRelease) {
  Client& alice = env().add_client();
  Client& bob = env().add_client();
  ReentrantLock alices = alice.lock("contended");
  ReentrantLock bobs = bob.lock("contended");
  std::atomic<bool> bob_acquired = false;  // set on one client's thread, read on another's
  env().spawn(alice, [&] {
    alices.lock();
    alice.runtime().sleep_for(milliseconds(200));
    EXPECT_FALSE(bob_acquired.load());
    alices.unlock();
  });
  env().spawn(bob, [&] {
    bob.runtime().sleep_for(milliseconds(50));
    EXPECT_FALSE(bobs.try_lock());
    bobs.lock();
    bob_acquired = true;
    bobs.unlock();
  });
  env().run();
  EXPECT_TRUE(bob_acquired.load());
}

TEST_P(ReentrantLockTest, FixedLeaseSetsTheTtl) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("hour");
    lock.lock(hours(1));
    const auto ttl = lock.remaining_lease();
    ASSERT_TRUE(ttl.has_value());
    // The holder's own belief: the lease less its margin (1 % + 2 ms).
    EXPECT_GT(*ttl, milliseconds(3'563'000));
    EXPECT_LE(*ttl, milliseconds(3'563'998));
    lock.unlock();
  });
  env().run();
}

TEST_P(ReentrantLockTest, WrongTypeIsRefusedAndNothingIsOverwritten) {
  Client& client = env().add_client();
  inspect({"SET", "not-a-lock", "precious"});
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("not-a-lock");
    EXPECT_THROW((void)lock.try_lock(), WrongTypeError);
    EXPECT_THROW((void)lock.is_locked(), WrongTypeError);
    EXPECT_THROW(lock.force_unlock(), WrongTypeError);
  });
  env().run();
  EXPECT_EQ(inspect({"GET", "not-a-lock"}), Reply::bulk("precious"));
}

// Force-unlocking deletes only a key shaped like a lock of the flavor
// asked for (lua/lib/lock_shape.lua): a user's hash of counts, a hash of
// owner ids without an expiry, a plain string are refused and kept.
TEST_P(ReentrantLockTest, ForceUnlockRefusesWhatIsNotALock) {
  const std::string owner = "0c9a1e0e-7d52-4e44-9a8e-0123456789ab:1";
  inspect({"HSET", "counts", "field", "5"});
  inspect({"PEXPIRE", "counts", "60000"});
  inspect({"HSET", "no-expiry", owner, "1"});
  inspect({"HSET", "zero-count", owner, "0"});
  inspect({"PEXPIRE", "zero-count", "60000"});
  inspect({"SET", "plain", "hello", "PX", "60000"});
  inspect({"SET", "unexpiring-token", owner.substr(0, 37) + std::string(32, 'a')});
  inspect({"HSET", "redisson", owner, "2"});  // a real Redisson lock: still recognised
  inspect({"PEXPIRE", "redisson", "60000"});
  Client& client = env().add_client();
  env().spawn(client, [&] {
    for (const char* name : {"counts", "no-expiry", "zero-count"}) {
      EXPECT_THROW(client.lock(name).force_unlock(), WrongTypeError) << name;
      EXPECT_THROW(client.fair_lock(name).force_unlock(), WrongTypeError) << name;
    }
    EXPECT_THROW(client.token_lock("plain").force_unlock(), WrongTypeError);
    EXPECT_THROW(client.token_lock("unexpiring-token").force_unlock(), WrongTypeError);
    EXPECT_TRUE(client.lock("redisson").force_unlock());
  });
  env().run();
  EXPECT_EQ(inspect({"HGET", "counts", "field"}), Reply::bulk("5"));
  EXPECT_EQ(inspect({"HGET", "no-expiry", owner}), Reply::bulk("1"));
  EXPECT_EQ(inspect({"HGET", "zero-count", owner}), Reply::bulk("0"));
  EXPECT_EQ(inspect({"GET", "plain"}), Reply::bulk("hello"));
  EXPECT_EQ(inspect({"EXISTS", "unexpiring-token"}), Reply::integer(1));
  EXPECT_EQ(inspect({"EXISTS", "redisson"}), Reply::integer(0));
}

// Acquiring refuses a key that is not a lock of the flavor (WRONGTYPE)
// rather than waiting for it to expire; a real Redisson lock hash held by
// someone else is still a lock to wait for.
TEST_P(ReentrantLockTest, AcquireRefusesWhatIsNotALock) {
  const std::string other_owner = "0c9a1e0e-7d52-4e44-9a8e-0123456789ab:7";
  inspect({"HSET", "user-counts", "field", "5"});
  inspect({"SET", "user-string", "hello"});
  inspect({"SET", "user-number", "5", "PX", "60000"});
  inspect({"HSET", "held-by-redisson", other_owner, "1"});
  inspect({"PEXPIRE", "held-by-redisson", "60000"});
  Client& client = env().add_client();
  env().spawn(client, [&] {
    const AcquireOptions once{.wait = Duration::zero(), .lease = seconds(10)};
    EXPECT_THROW((void)client.lock("user-counts").try_lock(once), WrongTypeError);
    EXPECT_THROW((void)client.fenced_lock("user-counts").try_lock(once), WrongTypeError);
    EXPECT_THROW((void)client.fair_lock("user-counts").try_lock(once), WrongTypeError);
    for (const char* name : {"user-string", "user-number", "user-counts"}) {
      EXPECT_THROW((void)client.token_lock(name).try_lock(once), WrongTypeError) << name;
    }
    EXPECT_FALSE(client.lock("held-by-redisson").try_lock(once));
    EXPECT_FALSE(client.fair_lock("held-by-redisson").try_lock(once));
  });
  env().run();
  EXPECT_EQ(inspect({"HGET", "user-counts", "field"}), Reply::bulk("5"));
  EXPECT_EQ(inspect({"GET", "user-string"}), Reply::bulk("hello"));
  EXPECT_EQ(inspect({"HGET", "held-by-redisson", other_owner}), Reply::bulk("1"));
}

// Issue #18: by Redisson's {name} rule "{x}" would share every side key
// of "x" (fair queue, fencing counter, "{x}:timeout"): refused, for every
// flavor; so is a name longer than kMaxNameBytes.
TEST_P(ReentrantLockTest, NamesThatWouldShareSideKeysAreRefused) {
  Client& client = env().add_client();
  EXPECT_THROW(client.lock("{x}"), InvalidArgumentError);
  EXPECT_THROW(client.fenced_lock("{x}"), InvalidArgumentError);
  EXPECT_THROW(client.fair_lock("{x}"), InvalidArgumentError);
  EXPECT_THROW(client.token_lock("{x}"), InvalidArgumentError);
  EXPECT_THROW(client.counting_semaphore("{x}"), InvalidArgumentError);
  EXPECT_THROW(client.permit_semaphore("{x}"), InvalidArgumentError);
  EXPECT_THROW(client.permit_semaphore("{a}b}"), InvalidArgumentError);  // "a}b" would be its twin
  EXPECT_NO_THROW(client.lock("x{x}"));
  EXPECT_NO_THROW(client.permit_semaphore("{x}:y"));
  EXPECT_NO_THROW(client.lock(std::string(kMaxNameBytes, 'n')));
  EXPECT_THROW(client.lock(std::string(kMaxNameBytes + 1, 'n')), InvalidArgumentError);
  EXPECT_THROW(client.counting_semaphore(std::string(kMaxNameBytes + 1, 'n')), InvalidArgumentError);
}

TEST_P(ReentrantLockTest, BadArgumentsAreTypedErrors) {
  Client& client = env().add_client();
  EXPECT_THROW(client.lock(""), InvalidArgumentError);
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("args");
    EXPECT_THROW(lock.lock(Duration::zero()), InvalidArgumentError);
    EXPECT_THROW((void)lock.try_lock({.wait = seconds(1), .lease = milliseconds(-5)}), InvalidArgumentError);
    // A negative wait is zero: one attempt.
    EXPECT_TRUE(lock.try_lock({.wait = seconds(-1)}));
    lock.unlock();
  });
  env().run();
}

TEST_P(ReentrantLockTest, WorksWithStandardLockTypes) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("std");
    {
      std::scoped_lock hold(lock);
      EXPECT_TRUE(lock.is_held_by_current_thread());
    }
    EXPECT_FALSE(lock.is_locked());
    {
      std::unique_lock hold(lock, std::try_to_lock);
      EXPECT_TRUE(hold.owns_lock());
    }
    {
      std::unique_lock hold(lock, std::defer_lock);
      EXPECT_TRUE(hold.try_lock_for(milliseconds(10)));
    }
    {
      const std::scoped_lock hold(lock);
      EXPECT_EQ(lock.hold_count(), 1);
    }
    EXPECT_FALSE(lock.is_locked());
  });
  env().run();
}

TEST_P(ReentrantLockTest, ForceUnlockFreesAndTellsTheHolder) {
  // A short watchdog so the real environment finishes quickly: renewals at
  // 100 ms, 200 ms, ...; the admin strikes at 50 ms.
  Client& holder =
      env().add_client(ClientOptions{.lease = milliseconds(300), .key_prefix = "", .on_background_error = nullptr});
  Client& admin = env().add_client();
  std::vector<LockLostReason> lost;
  std::mutex lost_mutex;
  env().spawn(holder, [&] {
    ReentrantLock lock = holder.lock("forced");
    lock.set_lost_handler([&](const LockLost& event) {
      EXPECT_EQ(event.lock_name, "forced");
      std::lock_guard guard(lost_mutex);
      lost.push_back(event.reason);
    });
    lock.lock();
    holder.runtime().sleep_for(milliseconds(250));
    EXPECT_FALSE(lock.is_held_by_current_thread());
    EXPECT_NO_THROW(lock.unlock());  // lost: told, unlock() returns (lock.h)
  });
  env().spawn(admin, [&] {
    admin.runtime().sleep_for(milliseconds(50));
    EXPECT_TRUE(admin.lock("forced").force_unlock());
    EXPECT_FALSE(admin.lock("forced").force_unlock());
  });
  env().run();
  std::lock_guard guard(lost_mutex);
  EXPECT_EQ(lost, std::vector<LockLostReason>{LockLostReason::gone});
}

TEST_P(ReentrantLockTest, FencingTokensStrictlyIncreaseAcrossHolders) {
  expect_increasing_fencing_tokens(env(), "redisson_lock_token:{fenced}", [](Client& client) {
    return std::make_unique<ReentrantLock>(client.fenced_lock("fenced"));
  });
}

// A counter found stale (a node restarted from an older append-only file,
// a replica promoted without the latest increments: the real-server
// histories found a Sentinel master handing out lower tokens so) or
// missing: the next token is still above every one handed out, floored by
// the server's clock (lua/lib/fencing_counter.lua).
TEST_P(ReentrantLockTest, TokensKeepRisingOverAStaleOrMissingCounter) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    ReentrantLock lock = client.fenced_lock("stale");
    std::int64_t last = 0;
    for (const char* restored : {"5", "", "1"}) {
      lock.lock();
      const std::optional<std::int64_t> token = lock.fencing_token();
      ASSERT_TRUE(token.has_value());
      EXPECT_GT(*token, last) << "after the counter was set to '" << restored << "'";
      last = *token;
      lock.unlock();
      if (*restored != '\0') {
        (void)inspect({"SET", "redisson_lock_token:{stale}", restored});
      } else {
        (void)inspect({"DEL", "redisson_lock_token:{stale}"});
      }
      client.runtime().sleep_for(std::chrono::milliseconds(1));
    }
    lock.lock();
    EXPECT_GT(lock.fencing_token().value_or(0), last);
    lock.unlock();
  });
  env().run();
}

// Someone else's value at the counter is refused and kept as it was.
TEST_P(ReentrantLockTest, ACounterThatIsNotAnIntegerIsRefusedAndKept) {
  Client& client = env().add_client();
  (void)inspect({"SET", "redisson_lock_token:{odd}", "not a number", "PX", "60000"});
  env().spawn(client, [&] {
    ReentrantLock lock = client.fenced_lock("odd");
    EXPECT_ANY_THROW(lock.lock());
    EXPECT_FALSE(lock.is_locked());
  });
  env().run();
  EXPECT_EQ(inspect({"GET", "redisson_lock_token:{odd}"}), Reply::bulk("not a number"));
  EXPECT_GT(inspect({"PTTL", "redisson_lock_token:{odd}"}).as_integer(), 50'000) << "its TTL kept";
}

TEST_P(ReentrantLockTest, FencedWriteRejectsStaleTokens) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    EXPECT_TRUE(fenced_set(client.backend(), "resource", 5, "five"));
    EXPECT_TRUE(fenced_set(client.backend(), "resource", 5, "five again"));
    EXPECT_FALSE(fenced_set(client.backend(), "resource", 4, "stale"));
    EXPECT_TRUE(fenced_set(client.backend(), "resource", 6, "six"));
  });
  env().run();
  EXPECT_EQ(inspect({"GET", "resource"}), Reply::bulk("six"));
  EXPECT_EQ(inspect({"GET", fence_key("resource")}), Reply::bulk("6"));
}

TEST_P(ReentrantLockTest, RetriedUnlockDoesNotReleaseTwice) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("latched");
    lock.lock();
    lock.lock();
    // The same unlock request sent twice (its first reply lost): the latch
    // answers the second with the first result.
    const std::vector<std::string> keys = {"latched", "redisson_lock__channel:{latched}",
                                           "redisson_unlock_latch:{latched}:request-1"};
    const std::vector<std::string> args = {"0", "30000", lock.current_owner(), "60000",
                                           std::string(client.backend().publish_command())};
    EXPECT_EQ(client.backend().eval(scripts::reentrant_lock_unlock, keys, args), Reply::integer(0));
    EXPECT_EQ(client.backend().eval(scripts::reentrant_lock_unlock, keys, args), Reply::integer(0));
    EXPECT_EQ(lock.hold_count(), 1);
    lock.unlock();
    EXPECT_FALSE(lock.is_locked());
  });
  env().run();
}

TEST_P(ReentrantLockTest, AsyncFormsActForTheCallingTask) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("async");
    Future<void> locked = lock.lock_async();
    locked.get();
    EXPECT_TRUE(lock.is_held_by_current_thread());
    Future<bool> again = lock.try_lock_async({.wait = milliseconds(10)});
    EXPECT_TRUE(again.get());
    EXPECT_EQ(lock.hold_count(), 2);
    lock.unlock_async().get();
    lock.unlock_async().get();
    EXPECT_FALSE(lock.is_locked());
    Future<void> not_mine = lock.unlock_async();
    EXPECT_THROW(not_mine.get(), NotOwnerError);
  });
  env().run();
}

TEST_P(ReentrantLockTest, MutualExclusionUnderContention) {
  expect_mutual_exclusion(env(), /*clients=*/4, /*rounds=*/10,
                          [](Client& client) { return std::make_unique<ReentrantLock>(client.lock("counter")); });
  EXPECT_EQ(inspect({"EXISTS", "counter"}), Reply::integer(0));
}

INSTANTIATE_TEST_SUITE_P(Environments, ReentrantLockTest, ::testing::ValuesIn(lock_environments()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace turnstile::testing
