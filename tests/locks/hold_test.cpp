// Holds as values (issue #31, item 2; turnstile/hold.h): every flavor hands
// out a LockHold with an owner id of its own, released from another task
// than the one that took it; holds are never reentrant with each other or
// with the classic API; a lost hold is released quietly and its loss token
// fires; the destructor and move-assignment release. Bodies run in virtual
// time and against a real redis-server.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "lock_environment.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/flavor.h"
#include "turnstile/hold.h"
#include "turnstile/lock.h"
#include "turnstile/semaphore.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

HoldableOptions exclusive(Flavor flavor) {
  HoldableOptions options;
  if (is_semaphore(flavor)) options.permits = 1;
  return options;
}

// The n of an owner id "<uuid>:<n>".
std::uint64_t hold_number(const std::string& owner, const std::string& client_id) {
  EXPECT_TRUE(owner.starts_with(client_id + ":")) << owner;
  return std::stoull(owner.substr(client_id.size() + 1));
}

class HoldTest : public LossCountingTest {};

TEST_P(HoldTest, EveryFlavorsHoldIsReleasedByAnotherTask) {
  Client& alice = env().add_client();
  Client& bob = env().add_client();
  for (const Flavor flavor : kAllFlavors) {
    const std::string name = "value:" + std::string(flavor_name(flavor));
    env().spawn(alice, [&] {
      std::unique_ptr<Holdable> mine = alice.holdable(flavor, name, exclusive(flavor));
      std::unique_ptr<Holdable> theirs = bob.holdable(flavor, name, exclusive(flavor));
      LockHold carried = mine->try_acquire_hold({.wait = seconds(5), .lease = {}, .stop = {}});
      ASSERT_TRUE(carried.owns_hold()) << name;
      EXPECT_TRUE(carried.held());
      EXPECT_EQ(carried.flavor(), flavor);
      EXPECT_EQ(carried.name(), name);
      EXPECT_FALSE(carried.loss_token().stop_requested());
      if (flavor == Flavor::semaphore) {
        EXPECT_EQ(carried.permit_ids(), std::vector<std::string>{carried.owner()});
      } else {
        EXPECT_GE(hold_number(carried.owner(), alice.id()), std::uint64_t{1} << 62) << "never a task's id";
        EXPECT_NE(carried.owner(), alice.current_owner());
      }
      // Exclusive: neither a second hold of the same task nor another
      // client gets in (the task's std Lockable hold does not reenter it
      // either: AHoldIsNotReentrantWithTheTasksClassicHold).
      EXPECT_FALSE(mine->try_acquire_hold({}).owns_hold()) << name << ": two holds at once";
      EXPECT_FALSE(theirs->try_acquire_hold({}).owns_hold()) << name << " was held twice";

      // Released on another task of the runtime (a thread in production).
      std::string releasing_task;
      run_async<void>(alice.runtime(), [&] {
        releasing_task = alice.current_owner();
        carried.release();
      }).get();
      EXPECT_NE(releasing_task, alice.current_owner());
      EXPECT_FALSE(carried.owns_hold());
      carried.release();  // a no-op once released

      {
        LockHold after = theirs->try_acquire_hold({});
        EXPECT_TRUE(after.owns_hold()) << name << " was not given back";
      }  // released by its destructor
      EXPECT_TRUE(mine->try_acquire_hold({}).owns_hold()) << name << ": the destructor did not release";
    });
    env().run();
  }
}

