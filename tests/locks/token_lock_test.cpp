// The plain token lock (SET NX PX): the same contract as the other flavors,
// minus reentrancy.

#include <gtest/gtest.h>

#include <mutex>

#include "lock_environment.h"
#include "turnstile/errors.h"
#include "turnstile/lock.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class TokenLockTest : public LockTest {};

TEST_P(TokenLockTest, StoresARandomTokenWithALease) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    TokenLock lock = client.token_lock("token");
    ASSERT_TRUE(lock.try_lock({.lease = seconds(10)}));
    EXPECT_EQ(inspect({"TYPE", "token"}), Reply::status("string"));
    const std::string token = inspect({"GET", "token"}).as_string();
    EXPECT_TRUE(token.starts_with(client.id() + ":")) << token;
    EXPECT_EQ(token.size(), client.id().size() + 1 + 32);
    const std::int64_t pttl = inspect({"PTTL", "token"}).as_integer();
    EXPECT_GT(pttl, 9'000);
    EXPECT_LE(pttl, 10'000);
    EXPECT_EQ(lock.hold_count(), 1);
    lock.unlock();
    EXPECT_EQ(inspect({"EXISTS", "token"}), Reply::integer(0));
  });
  env().run();
}

TEST_P(TokenLockTest, IsNotReentrant) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    TokenLock lock = client.token_lock("once");
    lock.lock();
    EXPECT_THROW(lock.lock(), InvalidArgumentError);
    EXPECT_THROW((void)lock.try_lock(), InvalidArgumentError);
    lock.unlock();
    EXPECT_THROW(lock.unlock(), NotOwnerError);
  });
  env().run();
}

TEST_P(TokenLockTest, ReleaseNeverDeletesAnotherHoldersLock) {
  Client& alice = env().add_client();
  Client& bob = env().add_client();
  env().spawn(alice, [&] {
    TokenLock alices = alice.token_lock("shared");
    ASSERT_TRUE(alices.try_lock({.lease = milliseconds(50)}));
    // Bob takes it once Alice's lease ran out; Alice's late unlock must
    // leave Bob's lock alone.
    alice.runtime().sleep_for(milliseconds(120));
    EXPECT_NO_THROW(alices.unlock());  // lost: told, unlock() returns (lock.h)
  });
  env().spawn(bob, [&] {
    TokenLock bobs = bob.token_lock("shared");
    bob.runtime().sleep_for(milliseconds(10));  // Alice first
    EXPECT_TRUE(bobs.try_lock({.wait = seconds(2), .lease = seconds(10)}));
    bob.runtime().sleep_for(milliseconds(200));
    EXPECT_TRUE(bobs.is_held_by_current_thread());
    bobs.unlock();
  });
  env().run();
}

TEST_P(TokenLockTest, WaitersTakeTurns) {
  expect_mutual_exclusion(env(), /*clients=*/3, /*rounds=*/5,
                          [](Client& client) { return std::make_unique<TokenLock>(client.token_lock("turns")); });
  EXPECT_EQ(inspect({"EXISTS", "turns"}), Reply::integer(0));
}

TEST_P(TokenLockTest, WrongTypeIsRefused) {
  Client& client = env().add_client();
  inspect({"HSET", "a-hash", "field", "value"});
  env().spawn(client, [&] {
    TokenLock lock = client.token_lock("a-hash");
    EXPECT_THROW((void)lock.try_lock({.wait = seconds(1), .lease = std::nullopt}), WrongTypeError);
    EXPECT_THROW(lock.force_unlock(), WrongTypeError);
  });
  env().run();
  EXPECT_EQ(inspect({"HGET", "a-hash", "field"}), Reply::bulk("value"));
}

TEST_P(TokenLockTest, WatchdogKeepsItPastItsLease) {
  Client& client =
      env().add_client(ClientOptions{.lease = milliseconds(150), .key_prefix = "", .on_background_error = nullptr});
  env().spawn(client, [&] {
    TokenLock lock = client.token_lock("renewed");
    lock.lock();
    client.runtime().sleep_for(milliseconds(500));
    EXPECT_TRUE(lock.is_held_by_current_thread());
    lock.unlock();
  });
  env().run();
}

INSTANTIATE_TEST_SUITE_P(Environments, TokenLockTest, ::testing::ValuesIn(lock_environments()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace turnstile::testing
