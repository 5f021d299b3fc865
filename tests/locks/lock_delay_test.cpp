// Lock-delay (ClientOptions::lock_delay, per lock LockOptions::lock_delay,
// issue #53): every lease a client arms on the server is the delay longer
// than the one its holder believes in. A clean release frees the lock at once; a holder lost without one
// (crashed, paused past its lease) keeps everybody out for the delay beyond
// its own deadline. Bodies run in virtual time and against a real
// redis-server; crashes and pauses in simulation only.

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lock_environment.h"
#include "turnstile/client.h"
#include "turnstile/election.h"
#include "turnstile/errors.h"
#include "turnstile/fair_lock.h"
#include "turnstile/hold.h"
#include "turnstile/key_layout.h"
#include "turnstile/lock.h"
#include "turnstile/lock_policy.h"
#include "turnstile/read_write_lock.h"
#include "turnstile/semaphore.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

constexpr auto kDelay = seconds(5);
constexpr std::int64_t kWatchdogMs = 30'000;  // ClientOptions::lease's default
constexpr std::int64_t kDelayMs = 5'000;

using MakeLock = std::function<std::unique_ptr<Lock>(Client&)>;

class LockDelayTest : public LockTest {
 protected:
  std::int64_t pttl(const std::string& key) { return inspect({"PTTL", key}).as_integer(); }