TEST_P(HoldTest, EachHoldOfALockHasItsOwnOwnerIdInRedis) {
  Client& alice = env().add_client();
  env().spawn(alice, [&] {
    ReadWriteLock rw = alice.read_write_lock("value:ids");
    ReadLock& reads = rw.read();
    LockHold first = reads.acquire_hold();
    LockHold second = reads.acquire_hold();  // shared: both get in
    EXPECT_NE(first.owner(), second.owner());
    EXPECT_EQ(hold_number(second.owner(), alice.id()), hold_number(first.owner(), alice.id()) + 1);
    // Redisson's field for each: a foreign reader sees two holders.
    EXPECT_EQ(inspect({"HEXISTS", "value:ids", first.owner()}), Reply::integer(1));
    EXPECT_EQ(inspect({"HEXISTS", "value:ids", second.owner()}), Reply::integer(1));
    const std::string first_owner = first.owner();
    first.release();
    EXPECT_EQ(inspect({"HEXISTS", "value:ids", first_owner}), Reply::integer(0));
    EXPECT_EQ(inspect({"HEXISTS", "value:ids", second.owner()}), Reply::integer(1));
    // Move-assignment releases what the target held.
    second = reads.acquire_hold();
    EXPECT_EQ(inspect({"HLEN", "value:ids"}), Reply::integer(2));  // mode + the new hold
  });
  env().run();
}

TEST_P(HoldTest, AHoldIsNotReentrantWithTheTasksClassicHold) {
  Client& alice = env().add_client();
  env().spawn(alice, [&] {
    ReentrantLock lock = alice.lock("value:classic");
    lock.lock();
    EXPECT_FALSE(lock.try_acquire_hold({}).owns_hold());
    lock.unlock();
    LockHold hold = lock.acquire_hold();
    EXPECT_FALSE(lock.try_lock());
    EXPECT_FALSE(lock.is_held_by_current_thread());
    EXPECT_TRUE(lock.is_locked());
    hold.release();
    EXPECT_TRUE(lock.try_lock());
    lock.unlock();
  });
  env().run();
}

TEST_P(HoldTest, ALostHoldIsReleasedQuietlyAndItsLossTokenFires) {
  Client& client = counting_client();
  env().spawn(client, [&] {
    FairLock lock = client.fair_lock("value:lost");
    count_losses(lock);
    LockHold hold = lock.acquire_hold();
    const std::stop_token lost = hold.loss_token();
    EXPECT_EQ(inspect({"DEL", "value:lost"}), Reply::integer(1));  // an operator, an eviction
    EXPECT_FALSE(lost.stop_requested()) << "nobody has looked yet";
    hold.release();  // finds it gone: a loss, told now; nothing thrown
    EXPECT_TRUE(lost.stop_requested());
    EXPECT_EQ(reasons(), std::vector<LockLostReason>{LockLostReason::gone});

    LockHold strict = lock.acquire_hold();
    EXPECT_EQ(inspect({"DEL", "value:lost"}), Reply::integer(1));
    EXPECT_THROW(strict.release_or_throw(), NotOwnerError);
    EXPECT_FALSE(strict.owns_hold()) << "released, even though it threw";
  });
  env().run();
  EXPECT_EQ(background_errors_.load(), 0);
}

TEST_P(HoldTest, ALostPermitIsReleasedQuietlyAndItsLossTokenFires) {
  Client& client = counting_client();
  env().spawn(client, [&] {
    PermitSemaphore semaphore = client.permit_semaphore("value:permit");
    ASSERT_TRUE(semaphore.try_set_permits(2));
    count_losses(semaphore);
    LockHold hold = semaphore.acquire_hold();
    EXPECT_EQ(semaphore.available_permits(), 1);
    const std::stop_token lost = hold.loss_token();
    EXPECT_EQ(inspect({"DEL", semaphore.timeout_key()}), Reply::integer(1));
    hold.release();
    EXPECT_TRUE(lost.stop_requested());
    EXPECT_EQ(reasons(), std::vector<LockLostReason>{LockLostReason::gone});
  });
  env().run();
}

TEST_P(HoldTest, AForceUnlockThroughThisClientFiresTheLossToken) {
  Client& client = counting_client();
  env().spawn(client, [&] {
    TokenLock lock = client.token_lock("value:forced");
    LockHold hold = lock.acquire_hold();
    EXPECT_TRUE(lock.force_unlock());
    EXPECT_TRUE(hold.loss_token().stop_requested());
    EXPECT_FALSE(hold.held());
    hold.release();  // quiet
  });
  env().run();
}

