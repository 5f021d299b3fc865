// The Redisson-compatible semaphore's contract, run on the fake in virtual
// time and against a real redis-server (with the key layout checked there).

#include <gtest/gtest.h>

#include <atomic>
#include <algorithm>
#include <mutex>

#include "lock_environment.h"
#include "semaphore_test_support.h"
#include "turnstile/errors.h"
#include "turnstile/semaphore.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class SemaphoreTest : public LockTest {};

TEST_P(SemaphoreTest, TrySetPermitsSetsOnlyOnce) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    CountingSemaphore semaphore = client.counting_semaphore("slots");
    EXPECT_TRUE(semaphore.try_set_permits(3));
    EXPECT_FALSE(semaphore.try_set_permits(5));
    EXPECT_EQ(semaphore.available_permits(), 3);
  });
  env().run();
  // Redisson's layout: an integer string at the name, no expiry.
  EXPECT_EQ(inspect({"TYPE", "slots"}), Reply::status("string"));
  EXPECT_EQ(inspect({"GET", "slots"}), Reply::bulk("3"));
  EXPECT_EQ(inspect({"PTTL", "slots"}), Reply::integer(-1));
}

// An operator's resize and reset (`turnstile semaphore`): set_permits
// replaces the count whatever it was and wakes a waiter; reset deletes it.
TEST_P(SemaphoreTest, SetPermitsResizesAndResetDeletes) {
  Client& client = env().add_client();
  Client& waiter_client = env().add_client();
  std::atomic<bool> waiter_in = false;  // set on one client's thread, read on another's
  env().spawn(waiter_client, [&] {
    CountingSemaphore semaphore = waiter_client.counting_semaphore("resized");
    EXPECT_TRUE(semaphore.try_acquire(2, seconds(30)));
    waiter_in = true;
  });
  env().spawn(client, [&] {
    CountingSemaphore semaphore = client.counting_semaphore("resized");
    EXPECT_EQ(semaphore.set_permits(1), 0);  // absent: 0 before
    client.runtime().sleep_for(milliseconds(200));
    EXPECT_FALSE(waiter_in.load());          // 1 < 2: never in
    EXPECT_EQ(semaphore.set_permits(5), 1);  // wakes the waiter, which takes 2
  });
  env().run();
  EXPECT_TRUE(waiter_in.load());
  EXPECT_EQ(inspect({"GET", "resized"}), Reply::bulk("3"));
  env().spawn(client, [&] {
    CountingSemaphore semaphore = client.counting_semaphore("resized");
    EXPECT_THROW((void)semaphore.set_permits(-1), InvalidArgumentError);
    EXPECT_TRUE(semaphore.reset());
    EXPECT_FALSE(semaphore.reset());
    EXPECT_TRUE(semaphore.try_set_permits(4));  // as if never set
  });
  env().run();
  EXPECT_EQ(inspect({"GET", "resized"}), Reply::bulk("4"));
}

TEST_P(SemaphoreTest, ReleaseOnAMissingKeyCreatesPermits) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    CountingSemaphore semaphore = client.counting_semaphore("fresh");
    EXPECT_EQ(semaphore.available_permits(), 0);
    EXPECT_FALSE(semaphore.try_acquire());
    semaphore.release(2);
    EXPECT_EQ(semaphore.available_permits(), 2);
    EXPECT_TRUE(semaphore.try_acquire(2));
    EXPECT_FALSE(semaphore.try_acquire());
    EXPECT_EQ(semaphore.available_permits(), 0);
  });
  env().run();
  EXPECT_EQ(inspect({"GET", "fresh"}), Reply::bulk("0"));
}

TEST_P(SemaphoreTest, AddPermitsMayGoNegativeAndReleasesPayItBack) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    CountingSemaphore semaphore = client.counting_semaphore("shrunk");
    ASSERT_TRUE(semaphore.try_set_permits(2));
    semaphore.add_permits(-3);
    EXPECT_EQ(semaphore.available_permits(), -1);
    EXPECT_FALSE(semaphore.try_acquire());
    EXPECT_EQ(semaphore.drain_permits(), 0);  // nothing to drain, and no permit created
    EXPECT_EQ(semaphore.available_permits(), -1);
    semaphore.release(2);
    EXPECT_TRUE(semaphore.try_acquire());
    EXPECT_FALSE(semaphore.try_acquire());
    semaphore.add_permits(4);
    EXPECT_EQ(semaphore.available_permits(), 4);
  });
  env().run();
}

