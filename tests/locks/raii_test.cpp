// Releasing through RAII (issue #31, lock.h "Releasing"): a lock lost while
// held under std::scoped_lock or std::unique_lock never ends the process;
// the loss reaches the lost handler, once; a programmer's error (unlocking
// what this task does not hold) stays loud; release_or_throw() stays strict.
// Bodies run in virtual time and against a real redis-server.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <stop_token>
#include <string>
#include <vector>

#include "lock_environment.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/fair_lock.h"
#include "turnstile/inspection.h"
#include "turnstile/lock.h"

namespace turnstile::testing {
namespace {

class RaiiTest : public LossCountingTest {};

TEST_P(RaiiTest, ALockDeletedUnderScopedLockIsALossNotACrash) {
  Client& client = counting_client();
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("raii:scoped");
    count_losses(lock);
    {
      std::scoped_lock hold(lock);
      // An operator's DEL (or an eviction) while the section runs.
      EXPECT_EQ(inspect({"DEL", "raii:scoped"}), Reply::integer(1));
    }  // unlock() finds it gone: a loss, told now; nothing thrown
    EXPECT_EQ(reasons(), std::vector<LockLostReason>{LockLostReason::gone});
    EXPECT_FALSE(lock.is_held_by_current_thread());
    // The same task takes it again normally.
    EXPECT_TRUE(lock.try_lock());
    lock.unlock();
    EXPECT_FALSE(lock.is_locked());
  });
  env().run();
  EXPECT_EQ(background_errors_.load(), 0);
}

// Whatever call finds a hold gone first (a query, the strict release of a
// thread's hold or of a hold as a value, extend()), the loss is told there,
// the one way: the loss token requested, the lost handler run once; a later
// unlock of it is quiet and tells nothing more.
TEST_P(RaiiTest, ALossFoundByAnyCallIsToldOnceTheSameWay) {
  Client& client = counting_client();
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("raii:found");
    count_losses(lock);
    const auto deleted = [&] { EXPECT_EQ(inspect({"DEL", "raii:found"}), Reply::integer(1)); };

    lock.lock();
    std::stop_token lost = lock.loss_token();
    deleted();
    EXPECT_FALSE(lock.is_held_by_current_thread());  // a query finds it gone
    EXPECT_EQ(reasons().size(), 1u) << "told by the query";
    EXPECT_TRUE(lost.stop_requested());
    lock.unlock();  // owed, quiet
    EXPECT_EQ(lock.hold_count(), 0);
    EXPECT_EQ(reasons().size(), 1u);

    lock.lock();
    lost = lock.loss_token();
    deleted();
    lock.unlock();  // finds it gone: told here, quietly
    EXPECT_EQ(reasons().size(), 2u) << "told by unlock()";
    EXPECT_TRUE(lost.stop_requested());

    LockHold hold = lock.acquire_hold();
    const std::stop_token hold_lost = hold.loss_token();
    deleted();
    EXPECT_THROW(hold.release_or_throw(), NotOwnerError);
    EXPECT_EQ(reasons().size(), 3u) << "told by release_or_throw()";
    EXPECT_TRUE(hold_lost.stop_requested());

    lock.lock();
    deleted();
    EXPECT_THROW(lock.extend(std::chrono::seconds(10)), NotOwnerError);
    EXPECT_EQ(reasons().size(), 4u) << "told by extend()";
    lock.unlock();  // owed, quiet
    EXPECT_EQ(reasons(), std::vector<LockLostReason>(4, LockLostReason::gone));
    EXPECT_FALSE(lock.is_locked());
  });
  env().run();
  EXPECT_EQ(background_errors_.load(), 0);
}

TEST_P(RaiiTest, ALockForceUnlockedUnderUniqueLockIsALossNotACrash) {
  Client& client = counting_client();
  Client& operator_client = env().add_client();
  env().spawn(client, [&] {
    FairLock lock = client.fair_lock("raii:unique");
    count_losses(lock);
    {
      std::unique_lock hold(lock, std::defer_lock);
      ASSERT_TRUE(hold.try_lock());
      EXPECT_TRUE(operator_client.fair_lock("raii:unique").force_unlock());
    }
    EXPECT_EQ(reasons(), std::vector<LockLostReason>{LockLostReason::gone});
    EXPECT_FALSE(lock.is_locked());
  });
  env().run();
  EXPECT_EQ(background_errors_.load(), 0);
}

TEST_P(RaiiTest, AReentrantHoldLostUnderNestedGuardsIsToldOnce) {
  Client& client = counting_client();
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("raii:nested");
    count_losses(lock);
    {
      std::scoped_lock outer(lock);
      {
        std::scoped_lock inner(lock);
        EXPECT_EQ(lock.hold_count(), 2);
        EXPECT_EQ(inspect({"DEL", "raii:nested"}), Reply::integer(1));
      }  // the inner unlock finds the loss and tells it
      EXPECT_FALSE(lock.is_held_by_current_thread());
    }  // the outer unlock holds nothing any more: the loss was told once
    EXPECT_EQ(reasons(), std::vector<LockLostReason>{LockLostReason::gone});
  });
  env().run();
}

