// Client::metrics() (turnstile/metrics.h): what each counter and histogram
// records, in virtual time and against a real redis-server. The handoff
// test runs in simulation only: against a real server, whether the waiter
// was asleep when the release came (a handoff) or still making its first
// try is a race the test cannot fix.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "lock_environment.h"
#include "turnstile/client.h"
#include "turnstile/metrics.h"
#include "turnstile/semaphore.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class MetricsTest : public LockTest {};

TEST_P(MetricsTest, CountsAcquisitionsByFlavorAndFailedTries) {
  Client& alice = env().add_client();
  Client& bob = env().add_client();
  std::atomic<bool> held{false};
  std::atomic<bool> tried{false};
  env().spawn(alice, [&] {
    ReentrantLock lock = alice.lock("m-lock");
    lock.lock();
    lock.lock();  // a re-entry is an acquisition too
    TokenLock token = alice.token_lock("m-token");
    ASSERT_TRUE(token.try_lock({.lease = seconds(30)}));
    CountingSemaphore semaphore = alice.counting_semaphore("m-sem");
    semaphore.add_permits(3);
    semaphore.acquire(2);  // one acquisition, whatever the count
    PermitSemaphore permits = alice.permit_semaphore("m-permits");
    ASSERT_TRUE(permits.try_set_permits(1));
    const PermitId permit = permits.acquire(seconds(30));
    held = true;
    EXPECT_TRUE(eventually(alice, [&] { return tried.load(); }));
    permits.release(permit);
    semaphore.release(2);
    token.unlock();
    lock.unlock();
    lock.unlock();
  });
  env().spawn(bob, [&] {
    EXPECT_TRUE(eventually(bob, [&] { return held.load(); }));
    EXPECT_FALSE(bob.lock("m-lock").try_lock());
    EXPECT_FALSE(bob.token_lock("m-token").try_lock({.wait = milliseconds(50), .lease = seconds(30)}));
    EXPECT_FALSE(bob.permit_semaphore("m-permits").try_acquire().has_value());
    tried = true;
  });
  env().run();

  const MetricsSnapshot a = alice.metrics();
  EXPECT_EQ(a.acquisitions_of(Flavor::reentrant), 2u);
  EXPECT_EQ(a.acquisitions_of(Flavor::token), 1u);
  EXPECT_EQ(a.acquisitions_of(Flavor::counting_semaphore), 1u);
  EXPECT_EQ(a.acquisitions_of(Flavor::semaphore), 1u);
  EXPECT_EQ(a.total_acquisitions(), 5u);
  EXPECT_EQ(a.failed_tries, 0u);
  EXPECT_EQ(a.acquire_wait.count, 5u) << "one wait per acquisition";
  // Every script call is timed: at least the acquisitions, the releases
  // and the two permit settings (the watchdog may add renewals).
  EXPECT_GE(a.script_round_trip.count, 5u + 5u + 2u);
  EXPECT_EQ(a.total_locks_lost(), 0u);

  const MetricsSnapshot b = bob.metrics();
  EXPECT_EQ(b.total_acquisitions(), 0u);
  EXPECT_EQ(b.failed_tries, 3u);
  EXPECT_EQ(b.acquire_wait.count, 0u) << "only successful acquisitions are waits";
  EXPECT_EQ(b.handoffs_received, 0u);
}