TEST_P(SemaphoreTest, DrainTakesEveryAvailablePermit) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    CountingSemaphore semaphore = client.counting_semaphore("drained");
    EXPECT_EQ(semaphore.drain_permits(), 0);
    ASSERT_TRUE(semaphore.try_set_permits(5));
    ASSERT_TRUE(semaphore.try_acquire(2));
    EXPECT_EQ(semaphore.drain_permits(), 3);
    EXPECT_EQ(semaphore.available_permits(), 0);
    EXPECT_EQ(semaphore.drain_permits(), 0);
    EXPECT_FALSE(semaphore.try_acquire());
  });
  env().run();
}

TEST_P(SemaphoreTest, AcquireZeroSucceedsAtOnceWithoutTouchingRedis) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    CountingSemaphore semaphore = client.counting_semaphore("nothing");
    semaphore.acquire(0);
    EXPECT_TRUE(semaphore.try_acquire(0));
    EXPECT_TRUE(semaphore.try_acquire(0, seconds(1)));
    semaphore.release(0);
  });
  env().run();
  EXPECT_EQ(inspect({"EXISTS", "nothing"}), Reply::integer(0));
}

TEST_P(SemaphoreTest, NegativeCountsAreRejected) {
  Client& client = env().add_client();
  EXPECT_THROW(client.counting_semaphore(""), InvalidArgumentError);
  env().spawn(client, [&] {
    CountingSemaphore semaphore = client.counting_semaphore("negative");
    EXPECT_THROW(semaphore.acquire(-1), InvalidArgumentError);
    EXPECT_THROW((void)semaphore.try_acquire(-1), InvalidArgumentError);
    EXPECT_THROW((void)semaphore.try_acquire(-2, seconds(1)), InvalidArgumentError);
    EXPECT_THROW(semaphore.release(-1), InvalidArgumentError);
    EXPECT_THROW((void)semaphore.try_set_permits(-1), InvalidArgumentError);
    EXPECT_THROW((void)semaphore.acquire_async(-1), InvalidArgumentError);
  });
  env().run();
  EXPECT_EQ(inspect({"EXISTS", "negative"}), Reply::integer(0));
}

TEST_P(SemaphoreTest, WrongTypeIsRefusedAndNothingIsOverwritten) {
  Client& client = env().add_client();
  inspect({"HSET", "a-hash", "field", "value"});
  inspect({"SET", "a-word", "precious"});
  env().spawn(client, [&] {
    for (const char* name : {"a-hash", "a-word"}) {
      CountingSemaphore semaphore = client.counting_semaphore(name);
      EXPECT_THROW((void)semaphore.try_set_permits(1), WrongTypeError) << name;
      EXPECT_THROW((void)semaphore.try_acquire(1, milliseconds(10)), WrongTypeError) << name;
      EXPECT_THROW(semaphore.release(), WrongTypeError) << name;
      EXPECT_THROW(semaphore.add_permits(-1), WrongTypeError) << name;
      EXPECT_THROW((void)semaphore.available_permits(), WrongTypeError) << name;
      EXPECT_THROW((void)semaphore.drain_permits(), WrongTypeError) << name;
    }
  });
  env().run();
  EXPECT_EQ(inspect({"HGET", "a-hash", "field"}), Reply::bulk("value"));
  EXPECT_EQ(inspect({"GET", "a-word"}), Reply::bulk("precious"));
}

TEST_P(SemaphoreTest, ReleasePublishesTheNewCountOnRedissonsChannel) {
  Client& client = env().add_client();
  MessageLog log(env().inspector(), "redisson_sc:{announced}");
  env().spawn(client, [&] {
    CountingSemaphore semaphore = client.counting_semaphore("announced");
    EXPECT_EQ(semaphore.channel(), "redisson_sc:{announced}");
    ASSERT_TRUE(semaphore.try_set_permits(1));
    semaphore.release(2);
    semaphore.add_permits(-1);
    log.wait_for(client.runtime(), 3);
  });
  env().run();
  // Signed: turnstile's own releases (a Redisson waiter reads "+3" as 3).
  EXPECT_EQ(log.messages(), (std::vector<std::string>{"+1", "+3", "+2"}));
}