TEST_P(RaiiTest, UnlockingWhatTheTaskDoesNotHoldStaysLoud) {
  Client& alice = env().add_client();
  Client& bob = env().add_client();
  env().spawn(alice, [&] {
    ReentrantLock lock = alice.lock("raii:loud");
    EXPECT_THROW(lock.unlock(), NotOwnerError) << "never locked";
    lock.lock();
    EXPECT_THROW(bob.lock("raii:loud").unlock(), NotOwnerError) << "another client's hold";
    lock.unlock();
    EXPECT_THROW(lock.unlock(), NotOwnerError) << "unlocked more often than locked";
  });
  env().run();
}

TEST_P(RaiiTest, ReleaseOrThrowStaysStrictForALoss) {
  Client& client = counting_client();
  env().spawn(client, [&] {
    TokenLock lock = client.token_lock("raii:strict");
    count_losses(lock);
    LockHold hold = lock.try_acquire_hold({});
    ASSERT_TRUE(hold.owns_hold());
    EXPECT_EQ(inspect({"DEL", "raii:strict"}), Reply::integer(1));
    // The CLI and the simulator act on the outcome: release_or_throw()
    // says, and the loss is told as every loss is, once.
    EXPECT_THROW(hold.release_or_throw(), NotOwnerError);
    EXPECT_EQ(reasons(), std::vector<LockLostReason>{LockLostReason::gone});
  });
  env().run();
}

// The loss as a std::stop_token (issue #31, item 3).
TEST_P(RaiiTest, TheLossTokenIsRequestedAtALossNotAtAnUnlock) {
  Client& client = counting_client();
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("raii:token");
    EXPECT_TRUE(lock.loss_token().stop_requested()) << "not held: already stopped";
    lock.lock();
    const std::stop_token first = lock.loss_token();
    EXPECT_FALSE(first.stop_requested());
    lock.unlock();
    EXPECT_FALSE(first.stop_requested()) << "an ordinary unlock is no loss";

    lock.lock();
    const std::stop_token second = lock.loss_token();
    EXPECT_EQ(inspect({"DEL", "raii:token"}), Reply::integer(1));
    EXPECT_FALSE(second.stop_requested()) << "nobody has looked yet";
    lock.unlock();  // finds it gone
    EXPECT_TRUE(second.stop_requested());

    lock.lock();
    const std::stop_token third = lock.loss_token();
    EXPECT_TRUE(lock.force_unlock());
    EXPECT_TRUE(third.stop_requested());
  });
  env().run();
}

// A force-unlock through the *same* Client (an admin endpoint in the
// service, turnstile::force_unlock(client, name)) while a guard holds the
// lock: every guard releases quietly, the handler is told once per hold,
// the loss token is requested; nothing reaches std::terminate.
TEST_P(RaiiTest, ASameClientForceUnlockUnderEveryGuardIsOneLossNotACrash) {
  Client& client = counting_client();
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("raii:same-client");
    count_losses(lock);
    {
      std::scoped_lock hold(lock);
      const std::stop_token lost = lock.loss_token();
      EXPECT_TRUE(client.lock("raii:same-client").force_unlock());
      EXPECT_EQ(reasons().size(), 1u) << "told at once, by the force-unlock";
      EXPECT_TRUE(lost.stop_requested());
    }
    EXPECT_EQ(reasons(), std::vector<LockLostReason>{LockLostReason::gone});
    {
      std::unique_lock hold(lock);
      lock.lock();  // reentrant: two holds, two unlocks owed
      EXPECT_TRUE(force_unlock(client, "raii:same-client"));
      lock.unlock();  // owed, quiet
    }
    EXPECT_EQ(reasons().size(), 2u);
    std::stop_token seen;
    EXPECT_TRUE(client.with_lock("raii:same-client", [&](std::stop_token lost) {
      seen = lost;
      EXPECT_TRUE(client.lock("raii:same-client").force_unlock());
      EXPECT_TRUE(lost.stop_requested()) << "the work is told to stop acting as holder";
    }));
    EXPECT_TRUE(seen.stop_requested());
    EXPECT_EQ(reasons().size(), 3u);
    // Nothing is left, and the lock is had normally again.
    EXPECT_FALSE(lock.is_locked());
    EXPECT_TRUE(lock.try_lock());
    lock.unlock();
    EXPECT_FALSE(lock.is_locked());
  });
  env().run();
  EXPECT_EQ(background_errors_.load(), 0);
}

