// The wipe check (ClientOptions::wipe_check_period, locks/engine/
// wipe_check.h): a holder learns that its server lost the keys under it
// (a flush; a restart without persistence) within one check period,
// whatever its lease, and a check that finds nothing wrong costs nothing
// that is held. Bodies run in virtual time and against a real
// redis-server; the leases here renew every few minutes, so a loss told
// within the tests' patience was told by the check, not by a renewal.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "lock_environment.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/key_layout.h"
#include "turnstile/lock.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;

constexpr Duration kCheckPeriod = milliseconds(200);

class WipeCheckTest : public LossCountingTest {
 protected:
  // Renewed every ~3 minutes; checked every kCheckPeriod (or `period`).
  Client& checked_client(Duration period = kCheckPeriod) {
    return env().add_client(ClientOptions{
        .lease = minutes(10),
        .on_background_error = [this](std::exception_ptr) { background_errors_.fetch_add(1); },
        .wipe_check_period = period,
    });
  }
  bool lost() { return !reasons().empty(); }
};

TEST_P(WipeCheckTest, AFlushIsFoundWithinOneCheckPeriodWhateverTheLease) {
  Client& client = checked_client();
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("wipe:flushed");
    // When the loss was told (the watchdog's thread, against a real server).
    std::atomic<Duration::rep> told_at{-1};
    std::atomic<int> told{0};
    lock.set_lost_handler([&](const LockLost& lost) {
      EXPECT_EQ(lost.reason, LockLostReason::gone);
      told_at = client.runtime().now().time_since_epoch().count();
      told.fetch_add(1);
    });
    lock.lock();
    // The first checks write the presence key.
    ASSERT_TRUE(eventually(client, [&] {
      return inspect({"EXISTS", presence_key("0", client.id())}) == Reply::integer(1);
    }));
    EXPECT_EQ(inspect({"FLUSHDB"}), Reply::status("OK"));
    const Instant flushed_at = client.runtime().now();
    ASSERT_TRUE(eventually(
        client, [&] { return told.load() > 0; }, minutes(1)))
        << "a renewal is minutes away: only the wipe check tells this soon";
    EXPECT_EQ(told.load(), 1);
    if (env().virtual_time()) {
      // One period, the check's round trip and the renewal's.
      EXPECT_LE(Instant(Duration(told_at.load())) - flushed_at, kCheckPeriod + milliseconds(50));
    }
    EXPECT_FALSE(lock.is_held_by_current_thread());
    // Free on the server: the next holder takes it at once.
    EXPECT_TRUE(lock.try_lock());
    lock.unlock();
  });
  env().run();
  EXPECT_EQ(background_errors_.load(), 0);
}

TEST_P(WipeCheckTest, APresenceKeyLostAloneLosesNothingHeld) {
  Client& client = checked_client();
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("wipe:kept");
    count_losses(lock);
    lock.lock();
    const std::string presence = presence_key("0", client.id());
    ASSERT_TRUE(eventually(client, [&] { return inspect({"EXISTS", presence}) == Reply::integer(1); }));
    // Deleted (or evicted, or expired) on its own: the next check writes it
    // again and renews what is held, which is all still there.
    EXPECT_EQ(inspect({"DEL", presence}), Reply::integer(1));
    ASSERT_TRUE(eventually(client, [&] { return inspect({"EXISTS", presence}) == Reply::integer(1); }));
    client.runtime().sleep_for(kCheckPeriod * 3);
    EXPECT_TRUE(lock.is_held_by_current_thread());
    EXPECT_TRUE(reasons().empty());
    lock.unlock();
    EXPECT_FALSE(lock.is_locked());
  });
  env().run();
  EXPECT_EQ(background_errors_.load(), 0);
}

TEST_P(WipeCheckTest, NothingIsCheckedWhileNothingIsRenewed) {
  Client& client = checked_client();
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("wipe:idle");
    lock.lock();
    const std::string presence = presence_key("0", client.id());
    ASSERT_TRUE(eventually(client, [&] { return inspect({"EXISTS", presence}) == Reply::integer(1); }));
    lock.unlock();
    // Released: the checks stop, and a new presence key is never written.
    client.runtime().sleep_for(kCheckPeriod * 2);
    EXPECT_EQ(inspect({"DEL", presence}), Reply::integer(1));
    client.runtime().sleep_for(kCheckPeriod * 5);
    EXPECT_EQ(inspect({"EXISTS", presence}), Reply::integer(0));
  });
  env().run();
  EXPECT_EQ(background_errors_.load(), 0);
}

// With the check off, the same flush is found by the next renewal only.
TEST_P(WipeCheckTest, WithTheCheckOffAFlushWaitsForTheRenewal) {
  TURNSTILE_SIM_ONLY();
  Client& client = checked_client(Duration::zero());
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("wipe:unchecked");
    count_losses(lock);
    lock.lock();
    client.runtime().sleep_for(milliseconds(500));
    EXPECT_EQ(inspect({"FLUSHDB"}), Reply::status("OK"));
    client.runtime().sleep_for(minutes(1));
    EXPECT_TRUE(reasons().empty()) << "nothing checks before the renewal";
    EXPECT_EQ(inspect({"EXISTS", presence_key("0", client.id())}), Reply::integer(0));
    EXPECT_TRUE(eventually(
        client, [&] { return lost(); }, minutes(5)));
    EXPECT_EQ(reasons(), std::vector<LockLostReason>{LockLostReason::gone});
  });
  env().run();
}

TEST_P(WipeCheckTest, ANegativePeriodIsRefused) {
  EXPECT_THROW(env().add_client(ClientOptions{.wipe_check_period = milliseconds(-1)}), InvalidArgumentError);
}

INSTANTIATE_TEST_SUITE_P(Environments, WipeCheckTest, ::testing::ValuesIn(lock_environments()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace turnstile::testing