TEST_P(MetricsTest, AWaiterWokenByTheReleaseCountsAHandoffAndItsGap) {
  TURNSTILE_SIM_ONLY();
  Client& alice = env().add_client();
  Client& bob = env().add_client();
  std::atomic<bool> held{false};
  env().spawn(alice, [&] {
    ReentrantLock lock = alice.lock("m-handoff");
    lock.lock();
    held = true;
    alice.runtime().sleep_for(seconds(2));  // bob is asleep by now (virtual time)
    lock.unlock();
  });
  env().spawn(bob, [&] {
    EXPECT_TRUE(eventually(bob, [&] { return held.load(); }));
    ReentrantLock lock = bob.lock("m-handoff");
    lock.lock();
    lock.unlock();
  });
  env().run();

  const MetricsSnapshot b = bob.metrics();
  EXPECT_EQ(b.acquisitions_of(Flavor::reentrant), 1u);
  EXPECT_EQ(b.handoffs_received, 1u);
  EXPECT_EQ(b.handoff_gap.count, 1u);
  EXPECT_EQ(b.acquire_wait.count, 1u);
  // Bob waited about the two seconds alice held on: the [1, 2.5] s bucket.
  EXPECT_GE(b.acquire_wait.sum_us, 1'500'000);
  EXPECT_LE(b.acquire_wait.sum_us, 2'500'000);
  EXPECT_EQ(b.acquire_wait.counts[14], 1u) << "(1 s, 2.5 s]";
  EXPECT_LE(b.handoff_gap.sum_us, b.acquire_wait.sum_us);
  EXPECT_EQ(alice.metrics().handoffs_received, 0u);
}

TEST_P(MetricsTest, CountsRenewalsAndALockLostBecauseItsKeyWasDeleted) {
  Client& alice = env().add_client({.lease = milliseconds(900)});
  std::atomic<bool> lost{false};
  env().spawn(alice, [&] {
    ReentrantLock lock = alice.lock("m-renewed");
    lock.set_lost_handler([&](const LockLost& loss) {
      EXPECT_EQ(loss.reason, LockLostReason::gone);
      lost = true;
    });
    lock.lock();
    EXPECT_TRUE(eventually(alice, [&] { return alice.metrics().renewals >= 2; }));
    inspect({"DEL", "m-renewed"});  // an operator's mistake: the next renewal finds it gone
    EXPECT_TRUE(eventually(alice, [&] { return lost.load(); }));
  });
  env().run();
  const MetricsSnapshot a = alice.metrics();
  EXPECT_GE(a.renewals, 2u);
  EXPECT_EQ(a.locks_lost_by(LockLostReason::gone), 1u);
  EXPECT_EQ(a.total_locks_lost(), 1u);
  // A renewal that finds the key gone is answered, not failed (against a
  // real server on a loaded machine, one may also time out).
  if (env().virtual_time()) {
    EXPECT_EQ(a.renewal_failures, 0u);
  }
}

TEST_P(MetricsTest, CountsAHoldEndedByTheMaximumHold) {
  Client& alice = env().add_client({.lease = milliseconds(900), .max_hold = milliseconds(1'200)});
  std::atomic<bool> lost{false};
  env().spawn(alice, [&] {
    ReentrantLock lock = alice.lock("m-capped");
    lock.set_lost_handler([&](const LockLost&) { lost = true; });
    lock.lock();
    EXPECT_TRUE(eventually(alice, [&] { return lost.load(); }));
  });
  env().run();
  EXPECT_EQ(alice.metrics().locks_lost_by(LockLostReason::max_hold_reached), 1u);
  EXPECT_EQ(alice.metrics().total_locks_lost(), 1u);
}

TEST_P(MetricsTest, CountsScriptsReloadedAfterTheServerForgotThem) {
  Client& alice = env().add_client();
  env().spawn(alice, [&] {
    ReentrantLock lock = alice.lock("m-reload");
    lock.lock();
    lock.unlock();
    EXPECT_EQ(alice.metrics().script_reloads, 0u) << "first loads are not reloads";
    inspect({"SCRIPT", "FLUSH"});
    lock.lock();    // the acquire script, loaded again
    lock.unlock();  // and the release script
  });
  env().run();
  EXPECT_EQ(alice.metrics().script_reloads, 2u);
  EXPECT_EQ(alice.metrics().reconnects, 0u);
}

INSTANTIATE_TEST_SUITE_P(Environments, MetricsTest, ::testing::ValuesIn(lock_environments()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace turnstile::testing
