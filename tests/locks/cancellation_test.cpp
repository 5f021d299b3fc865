// Cancellation (issue #22): every blocking acquire takes a std::stop_token
// (AcquireOptions::stop). A stop requested from another task ends a wait
// of an hour within one wake-up, answers false / nullopt, and leaves
// nothing behind: no fair-queue entry, no half-taken composite node, no
// subscription of the waiter (PUBSUB NUMSUB; on a real server after the
// backend's short linger); and someone else's acquisition then succeeds at
// once. The same bodies run in virtual time (where "within one wake-up" is
// exact: the waiter returns at the stop's instant) and against a real
// redis-server.

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "lock_environment.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/fair_lock.h"
#include "turnstile/lock.h"
#include "turnstile/multi_lock.h"
#include "turnstile/read_write_lock.h"
#include "turnstile/semaphore.h"

namespace turnstile::testing {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

class CancellationTest : public LockTest {
 protected:
  std::int64_t subscribers(const std::string& channel) {
    return inspect({"PUBSUB", "NUMSUB", channel}).as_array()[1].as_integer();
  }

  // What one flavor's wait looks like to the scenario below.
  struct Scenario {
    // Run on the holder's task: take it, and later give it back.
    std::function<void(Client&)> hold;
    std::function<void()> release;
    // Run on the waiter's task: wait up to an hour unless `stop`; returns
    // whether it acquired.
    std::function<bool(Client&, std::stop_token)> wait;
    // The channel the waiter (its client given) listens on once it waits:
    // its process's own wake channel (wake scope fleet; the shared one is
    // subscribed only while a try finds a holder that may be foreign); none
    // for a composite lock, whose attempts do not subscribe.
    std::function<std::string(const Client&)> channel;
    // Whether the waiter returns at the stop's very instant in virtual time
    // (a sleeping waiter); a composite's attempt under way finishes first.
    bool exact_in_virtual_time = true;
    // Checked once the waiter returned: nothing of it left on the server.
    std::function<void()> expect_nothing_left = [] {};
    // Run on a third client's task after the release: takes it with no
    // wait (returns whether it did) and gives it back.
    std::function<bool(Client&)> take_at_once;
  };