// An empty hold (default-made, moved from, released) answers as holding
// nothing; it never ends the process (issue #49).
TEST_P(HoldTest, AnEmptyHoldAnswersAsHoldingNothing) {
  Client& client = counting_client();
  env().spawn(client, [&] {
    const auto expect_empty = [](LockHold& hold) {
      EXPECT_FALSE(hold.owns_hold());
      EXPECT_FALSE(hold.held());
      EXPECT_TRUE(hold.loss_token().stop_requested());
      EXPECT_FALSE(hold.fencing_token().has_value());
      EXPECT_TRUE(hold.permit_ids().empty());
      EXPECT_EQ(hold.name(), "");
      EXPECT_EQ(hold.owner(), "");
      EXPECT_THROW(hold.extend(seconds(10)), NotOwnerError);
      hold.release();
      EXPECT_NO_THROW(hold.release_or_throw());
    };
    LockHold made;
    expect_empty(made);
    ReentrantLock lock = client.lock("value:empty");
    LockHold taken = lock.acquire_hold();
    ASSERT_TRUE(taken.held());
    LockHold moved_to = std::move(taken);
    expect_empty(taken);  // NOLINT(bugprone-use-after-move): what is tested
    EXPECT_TRUE(moved_to.held());
    moved_to.release();
    expect_empty(moved_to);
    EXPECT_FALSE(lock.is_locked());
  });
  env().run();
}

TEST_P(HoldTest, AFixedLeaseRunningOutEndsTheHoldLocally) {
  Client& client = counting_client();
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("value:lease");
    count_losses(lock);
    LockHold hold = lock.try_acquire_hold({.wait = Duration::zero(), .lease = seconds(1), .stop = {}});
    ASSERT_TRUE(hold.owns_hold());
    client.runtime().sleep_for(milliseconds(1200));
    EXPECT_FALSE(hold.held());
    EXPECT_TRUE(hold.loss_token().stop_requested());
    EXPECT_EQ(reasons(), std::vector<LockLostReason>{LockLostReason::lease_expired});
    EXPECT_THROW(hold.extend(seconds(5)), NotOwnerError);
  });
  env().run();
  EXPECT_EQ(background_errors_.load(), 0);
}

TEST_P(HoldTest, AHoldIsExtendedAndOutlivesItsHandle) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    LockHold hold;
    {
      FairLock lock = client.fair_lock("value:outlive");
      hold = lock.try_acquire_hold({.wait = Duration::zero(), .lease = seconds(10), .stop = {}});
    }  // the handle goes first
    ASSERT_TRUE(hold.owns_hold());
    hold.extend(seconds(30));
    const Reply ttl = inspect({"PTTL", "value:outlive"});
    ASSERT_TRUE(ttl.is_integer());
    EXPECT_GT(ttl.as_integer(), 10'000);
    hold.release();
    EXPECT_EQ(inspect({"EXISTS", "value:outlive"}), Reply::integer(0));
  });
  env().run();
}

TEST_P(HoldTest, AsyncHoldsAreTakenOnOneTaskAndReleasedOnAnother) {
  Client& client = env().add_client();
  LockHold carried;
  env().spawn(client, [&] {
    CountingSemaphore semaphore = client.counting_semaphore("value:async");
    ASSERT_TRUE(semaphore.try_set_permits(1));
    carried = semaphore.try_acquire_hold_async({.wait = seconds(1), .lease = {}, .stop = {}}).get();
    ASSERT_TRUE(carried.owns_hold());
    EXPECT_TRUE(carried.held());
    EXPECT_EQ(semaphore.available_permits(), 0);
    EXPECT_FALSE(semaphore.try_acquire_hold_async({}).get().owns_hold());
  });
  env().run();
  env().spawn(client, [&] {
    carried.release();
    EXPECT_EQ(client.counting_semaphore("value:async").available_permits(), 1);
  });
  env().run();
}

INSTANTIATE_TEST_SUITE_P(Environments, HoldTest, ::testing::ValuesIn(lock_environments()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace turnstile::testing