TEST_P(RaiiTest, WithLockRunsTheWorkHoldingTheLockAndReleasesIt) {
  Client& client = counting_client();
  Client& other = env().add_client();
  env().spawn(client, [&] {
    bool ran = false;
    EXPECT_TRUE(client.with_lock("raii:with", [&](std::stop_token lost) {
      ran = true;
      EXPECT_FALSE(lost.stop_requested());
      EXPECT_TRUE(client.lock("raii:with").is_held_by_current_thread());
      client.runtime().sleep_for(std::chrono::milliseconds(300));  // the other client tries meanwhile
    }));
    EXPECT_TRUE(ran);
    EXPECT_FALSE(client.lock("raii:with").is_locked());
    // The work's exception propagates, and the lock is released all the same.
    EXPECT_THROW(
        (void)client.with_lock("raii:with", [](std::stop_token) { throw InvalidArgumentError("work failed"); }),
        InvalidArgumentError);
    EXPECT_FALSE(client.lock("raii:with").is_locked());
  });
  env().spawn(other, [&] {
    other.runtime().sleep_for(std::chrono::milliseconds(100));
    // Held: the attempt fails, and the work does not run.
    EXPECT_FALSE(other.with_lock("raii:with", [](std::stop_token) { ADD_FAILURE() << "ran without the lock"; },
                                 {.wait = Duration::zero()}));
  });
  env().run();
  EXPECT_EQ(background_errors_.load(), 0);
}

// Async that composes (issue #31, item 4, first step): Future::then.
TEST_P(RaiiTest, AFutureContinuesWithThen) {
  Client& client = counting_client();
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("raii:then");
    std::atomic<bool> continued{false};
    Future<int> chained = lock.try_lock_async({.wait = std::chrono::seconds(1)}).then([&](Future<bool> got) {
      continued = true;
      return got.get() ? 42 : -1;
    });
    EXPECT_EQ(chained.get(), 42);
    EXPECT_TRUE(continued.load());
    EXPECT_TRUE(lock.is_held_by_current_thread());  // the async form acted for this task

    // Already ready: the continuation runs at once, on the caller.
    Future<void> released = lock.unlock_async();
    ASSERT_TRUE(released.wait_until(kNoDeadline));
    bool ran_here = false;
    Future<void> after_release = released.then([&](Future<void> done) {
      done.get();
      ran_here = true;
    });
    EXPECT_TRUE(ran_here);
    after_release.get();
    EXPECT_FALSE(lock.is_locked());

    // The operation's error reaches the continuation through get(), and
    // what the continuation throws reaches the next future.
    Future<void> failed = lock.unlock_async().then([](Future<void> unlocked) { unlocked.get(); });
    EXPECT_THROW(failed.get(), NotOwnerError);  // held nothing: the programmer's error stays loud
  });
  env().run();
}

// Standard chrono deadlines (issue #31, item 5): try_lock_until() takes a
// steady_clock or system_clock time point and means what it says.
TEST_P(RaiiTest, TryLockUntilTakesStandardClockDeadlines) {
  using std::chrono::milliseconds;
  Client& holder = env().add_client();
  Client& other = env().add_client();
  env().spawn(holder, [&] {
    ReentrantLock lock = holder.lock("raii:chrono");
    lock.lock();
    holder.runtime().sleep_for(milliseconds(500));
    lock.unlock();
  });
  env().spawn(other, [&] {
    other.runtime().sleep_for(milliseconds(50));  // the holder has it by now
    ReentrantLock theirs = other.lock("raii:chrono");
    EXPECT_FALSE(theirs.try_lock_until(std::chrono::steady_clock::now() + milliseconds(50)));
    EXPECT_FALSE(theirs.try_lock_until(std::chrono::system_clock::now() - std::chrono::hours(1)));  // try once
    std::unique_lock hold(theirs, std::defer_lock);
    EXPECT_TRUE(hold.try_lock_until(std::chrono::steady_clock::now() + std::chrono::seconds(5)));
  });
  env().run();
}

TEST(TimeLeftUntil, ClampsToZeroAndToForever) {
  using std::chrono::steady_clock;
  EXPECT_EQ(time_left_until(steady_clock::now() - std::chrono::seconds(5)), Duration::zero());
  EXPECT_EQ(time_left_until(steady_clock::time_point::max()), Duration::max());
  EXPECT_EQ(time_left_until(std::chrono::system_clock::time_point::max()), Duration::max());
  const Duration left = time_left_until(steady_clock::now() + std::chrono::hours(1));
  EXPECT_GT(left, std::chrono::minutes(59));
  EXPECT_LE(left, std::chrono::hours(1));
}

INSTANTIATE_TEST_SUITE_P(Environments, RaiiTest, ::testing::ValuesIn(lock_environments()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace turnstile::testing