TEST_P(SemaphoreTest, AWaiterWakesOnARelease) {
  Client& holder = env().add_client();
  Client& waiter = env().add_client();
  SharedInstant released_at;
  env().spawn(holder, [&] {
    CountingSemaphore semaphore = holder.counting_semaphore("handoff");
    ASSERT_TRUE(semaphore.try_set_permits(1));
    semaphore.acquire();
    holder.runtime().sleep_for(milliseconds(100));
    released_at.set(holder.runtime().now());
    semaphore.release();
  });
  env().spawn(waiter, [&] {
    CountingSemaphore semaphore = waiter.counting_semaphore("handoff");
    waiter.runtime().sleep_for(milliseconds(20));
    EXPECT_FALSE(semaphore.try_acquire());
    semaphore.acquire();
    const Duration waited_after_release = waiter.runtime().now() - released_at.get();
    EXPECT_GE(waited_after_release, Duration::zero());
    // Woken by the message, not a poll; generous for a loaded machine.
    EXPECT_LT(waited_after_release, seconds(2));
    semaphore.release();
  });
  env().run();
}

// Redisson's reported bug: a waiter for n > 1 permits that receives a
// message carrying fewer than n sits out its whole wait. Ours retries on
// every message and takes both as soon as the second comes.
TEST_P(SemaphoreTest, AWaiterForTwoIsWokenWhenTheSecondPermitArrives) {
  Client& waiter = env().add_client();
  Client& releaser = env().add_client();
  SharedInstant second_released_at;
  bool acquired = false;
  std::mutex mutex;
  env().spawn(waiter, [&] {
    CountingSemaphore semaphore = waiter.counting_semaphore("pair");
    ASSERT_TRUE(semaphore.try_set_permits(0));
    const bool got = semaphore.try_acquire(2, seconds(30));
    std::lock_guard guard(mutex);
    acquired = got;
    EXPECT_TRUE(got);
    EXPECT_LT(waiter.runtime().now() - second_released_at.get(), seconds(2));
  });
  env().spawn(releaser, [&] {
    CountingSemaphore semaphore = releaser.counting_semaphore("pair");
    releaser.runtime().sleep_for(milliseconds(50));
    semaphore.release();
    releaser.runtime().sleep_for(milliseconds(100));
    {
      std::lock_guard guard(mutex);
      EXPECT_FALSE(acquired) << "took two permits when only one was free";
    }
    EXPECT_EQ(semaphore.available_permits(), 1);
    second_released_at.set(releaser.runtime().now());
    semaphore.release();
  });
  env().run();
  EXPECT_TRUE(acquired);
  EXPECT_EQ(inspect({"GET", "pair"}), Reply::bulk("0"));
}

TEST_P(SemaphoreTest, TryAcquireGivesUpAtItsDeadline) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    CountingSemaphore semaphore = client.counting_semaphore("empty");
    const Instant start = client.runtime().now();
    EXPECT_FALSE(semaphore.try_acquire_for(milliseconds(50)));
    EXPECT_GE(client.runtime().now() - start, milliseconds(50));
    EXPECT_FALSE(semaphore.try_acquire_until(client.runtime().now() - seconds(1)));
  });
  env().run();
}

TEST_P(SemaphoreTest, AsyncForms) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    CountingSemaphore semaphore = client.counting_semaphore("async");
    Future<bool> waiting = semaphore.try_acquire_async(2, seconds(5));
    semaphore.release_async(2).get();
    EXPECT_TRUE(waiting.get());
    EXPECT_EQ(semaphore.available_permits(), 0);
    semaphore.release();
    semaphore.acquire_async().get();
    EXPECT_EQ(semaphore.available_permits(), 0);
  });
  env().run();
}

TEST_P(SemaphoreTest, HoldersNeverExceedThePermits) {
  inspect({"SET", "pool", "2"});
  expect_at_most_permits_in_use(env(), /*clients=*/5, /*rounds=*/6, /*permits=*/2,
                                [](Client& client, const std::function<void()>& critical_section) {
                                  CountingSemaphore semaphore = client.counting_semaphore("pool");
                                  semaphore.acquire();
                                  critical_section();
                                  semaphore.release();
                                });
  EXPECT_EQ(inspect({"GET", "pool"}), Reply::bulk("2"));
}

INSTANTIATE_TEST_SUITE_P(Environments, SemaphoreTest, ::testing::ValuesIn(lock_environments()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace turnstile::testing