  // The key was just armed for the watchdog's lease and `delay_ms`.
  void expect_armed_for(const std::string& key, std::int64_t delay_ms) {
    EXPECT_GT(pttl(key), kWatchdogMs + delay_ms - 1'000) << key;
    EXPECT_LE(pttl(key), kWatchdogMs + delay_ms) << key;
  }

  // The lock-delay the holder identity of `flavor`'s lock at `name` names.
  std::optional<std::int64_t> identity_delay_ms(Flavor flavor, const std::string& name) {
    const Reply identity = inspect({"GET", key_layout(flavor, name).holder_identity});
    if (!identity.is_bulk()) return std::nullopt;
    const std::optional<HolderIdentity> parsed = parse_holder_identity(identity.as_string());
    if (!parsed) return std::nullopt;
    return parsed->lock_delay_ms;
  }

  // The ms left of `permit`'s lease at `now_ms` (its expiry is its score).
  double permit_lease_left_ms(const std::string& semaphore, const PermitId& permit, std::int64_t now_ms) {
    const Reply expiry = inspect({"ZSCORE", key_layout(Flavor::semaphore, semaphore).permit_timeouts, permit.bytes()});
    EXPECT_TRUE(expiry.is_bulk());
    return expiry.is_bulk() ? std::stod(expiry.as_string()) - static_cast<double>(now_ms) : -1.0;
  }

  // Taken with the watchdog and with a fixed lease by a client with the
  // delay: the key lives the lease and the delay, the holder believes in
  // the lease alone, its identity names the delay, and an unlock frees the
  // lock for another client at once.
  // `holder_options`: the holder's client (the delay is its own, or the
  // lock's through `make`).
  void expect_armed_with_the_delay(const std::string& name, const MakeLock& make,
                                   ClientOptions holder_options = {.lock_delay = kDelay}) {
    Client& holder = env().add_client(std::move(holder_options));
    Client& other = env().add_client();
    env().spawn(holder, [&] {
      const std::unique_ptr<Lock> lock = make(holder);
      lock->lock();
      expect_armed_for(name, kDelayMs);
      EXPECT_LT(*lock->remaining_lease(), milliseconds(kWatchdogMs)) << "the local deadline is the lease's";
      EXPECT_EQ(identity_delay_ms(lock->flavor(), name), kDelayMs);
      lock->unlock();
      EXPECT_EQ(pttl(name), -2) << "a clean release deletes the key: no delay";

      lock->lock(seconds(10));  // a fixed lease
      EXPECT_GT(pttl(name), 10'000 + kDelayMs - 1'000);
      EXPECT_LE(pttl(name), 10'000 + kDelayMs);
      EXPECT_LT(*lock->remaining_lease(), seconds(10));
      lock->unlock();
    });
    env().run();
    env().spawn(other, [&] {
      const std::unique_ptr<Lock> lock = make(other);
      EXPECT_TRUE(lock->try_lock()) << "released cleanly: free at once";
      lock->unlock();
    });
    env().run();
  }
};

TEST_P(LockDelayTest, ReentrantArmsItsLeaseAndTheDelay) {
  expect_armed_with_the_delay("delay:reentrant", [](Client& client) {
    return std::make_unique<ReentrantLock>(client.lock("delay:reentrant"));
  });
}

TEST_P(LockDelayTest, FencedArmsItsLeaseAndTheDelay) {
  expect_armed_with_the_delay("delay:fenced", [](Client& client) {
    return std::make_unique<ReentrantLock>(client.fenced_lock("delay:fenced"));
  });
}

TEST_P(LockDelayTest, FairArmsItsLeaseAndTheDelay) {
  expect_armed_with_the_delay(
      "delay:fair", [](Client& client) { return std::make_unique<FairLock>(client.fair_lock("delay:fair")); });
}

TEST_P(LockDelayTest, TokenArmsItsLeaseAndTheDelay) {
  expect_armed_with_the_delay(
      "delay:token", [](Client& client) { return std::make_unique<TokenLock>(client.token_lock("delay:token")); });
}

// A lock's own delay (LockOptions::lock_delay), its client without one.
constexpr LockOptions kOwnDelay{.lock_delay = kDelay};

TEST_P(LockDelayTest, AReentrantLocksOwnDelayIsArmed) {
  expect_armed_with_the_delay(
      "own:reentrant",
      [](Client& client) { return std::make_unique<ReentrantLock>(client.lock("own:reentrant", kOwnDelay)); }, {});
}

TEST_P(LockDelayTest, AFencedLocksOwnDelayIsArmed) {
  expect_armed_with_the_delay(
      "own:fenced",
      [](Client& client) { return std::make_unique<ReentrantLock>(client.fenced_lock("own:fenced", kOwnDelay)); }, {});
}

TEST_P(LockDelayTest, AFairLocksOwnDelayIsArmed) {
  expect_armed_with_the_delay(
      "own:fair",
      [](Client& client) {
        return std::make_unique<FairLock>(client.fair_lock("own:fair", FairLockOptions{.lock_delay = kDelay}));
      },
      {});
}

TEST_P(LockDelayTest, ATokenLocksOwnDelayIsArmed) {
  expect_armed_with_the_delay(
      "own:token",
      [](Client& client) { return std::make_unique<TokenLock>(client.token_lock("own:token", kOwnDelay)); }, {});
}

// Through the one factory (HoldableOptions::lock_delay), as the CLI and
// the simulator make their locks; a composite lock's nodes arm it too.
TEST_P(LockDelayTest, AHoldablesOwnDelayIsArmed) {
  for (const Flavor flavor : {Flavor::reentrant, Flavor::fair, Flavor::token}) {
    SCOPED_TRACE(flavor_name(flavor));
    const std::string name = "own:holdable:" + std::string(flavor_name(flavor));
    expect_armed_with_the_delay(name,
                                [&](Client& client) {
                                  std::unique_ptr<Holdable> held =
                                      client.holdable(flavor, name, {.lock_delay = kDelay});
                                  auto* lock = dynamic_cast<Lock*>(held.get());
                                  EXPECT_NE(lock, nullptr);
                                  (void)held.release();
                                  return std::unique_ptr<Lock>(lock);
                                },
                                {});
  }
}

TEST_P(LockDelayTest, ACompositeLocksNodesArmItsOwnDelay) {
  Client& holder = env().add_client();
  env().spawn(holder, [&] {
    const std::unique_ptr<Holdable> lock = holder.holdable(Flavor::multilock, "own:multi", {.lock_delay = kDelay});
    LockHold hold = lock->try_acquire_hold({});
    ASSERT_TRUE(hold);
    expect_armed_for("own:multi", kDelayMs);
    hold.release();
    EXPECT_EQ(pttl("own:multi"), -2);
  });
  env().run();
}

// A lock set to no delay of its own is armed without the client's.
TEST_P(LockDelayTest, ALockWithoutADelayOfItsOwnArmsNoneOfItsClients) {
  Client& holder = env().add_client(ClientOptions{.lock_delay = kDelay});
  env().spawn(holder, [&] {
    ReentrantLock plain = holder.lock("own:none", {.lock_delay = Duration::zero()});
    ReentrantLock delayed = holder.lock("own:clients");
    plain.lock();
    delayed.lock();
    expect_armed_for("own:none", 0);
    expect_armed_for("own:clients", kDelayMs);
    EXPECT_EQ(identity_delay_ms(Flavor::reentrant, "own:none"), 0) << "the lock's delay, not the client's";
    EXPECT_EQ(identity_delay_ms(Flavor::reentrant, "own:clients"), kDelayMs);
    plain.unlock();
    delayed.unlock();
  });
  env().run();
}

TEST_P(LockDelayTest, APermitSemaphoresOwnDelayIsArmed) {
  Client& holder = env().add_client();
  env().spawn(holder, [&] {
    PermitSemaphore delayed = holder.permit_semaphore("own:permits", kOwnDelay);
    ASSERT_TRUE(delayed.try_set_permits(2));
    const PermitId permit = delayed.acquire(seconds(10));
    PermitSemaphore plain = holder.permit_semaphore("own:permits");
    const PermitId other = plain.acquire(seconds(10));
    // 10 s, with the delay or not.
    const std::int64_t now_ms = holder.runtime().wall_clock_ms();
    EXPECT_NEAR(permit_lease_left_ms("own:permits", permit, now_ms), 10'000 + kDelayMs, 1'000);
    EXPECT_NEAR(permit_lease_left_ms("own:permits", other, now_ms), 10'000, 1'000);
    delayed.release(permit);
    plain.release(other);
  });
  env().run();
}

TEST_P(LockDelayTest, AnElectionsOwnDelayIsArmed) {
  Client& candidate = env().add_client();
  env().spawn(candidate, [&] {
    Election election = candidate.election("own:election", {.lock_delay = kDelay});
    Leadership leading = election.campaign("me");
    ASSERT_TRUE(leading.held());
    expect_armed_for("own:election", kDelayMs);
    leading.resign();
    EXPECT_EQ(pttl("own:election"), -2);
  });
  env().run();
}

// A lock policy's lock_delay_ms is armed by the locks it makes.
TEST_P(LockDelayTest, APolicysDelayIsArmedByTheLocksItMakes) {
  const LockPolicy policy = LockPolicy::parse(
      "[[rule]]\nmatch = \"jobs:*\"\nlock_delay_ms = 5000\n"
      "[[rule]]\nmatch = \"slots:*\"\nflavor = \"semaphore\"\npermits = 2\nlock_delay_ms = 5000\n",
      "locks.toml");
  Client& holder = env().add_client();
  env().spawn(holder, [&] {
    const std::unique_ptr<Lock> job = policy.lock_for(holder, "jobs:nightly");
    const std::unique_ptr<Lock> other = policy.lock_for(holder, "other");
    job->lock();
    other->lock();
    expect_armed_for("jobs:nightly", kDelayMs);
    expect_armed_for("other", 0);
    job->unlock();
    other->unlock();
    PermitSemaphore slots = policy.semaphore_for(holder, "slots:deploy");
    ASSERT_TRUE(slots.try_set_permits(2));
    const PermitId permit = slots.acquire(seconds(10));
    EXPECT_NEAR(permit_lease_left_ms("slots:deploy", permit, holder.runtime().wall_clock_ms()), 10'000 + kDelayMs,
                1'000);
    slots.release(permit);
  });
  env().run();
}

TEST_P(LockDelayTest, WriteHalfArmsItsLeaseAndTheDelay) {
  Client& holder = env().add_client(ClientOptions{.lock_delay = kDelay});
  env().spawn(holder, [&] {
    ReadWriteLock lock = holder.read_write_lock("delay:rw");
    lock.write().lock();
    expect_armed_for("delay:rw", kDelayMs);
    EXPECT_LT(*lock.write().remaining_lease(), milliseconds(kWatchdogMs));
    lock.write().unlock();
    EXPECT_EQ(pttl("delay:rw"), -2);
  });
  env().run();
}

TEST_P(LockDelayTest, OutOfRangeIsRefused) {
  EXPECT_THROW((void)env().add_client(ClientOptions{.lock_delay = -milliseconds(1)}), InvalidArgumentError);
  EXPECT_THROW((void)env().add_client(ClientOptions{.lock_delay = kMaxLockDelay + milliseconds(1)}),
               InvalidArgumentError);
  EXPECT_NO_THROW((void)env().add_client(ClientOptions{.lock_delay = kMaxLockDelay}));
  // A lock's own: refused when the handle is made, before anything is sent.
  Client& client = env().add_client();
  for (const Duration bad : {Duration(-milliseconds(1)), Duration(kMaxLockDelay + milliseconds(1))}) {
    const LockOptions options{.lock_delay = bad};
    EXPECT_THROW((void)client.lock("bad", options), InvalidArgumentError);
    EXPECT_THROW((void)client.token_lock("bad", options), InvalidArgumentError);
    EXPECT_THROW((void)client.fair_lock("bad", {.lock_delay = bad}), InvalidArgumentError);
    EXPECT_THROW((void)client.read_write_lock("bad", options), InvalidArgumentError);
    EXPECT_THROW((void)client.permit_semaphore("bad", options), InvalidArgumentError);
    EXPECT_THROW((void)client.holdable(Flavor::reentrant, "bad", {.lock_delay = bad}), InvalidArgumentError);
  }
  // The counting semaphore has no lease to arm it on.
  EXPECT_THROW((void)client.holdable(Flavor::counting_semaphore, "bad", {.lock_delay = kDelay}), InvalidArgumentError);
  EXPECT_NO_THROW((void)client.lock("good", {.lock_delay = kMaxLockDelay}));
}

// One client renews locks with different delays: each keeps its own
// (renewals are batched per delay).
TEST_P(LockDelayTest, RenewalsKeepEachLocksDelay) {
  TURNSTILE_SIM_ONLY();
  Client& holder = env().add_client(ClientOptions{.lock_delay = seconds(10)});
  env().spawn(holder, [&] {
    std::vector<ReentrantLock> locks;
    locks.push_back(holder.lock("each:none", {.lock_delay = Duration::zero()}));
    locks.push_back(holder.lock("each:5s", {.lock_delay = seconds(5)}));
    locks.push_back(holder.lock("each:clients"));
    locks.push_back(holder.lock("each:20s", {.lock_delay = seconds(20)}));
    for (ReentrantLock& lock : locks) lock.lock();
    holder.runtime().sleep_for(seconds(15));  // renewed at about 10 s
    // Renewed about 5 s ago to the lease and each lock's delay.
    for (const auto& [name, delay_ms] : std::vector<std::pair<std::string, std::int64_t>>{
             {"each:none", 0}, {"each:5s", 5'000}, {"each:clients", 10'000}, {"each:20s", 20'000}}) {
      SCOPED_TRACE(name);
      EXPECT_GT(pttl(name), kWatchdogMs + delay_ms - 6'000);
      EXPECT_LE(pttl(name), kWatchdogMs + delay_ms - 4'000);
    }
    for (ReentrantLock& lock : locks) {
      EXPECT_TRUE(lock.is_held_by_current_thread());
      lock.unlock();
    }
  });
  env().run();
}

// A reentrant hold taken again through a handle with another delay takes
// that one: its acquisition, its renewals, and a partial unlock re-arm it.
TEST_P(LockDelayTest, AReentrantHoldTakesTheDelayOfItsLatestAcquisition) {
  TURNSTILE_SIM_ONLY();
  Client& holder = env().add_client();
  env().spawn(holder, [&] {
    ReentrantLock first = holder.lock("latest", {.lock_delay = seconds(5)});
    ReentrantLock second = holder.lock("latest", {.lock_delay = seconds(20)});
    first.lock();
    expect_armed_for("latest", 5'000);
    second.lock();
    expect_armed_for("latest", 20'000);
    holder.runtime().sleep_for(seconds(15));  // renewed at about 10 s
    EXPECT_GT(pttl("latest"), kWatchdogMs + 20'000 - 6'000);
    EXPECT_LE(pttl("latest"), kWatchdogMs + 20'000 - 4'000);
    first.unlock();  // one of two: the lease is re-armed, with the delay
    expect_armed_for("latest", 20'000);
    EXPECT_TRUE(second.is_held_by_current_thread());
    second.unlock();
    EXPECT_EQ(pttl("latest"), -2);
  });
  env().run();
}

// The watchdog's renewals re-arm the lease and the delay.
TEST_P(LockDelayTest, RenewalsKeepTheDelay) {
  TURNSTILE_SIM_ONLY();
  Client& holder = env().add_client(ClientOptions{.lock_delay = kDelay});
  env().spawn(holder, [&] {
    ReentrantLock lock = holder.lock("delay:renewed");
    lock.lock();
    holder.runtime().sleep_for(seconds(15));  // renewed at about 10 s
    // Renewed to 35 s about 5 s ago; without the delay it would be ~25 s.
    EXPECT_GT(pttl("delay:renewed"), kWatchdogMs + kDelayMs - 6'000);
    EXPECT_TRUE(lock.is_held_by_current_thread());
    lock.unlock();
  });
  env().run();
}

// A crashed holder keeps the others out for its lease and the delay; one
// without a delay, for its lease alone.
TEST_P(LockDelayTest, ACrashedHoldersLockFreesAfterTheLeaseAndTheDelay) {
  TURNSTILE_SIM_ONLY();
  enum class Delay { none, clients, locks };
  for (const Delay delay : {Delay::none, Delay::clients, Delay::locks}) {
    const bool delayed = delay != Delay::none;
    SCOPED_TRACE(delay == Delay::none ? "without" : delay == Delay::clients ? "the client's 20 s" : "the lock's 20 s");
    const std::string name = "delay:crash:" + std::to_string(static_cast<int>(delay));
    Client& holder = env().add_client(
        ClientOptions{.lock_delay = delay == Delay::clients ? Duration(seconds(20)) : Duration::zero()});
    Client& other = env().add_client();
    std::optional<Instant> acquired_at;
    bool held = false;
    env().spawn(holder, [&] {
      ReentrantLock lock = holder.lock(
          name, {.lock_delay = delay == Delay::locks ? std::optional<Duration>(seconds(20)) : std::nullopt});
      acquired_at = holder.runtime().now();
      lock.lock();
      held = true;
      holder.runtime().sleep_for(minutes(5));  // crashed meanwhile
    });
    env().spawn(other, [&] {
      ASSERT_TRUE(eventually(other, [&] { return held; }));
      env().crash(holder);  // nothing released
      ReentrantLock lock = other.lock(name);
      ASSERT_TRUE(lock.try_lock({.wait = minutes(2)}));
      const Instant got_it = other.runtime().now();
      const Duration kept = got_it - *acquired_at;
      const Duration expected = seconds(30) + (delayed ? seconds(20) : seconds(0));
      EXPECT_GE(kept, expected - milliseconds(10));
      EXPECT_LE(kept, expected + seconds(1));
      lock.unlock();
    });
    env().run();
  }
}

// The failure lock-delay exists for: a holder frozen past its lease (a GC
// pause, SIGSTOP). It is told at its deadline, once it runs again; with a
// delay longer than the pause nobody was let in before that, and the
// watchdog sends no renewal for a hold past its deadline (which would keep
// the key from everybody for another lease and delay).
TEST_P(LockDelayTest, AFrozenHolderIsToldBeforeAnybodyElseGetsIn) {
  TURNSTILE_SIM_ONLY();
  Client& holder = env().add_client(ClientOptions{.lock_delay = seconds(20)});
  Client& other = env().add_client();
  std::optional<Instant> acquired_at;
  std::optional<Instant> lost_at;
  std::optional<LockLostReason> lost_reason;
  std::optional<Instant> other_got_it;
  env().spawn(holder, [&] {
    ReentrantLock lock = holder.lock("delay:frozen");
    lock.set_lost_handler([&](const LockLost& lost) {
      lost_at = holder.runtime().now();
      lost_reason = lost.reason;
    });
    acquired_at = holder.runtime().now();
    lock.lock();
    env().freeze(holder);  // 40 s: past the 30 s lease, within lease + delay
    holder.runtime().sleep_for(milliseconds(1));
    EXPECT_FALSE(lock.is_held_by_current_thread());
    // No unlock(): one now would end the delay (its holder is done).
  });
  env().spawn(other, [&] {
    ASSERT_TRUE(eventually(other, [&] { return acquired_at.has_value(); }));
    other.runtime().schedule_after(seconds(40), [&] { env().thaw(holder); });
    ReentrantLock lock = other.lock("delay:frozen");
    ASSERT_TRUE(lock.try_lock({.wait = minutes(3)}));
    other_got_it = other.runtime().now();
    lock.unlock();
  });
  env().run();
  ASSERT_TRUE(acquired_at && lost_at && other_got_it);
  EXPECT_EQ(lost_reason, LockLostReason::lease_expired);
  EXPECT_LT(*lost_at, *other_got_it) << "the frozen holder was told before anybody else got in";
  // Not before the lease and the delay; no renewal after the thaw pushed
  // it further (that would be 40 s + 50 s).
  EXPECT_GE(*other_got_it - *acquired_at, seconds(50) - milliseconds(10));
  EXPECT_LE(*other_got_it - *acquired_at, seconds(51));
}

// Released after its local deadline, before the expiry timer had its turn
// (the holder thawed and released at once): the hold was lost at the
// deadline, and is told so, though its key is still there.
TEST_P(LockDelayTest, AHoldReleasedPastItsDeadlineIsLost) {
  TURNSTILE_SIM_ONLY();
  Client& holder = env().add_client(ClientOptions{.lock_delay = seconds(20)});
  Client& other = env().add_client();
  bool held = false;
  std::vector<LockLostReason> lost;
  env().spawn(holder, [&] {
    ReentrantLock lock = holder.lock("delay:late-release");
    lock.set_lost_handler([&](const LockLost& event) { lost.push_back(event.reason); });
    LockHold hold = lock.try_acquire_hold({});
    ASSERT_TRUE(hold);
    PermitSemaphore semaphore = holder.permit_semaphore("delay:late-permit");
    ASSERT_TRUE(semaphore.try_set_permits(1));
    const PermitId permit = semaphore.acquire();
    held = true;
    env().freeze(holder);
    holder.runtime().sleep_for(milliseconds(1));  // frozen here; runs first on the thaw
    EXPECT_THROW(hold.release_or_throw(), NotOwnerError) << "released as if held in time";
    EXPECT_THROW(semaphore.release(permit), PermitNotHeldError);
  });
  env().spawn(other, [&] {
    ASSERT_TRUE(eventually(other, [&] { return held; }));
    other.runtime().schedule_after(seconds(40), [&] { env().thaw(holder); });
  });
  env().run();
  EXPECT_EQ(lost, std::vector<LockLostReason>{LockLostReason::lease_expired});
}

// A crash-safe semaphore's permit: its expiry is the lease and the delay.
TEST_P(LockDelayTest, ACrashedHoldersPermitComesBackAfterTheLeaseAndTheDelay) {
  TURNSTILE_SIM_ONLY();
  Client& holder = env().add_client(ClientOptions{.lock_delay = seconds(20)});
  Client& other = env().add_client();
  std::optional<Instant> acquired_at;
  bool held = false;
  env().spawn(holder, [&] {
    PermitSemaphore semaphore = holder.permit_semaphore("delay:permits");
    ASSERT_TRUE(semaphore.try_set_permits(1));
    acquired_at = holder.runtime().now();
    (void)semaphore.acquire();
    held = true;
    holder.runtime().sleep_for(minutes(5));  // crashed meanwhile
  });
  env().spawn(other, [&] {
    ASSERT_TRUE(eventually(other, [&] { return held; }));
    env().crash(holder);
    PermitSemaphore semaphore = other.permit_semaphore("delay:permits");
    const std::optional<PermitId> permit = semaphore.try_acquire({.wait = minutes(2)});
    ASSERT_TRUE(permit.has_value());
    const Duration kept = other.runtime().now() - *acquired_at;
    EXPECT_GE(kept, seconds(50) - milliseconds(10));
    EXPECT_LE(kept, seconds(51));
    semaphore.release(*permit);
  });
  env().run();
}

INSTANTIATE_TEST_SUITE_P(Environments, LockDelayTest, ::testing::ValuesIn(lock_environments()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace turnstile::testing