  // Holder holds; the waiter waits; a stopper on another task requests the
  // stop once the waiter is asleep; the waiter must return false at once,
  // leave nothing, and a third client then acquires at once.
  void expect_stop_ends_the_wait(Scenario scenario) {
    Client& holder = env().add_client();
    Client& waiter = env().add_client();
    Client& later = env().add_client();
    std::atomic<bool> held{false};
    std::atomic<bool> waiter_returned{false};
    std::atomic<bool> released{false};
    std::stop_source stop;
    std::optional<Instant> stopped_at;
    std::optional<Instant> returned_at;
    env().spawn(holder, [&] {
      scenario.hold(holder);
      held = true;
      EXPECT_TRUE(eventually(holder, [&] { return waiter_returned.load(); }));
      scenario.release();
      released = true;
    });
    env().spawn(waiter, [&] {
      ASSERT_TRUE(eventually(waiter, [&] { return held.load(); }));
      EXPECT_FALSE(scenario.wait(waiter, stop.get_token()));
      returned_at = waiter.runtime().now();
      scenario.expect_nothing_left();
      // The waiter's subscription is released (after the real backend's
      // linger, which is short).
      if (scenario.channel) {
        const std::string channel = scenario.channel(waiter);
        EXPECT_TRUE(eventually(waiter, [&] { return subscribers(channel) == 0; })) << channel;
      }
      waiter_returned = true;
    });
    env().spawn(waiter, [&] {
      ASSERT_TRUE(eventually(waiter, [&] { return held.load(); }));
      // The waiter subscribed (a loaded machine may be slow to get there),
      // then long enough for it to be asleep on its subscription.
      if (scenario.channel) {
        EXPECT_TRUE(eventually(waiter, [&] { return subscribers(scenario.channel(waiter)) > 0; }))
            << "the waiter should be waiting on " << scenario.channel(waiter);
      }
      waiter.runtime().sleep_for(milliseconds(300));
      stopped_at = waiter.runtime().now();
      stop.request_stop();
    });
    env().spawn(later, [&] {
      ASSERT_TRUE(eventually(later, [&] { return released.load(); }));
      EXPECT_TRUE(scenario.take_at_once(later)) << "nothing of the stopped waiter may stand in the way";
    });
    env().run();
    ASSERT_TRUE(stopped_at && returned_at);
    // Within one wake-up: in virtual time, at the very instant.
    if (env().virtual_time()) {
      if (scenario.exact_in_virtual_time) {
        EXPECT_EQ(*returned_at, *stopped_at);
      } else {
        EXPECT_LE(*returned_at - *stopped_at, CompositeLockOptions{}.node_timeout);
      }
    }
  }
};

AcquireOptions wait_an_hour(std::stop_token stop) {
  return AcquireOptions{.wait = hours(1), .lease = std::nullopt, .stop = std::move(stop)};
}

TEST_P(CancellationTest, ReentrantLock) {
  std::unique_ptr<ReentrantLock> held;
  expect_stop_ends_the_wait({
      .hold =
          [&](Client& client) {
            held = std::make_unique<ReentrantLock>(client.lock("cancel:reentrant"));
            held->lock();
          },
      .release = [&] { held->unlock(); },
      .wait = [](Client& client,
                 std::stop_token stop) { return client.lock("cancel:reentrant").try_lock(wait_an_hour(stop)); },
      .channel =
          [](const Client& waiter) {
            return key_layout(Flavor::reentrant, "cancel:reentrant").wake_channel(waiter.id());
          },
      .take_at_once =
          [](Client& client) {
            ReentrantLock lock = client.lock("cancel:reentrant");
            if (!lock.try_lock()) return false;
            lock.unlock();
            return true;
          },
  });
}

// A reader waiting for a writer, and a writer waiting for a reader.
TEST_P(CancellationTest, ReadWriteLockBothHalves) {
  for (const bool reader_waits : {true, false}) {
    const std::string name = reader_waits ? "cancel:rw:reader" : "cancel:rw:writer";
    std::unique_ptr<ReadWriteLock> held;
    expect_stop_ends_the_wait({
        .hold =
            [&](Client& client) {
              held = std::make_unique<ReadWriteLock>(client.read_write_lock(name));
              if (reader_waits) {
                held->write().lock();
              } else {
                held->read().lock();
              }
            },
        .release =
            [&] {
              if (reader_waits) {
                held->write().unlock();
              } else {
                held->read().unlock();
              }
            },
        .wait =
            [&](Client& client, std::stop_token stop) {
              ReadWriteLock lock = client.read_write_lock(name);
              return reader_waits ? lock.read().try_lock(wait_an_hour(stop))
                                  : lock.write().try_lock(wait_an_hour(stop));
            },
        .channel = [&](const Client& waiter) { return key_layout(Flavor::read_write, name).wake_channel(waiter.id()); },
        .take_at_once =
            [&](Client& client) {
              ReadWriteLock lock = client.read_write_lock(name);
              if (!lock.write().try_lock()) return false;
              lock.write().unlock();
              return true;
            },
    });
  }
}

TEST_P(CancellationTest, FairLockLeavesNoQueueEntry) {
  std::unique_ptr<FairLock> held;
  const KeyLayout layout = key_layout(Flavor::fair, "cancel:fair");
  std::mutex owner_mutex;  // the waiter writes it, the stopper reads it
  std::string waiter_owner;
  expect_stop_ends_the_wait({
      .hold =
          [&](Client& client) {
            held = std::make_unique<FairLock>(client.fair_lock("cancel:fair"));
            held->lock();
          },
      .release = [&] { held->unlock(); },
      .wait =
          [&](Client& client, std::stop_token stop) {
            {
              std::lock_guard guard(owner_mutex);
              waiter_owner = client.current_owner();
            }
            return client.fair_lock("cancel:fair").try_lock(wait_an_hour(stop));
          },
      // Each fair waiter listens on a channel of its own.
      .channel =
          [&](const Client&) {
            std::lock_guard guard(owner_mutex);
            return layout.waiter_channel(waiter_owner);
          },
      .expect_nothing_left =
          [&] {
            EXPECT_EQ(inspect({"LLEN", layout.fair_queue}), Reply::integer(0));
            EXPECT_EQ(inspect({"ZCARD", layout.fair_timeouts}), Reply::integer(0));
            EXPECT_EQ(inspect({"ZCARD", layout.fair_waiters}), Reply::integer(0));
          },
      .take_at_once =
          [](Client& client) {
            FairLock lock = client.fair_lock("cancel:fair");
            if (!lock.try_lock()) return false;
            lock.unlock();
            return true;
          },
  });
}

// A token lock's waiter (fleet-wide wake-ups, the default) listens on its
// process's own wake channel only: no try of it heeds the shared one.
TEST_P(CancellationTest, TokenLockThroughItsFuture) {
  std::unique_ptr<TokenLock> held;
  expect_stop_ends_the_wait({
      .hold =
          [&](Client& client) {
            held = std::make_unique<TokenLock>(client.token_lock("cancel:token"));
            held->lock();
          },
      .release = [&] { held->unlock(); },
      .wait =
          [](Client& client, std::stop_token stop) {
            TokenLock lock = client.token_lock("cancel:token");
            Future<bool> attempt =
                lock.try_lock_async({.wait = kWaitForever, .lease = std::nullopt, .stop = std::move(stop)});
            return attempt.get();
          },
      .channel =
          [](const Client& waiter) { return key_layout(Flavor::token, "cancel:token").wake_channel(waiter.id()); },
      .take_at_once =
          [](Client& client) {
            TokenLock lock = client.token_lock("cancel:token");
            if (!lock.try_lock()) return false;
            lock.unlock();
            return true;
          },
  });
}

TEST_P(CancellationTest, PermitSemaphoreThroughItsFuture) {
  std::unique_ptr<PermitSemaphore> semaphore;
  std::optional<PermitId> permit;
  expect_stop_ends_the_wait({
      .hold =
          [&](Client& client) {
            semaphore = std::make_unique<PermitSemaphore>(client.permit_semaphore("cancel:permits"));
            ASSERT_TRUE(semaphore->try_set_permits(1));
            permit = semaphore->acquire();
          },
      .release = [&] { semaphore->release(*permit); },
      .wait =
          [](Client& client, std::stop_token stop) {
            PermitSemaphore waiting = client.permit_semaphore("cancel:permits");
            return waiting.try_acquire_async(wait_an_hour(stop)).get().has_value();
          },
      .channel =
          [](const Client& waiter) {
            return key_layout(Flavor::semaphore, "cancel:permits").wake_channel(waiter.id());
          },
      .expect_nothing_left =
          [&] {
            EXPECT_EQ(inspect({"ZCARD", "{cancel:permits}:timeout"}), Reply::integer(1));
          },
      .take_at_once =
          [](Client& client) {
            PermitSemaphore semaphore = client.permit_semaphore("cancel:permits");
            const std::optional<PermitId> taken = semaphore.try_acquire();
            if (!taken) return false;
            semaphore.release(*taken);
            return true;
          },
  });
}

TEST_P(CancellationTest, CountingSemaphore) {
  std::unique_ptr<CountingSemaphore> semaphore;
  expect_stop_ends_the_wait({
      .hold =
          [&](Client& client) {
            semaphore = std::make_unique<CountingSemaphore>(client.counting_semaphore("cancel:count"));
            ASSERT_TRUE(semaphore->try_set_permits(1));
            semaphore->acquire();
          },
      .release = [&] { semaphore->release(); },
      .wait =
          [](Client& client, std::stop_token stop) {
            return client.counting_semaphore("cancel:count").try_acquire(1, wait_an_hour(stop));
          },
      .channel =
          [](const Client& waiter) {
            return key_layout(Flavor::counting_semaphore, "cancel:count").wake_channel(waiter.id());
          },
      .expect_nothing_left =
          [&] {
            EXPECT_EQ(inspect({"GET", "cancel:count"}), Reply::bulk("0"));
          },
      .take_at_once =
          [](Client& client) {
            CountingSemaphore semaphore = client.counting_semaphore("cancel:count");
            if (!semaphore.try_acquire(1)) return false;
            semaphore.release();
            return true;
          },
  });
}

TEST_P(CancellationTest, CountingSemaphoreThroughItsFuture) {
  std::unique_ptr<CountingSemaphore> semaphore;
  expect_stop_ends_the_wait({
      .hold =
          [&](Client& client) {
            semaphore = std::make_unique<CountingSemaphore>(client.counting_semaphore("cancel:count-async"));
            ASSERT_TRUE(semaphore->try_set_permits(2));
            semaphore->acquire(2);
          },
      .release = [&] { semaphore->release(2); },
      .wait =
          [](Client& client, std::stop_token stop) {
            CountingSemaphore waiting = client.counting_semaphore("cancel:count-async");
            return waiting.try_acquire_async(2, wait_an_hour(stop)).get();
          },
      .channel =
          [](const Client& waiter) {
            return key_layout(Flavor::counting_semaphore, "cancel:count-async").wake_channel(waiter.id());
          },
      .take_at_once =
          [](Client& client) {
            CountingSemaphore semaphore = client.counting_semaphore("cancel:count-async");
            if (!semaphore.try_acquire(2)) return false;
            semaphore.release(2);
            return true;
          },
  });
}

// A RedLock of three node locks (three names on one server, one client):
// the holder keeps two of them, so every attempt of the waiter takes the
// third and must give it back; a stop during the retry delay ends the
// wait with the third not held.
TEST_P(CancellationTest, RedLockHoldsNoNodeAfterAStop) {
  const std::vector<std::string> names = {"cancel:node1", "cancel:node2", "cancel:node3"};
  std::vector<std::unique_ptr<ReentrantLock>> held;
  const auto redlock_of = [&](Client& client) {
    std::vector<std::unique_ptr<Lock>> nodes;
    for (const std::string& name : names) nodes.push_back(std::make_unique<ReentrantLock>(client.lock(name)));
    return std::make_unique<RedLock>(std::move(nodes));
  };
  expect_stop_ends_the_wait({
      .hold =
          [&](Client& client) {
            for (std::size_t i = 1; i < names.size(); ++i) {
              held.push_back(std::make_unique<ReentrantLock>(client.lock(names[i])));
              held.back()->lock();
            }
          },
      .release =
          [&] {
            for (const auto& lock : held) lock->unlock();
          },
      .wait =
          [&](Client& client, std::stop_token stop) {
            const std::unique_ptr<RedLock> lock = redlock_of(client);
            const bool acquired = lock->try_lock(wait_an_hour(stop));
            EXPECT_FALSE(lock->is_held_by_current_thread());
            return acquired;
          },
      .channel = {},
      .exact_in_virtual_time = false,
      .expect_nothing_left =
          [&] {
            EXPECT_EQ(inspect({"EXISTS", names[0]}), Reply::integer(0));
          },
      .take_at_once =
          [&](Client& client) {
            const std::unique_ptr<RedLock> lock = redlock_of(client);
            if (!lock->try_lock()) return false;
            lock->unlock();
            return true;
          },
  });
}

INSTANTIATE_TEST_SUITE_P(Environments, CancellationTest, ::testing::ValuesIn(lock_environments()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace turnstile::testing
