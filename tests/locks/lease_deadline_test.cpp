// The safety rule (turnstile/lock.h, "The local deadline"), in virtual
// time: a holder never believes it holds past its local deadline; waiters
// ride out transient failures, can be cancelled, and a retry after a reply
// lost in transit never takes a second hold.
//
// Every test runs in a sim::World on fixed seeds: exact, no real time.

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "fake_redis/server.h"
#include "locks/engine/latched_unlock.h"
#include "lua_scripts.h"
#include "sim/fake_backend.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/fair_lock.h"
#include "turnstile/key_layout.h"
#include "turnstile/hold.h"
#include "turnstile/flavor.h"
#include "turnstile/lock.h"
#include "turnstile/read_write_lock.h"
#include "turnstile/script.h"
#include "turnstile/semaphore.h"
#include "turnstile/sim/world.h"

namespace turnstile {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::uint64_t kSeed = 17;
constexpr auto kLease = seconds(3);

// What a lease leaves to believe in with the default margins (1 % + 2 ms),
// and the local deadline of one sent at `sent`.
Duration window(Duration lease) { return lease - Duration(lease.count() / 100) - kDefaultStopMargin; }
Instant expected_deadline(Instant sent, Duration lease) { return sent + window(lease); }

// Requests on `link` hang (never reach the server, never answered) while
// `frozen` is true: a TCP link that stopped forwarding. Calls time out after
// the link's command timeout.
void freeze_when(sim::FakeBackend& link, const bool& frozen) {
  link.set_request_filter([&frozen](const std::vector<std::string>&) {
    sim::FakeBackend::RequestFate fate;
    fate.drop_request = frozen;
    return fate;
  });
}

// Loads every embedded script, so that each later script call is one
// round trip (no NOSCRIPT reload between a request and what it does).
void preload_scripts(Backend& backend) {
  for (const Script* script : embedded_scripts()) {
    (void)backend.command({"SCRIPT", "LOAD", std::string(script->source)});
  }
}

// One permit for a semaphore, nothing for a lock.
HoldableOptions permits_for(Flavor flavor) {
  HoldableOptions options;
  if (flavor == Flavor::semaphore) options.permits = 1;
  return options;
}

struct LostRecord {
  Instant at{};
  LockLostReason reason{};
};

class LeaseDeadlineTest : public ::testing::Test {
 protected:
  LeaseDeadlineTest() : world_(kSeed) {}

  ClientOptions options() {
    ClientOptions options;
    options.lease = std::chrono::duration_cast<milliseconds>(kLease);
    options.on_background_error = [](std::exception_ptr) {};
    // No server check before the first call: its round trips would come
    // between a call and its request (the deadline counts, safely, from
    // the call), and the instants here are asserted exactly.
    options.server_check = ServerCheck::off;
    return options;
  }

  sim::World world_;
};

TEST_F(LeaseDeadlineTest, FrozenLinkEndsTheHoldingAtTheDeadlineOfTheLastConfirmedRenewal) {
  for (const bool fixed_lease : {false, true}) {
    SCOPED_TRACE(fixed_lease ? "fixed lease" : "watchdog lease");
    sim::World world(kSeed);
    sim::SimClient& holder = world.add_client("holder");
    sim::SimClient& other = world.add_client("other");
    // Every reply takes 300 ms (so a lease counted from the reply would end
    // 300 ms late) until the link freezes: then requests hang.
    bool frozen = false;
    Instant last_sent{};  // of the last request the server answered
    holder.link().set_request_filter([&](const std::vector<std::string>&) {
      sim::FakeBackend::RequestFate fate;
      fate.drop_request = frozen;
      fate.extra_reply_delay = milliseconds(300);
      if (!frozen) last_sent = world.now();
      return fate;
    });
    std::optional<LostRecord> lost;
    std::optional<Instant> token_stopped_at;
    Instant other_acquired{};
    world.spawn(holder, [&] {
      holder.runtime().sleep_for(milliseconds(10));  // the scripts are loaded (below)
      Client client(holder.backend_ptr(), holder.runtime_ptr(), options());
      ReentrantLock lock = client.lock("job");
      lock.set_lost_handler([&](const LockLost& event) { lost = LostRecord{holder.runtime().now(), event.reason}; });
      if (fixed_lease) {
        lock.lock(kLease);
      } else {
        lock.lock();
      }
      // The loss as a stop token: requested at the same instant.
      const std::stop_callback on_loss(lock.loss_token(), [&] { token_stopped_at = holder.runtime().now(); });
      if (!fixed_lease) {
        // Two renewals go through (one every window/3 ~ 990 ms), then the link freezes.
        holder.runtime().sleep_for(milliseconds(2500));
      }
      frozen = true;
      holder.runtime().sleep_for(seconds(10));
      EXPECT_FALSE(lost == std::nullopt);
      EXPECT_NO_THROW(lock.unlock());  // the link is still frozen
    });
    world.spawn(other, [&] {
      preload_scripts(other.backend());  // before the holder's first call
      Client client(other.backend_ptr(), other.runtime_ptr(), options());
      ReentrantLock lock = client.lock("job");
      other.runtime().sleep_for(seconds(2));
      lock.lock();
      other_acquired = other.runtime().now();
      lock.unlock();
    });
    world.run_until_idle();
    holder.link().set_request_filter(nullptr);  // it reads locals that die before the world
    ASSERT_TRUE(lost.has_value());
    EXPECT_EQ(lost->reason, LockLostReason::lease_expired);
    EXPECT_EQ(lost->at, expected_deadline(last_sent, kLease));
    EXPECT_EQ(token_stopped_at, lost->at);
    // The holder stopped believing before the server could grant it again.
    EXPECT_LT(lost->at, other_acquired);
  }
}

// After the local deadline the holder's own queries answer from its record
// (issue #32): a reply that arrives late never revives the holding, a call
// that outlives the deadline on a frozen link answers false rather than its
// timeout, and a query made after the deadline sends nothing.
TEST_F(LeaseDeadlineTest, OwnQueriesAfterTheDeadlineAnswerLocally) {
  for (const bool frozen_link : {false, true}) {
    SCOPED_TRACE(frozen_link ? "frozen link" : "late reply");
    sim::World world(kSeed);
    sim::SimClient& holder = world.add_client("holder");
    bool slow = false;
    int sent_while_slow = 0;
    holder.link().set_request_filter([&](const std::vector<std::string>&) {
      sim::FakeBackend::RequestFate fate;
      if (slow) {
        ++sent_while_slow;
        fate.drop_request = frozen_link;
        fate.extra_reply_delay = seconds(5);  // answered long after the deadline
      }
      return fate;
    });
    world.spawn(holder, [&] {
      Client client(holder.backend_ptr(), holder.runtime_ptr(), options());
      ReentrantLock lock = client.lock("job");
      bool told = false;
      lock.set_lost_handler([&](const LockLost&) { told = true; });
      lock.lock(kLease);  // fixed: nothing renews it
      holder.runtime().sleep_for(kLease - milliseconds(500));
      slow = true;
      // Sent while held; answered (or timed out) after the deadline.
      bool held = true;
      EXPECT_NO_THROW(held = lock.is_held_by_current_thread());
      EXPECT_TRUE(told) << "the deadline passed during the call";
      EXPECT_FALSE(held) << "a late reply revived the holding";
      const int sent_before = sent_while_slow;
      EXPECT_EQ(lock.hold_count(), 0);
      EXPECT_FALSE(lock.is_held_by_current_thread());
      EXPECT_EQ(sent_while_slow, sent_before) << "a query after the deadline went to Redis";
      slow = false;
    });
    world.run_until_idle();
    holder.link().set_request_filter(nullptr);
  }
}

// ClientOptions::on_lease_deadline: told the acquisition's deadline and
// each confirmed renewal's, always the deadline the holding is then lost
// at; nothing once the link froze, so the last deadline told is the
// loss's instant (what `turnstile run`'s guardian enforces).
TEST_F(LeaseDeadlineTest, TheLastDeadlineToldIsTheInstantTheHoldingIsLost) {
  sim::SimClient& holder = world_.add_client("holder");
  bool frozen = false;
  std::vector<Instant> sends;  // of the requests the server answered
  holder.link().set_request_filter([&](const std::vector<std::string>&) {
    sim::FakeBackend::RequestFate fate;
    fate.drop_request = frozen;
    fate.extra_reply_delay = milliseconds(100);
    if (!frozen) sends.push_back(world_.now());
    return fate;
  });
  std::vector<std::pair<std::string, Instant>> told;
  std::optional<Instant> lost_at;
  world_.spawn(holder, [&] {
    preload_scripts(holder.backend());
    ClientOptions client_options = options();
    client_options.on_lease_deadline = [&](const LeaseDeadline& lease) {
      told.emplace_back(std::string(lease.key), lease.deadline);
    };
    Client client(holder.backend_ptr(), holder.runtime_ptr(), client_options);
    ReentrantLock lock = client.lock("job");
    lock.set_lost_handler([&](const LockLost&) { lost_at = holder.runtime().now(); });
    lock.lock();
    ASSERT_EQ(told.size(), 1u);  // the acquisition's, before lock() returns
    EXPECT_EQ(told.back().second, expected_deadline(sends.back(), kLease));
    holder.runtime().sleep_for(milliseconds(2500));  // two renewals (every ~990 ms)
    frozen = true;
    holder.runtime().sleep_for(seconds(10));
    EXPECT_NO_THROW(lock.unlock());
  });
  world_.run_until_idle();
  holder.link().set_request_filter(nullptr);
  ASSERT_EQ(told.size(), 3u);
  for (std::size_t i = 0; i < told.size(); ++i) {
    EXPECT_EQ(told[i].first, "job");
    if (i > 0) {
      EXPECT_GT(told[i].second, told[i - 1].second);
    }
  }
  ASSERT_TRUE(lost_at.has_value());
  EXPECT_EQ(*lost_at, told.back().second);
}

TEST_F(LeaseDeadlineTest, HangingRenewalIsAbandonedAndTheNextGoesOutOnTime) {
  // One renewal is answered far too late (a stalled reply); the next one,
  // a renewal period later, must go out anyway and keep the lock.
  sim::SimClient& holder = world_.add_client("holder");
  std::vector<LostRecord> lost;
  // Outlives the task: the late call goes on (and reloads its script)
  // after the task has ended.
  bool first_renewal = true;
  world_.spawn(holder, [&] {
    ClientOptions client_options = options();
    Client client(holder.backend_ptr(), holder.runtime_ptr(), client_options);
    ReentrantLock lock = client.lock("job");
    lock.set_lost_handler([&](const LockLost& event) { lost.push_back({holder.runtime().now(), event.reason}); });
    lock.lock();
    holder.link().set_request_filter([&first_renewal](const std::vector<std::string>&) {
      sim::FakeBackend::RequestFate fate;
      if (first_renewal) {
        first_renewal = false;
        fate.extra_reply_delay = seconds(60);  // answered far too late
      }
      return fate;
    });
    holder.runtime().sleep_for(seconds(30));
    EXPECT_TRUE(lock.is_held_by_current_thread());
    lock.unlock();
  });
  world_.run_until_idle();
  holder.link().set_request_filter(nullptr);
  EXPECT_TRUE(lost.empty()) << "lost at " << lost.front().at.time_since_epoch().count();
}

// extend() racing a watchdog renewal (issue #22): the renewal goes out
// first but reaches the server after the extension and cuts the 60 s lease
// back to the watchdog's 3 s. The holder must stop believing by the
// renewal's 3 s (taken from when the renewal was taken up), not the 60 s it
// asked for: the loss comes while the server still has the key.
TEST_F(LeaseDeadlineTest, ExtensionRacingARenewalNeverOutlivesTheServersLease) {
  sim::SimClient& holder = world_.add_client("holder");
  std::vector<LostRecord> lost;
  std::optional<std::int64_t> pttl_at_loss;
  bool renewal_delayed = false;
  Instant acquired_at{};
  world_.spawn(holder, [&] {
    preload_scripts(holder.backend());
    Client client(holder.backend_ptr(), holder.runtime_ptr(), options());
    ReentrantLock lock = client.lock("job");
    lock.set_lost_handler([&](const LockLost& event) {
      lost.push_back({holder.runtime().now(), event.reason});
      sim::Server& server = world_.server(0);
      const std::unique_ptr<sim::Session> session = server.connect();
      pttl_at_loss = server.execute(*session, {"PTTL", "job"}).as_integer();
    });
    holder.link().set_request_filter([&](const std::vector<std::string>& argv) {
      sim::FakeBackend::RequestFate fate;
      if (!renewal_delayed && argv.size() > 1 && argv[1] == scripts::reentrant_lock_renew.sha1) {
        renewal_delayed = true;
        fate.extra_request_delay = milliseconds(300);  // reaches the server after the extension
      }
      return fate;
    });
    acquired_at = holder.runtime().now();
    lock.lock();
    const Duration period = client.options().lease - milliseconds(32);
    holder.runtime().sleep_until(acquired_at + period / 3 + milliseconds(100));  // the renewal is in flight
    ASSERT_TRUE(renewal_delayed);
    lock.extend(seconds(60));
    holder.runtime().sleep_for(seconds(10));
    EXPECT_FALSE(lock.is_held_by_current_thread());
  });
  world_.run_until_idle();
  holder.link().set_request_filter(nullptr);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].reason, LockLostReason::lease_expired);
  ASSERT_TRUE(pttl_at_loss);
  EXPECT_GT(*pttl_at_loss, 0) << "the holder believed past the server's lease";
  EXPECT_LT(lost[0].at, acquired_at + seconds(5));
}

TEST_F(LeaseDeadlineTest, FixedLeaseRunningOutIsReportedAndTheLateUnlockThrowsWhileRedisStillHasIt) {
  sim::SimClient& holder = world_.add_client("holder");
  world_.spawn(holder, [&] {
    Client client(holder.backend_ptr(), holder.runtime_ptr(), options());
    for (const char* flavor : {"reentrant", "token", "fair"}) {
      SCOPED_TRACE(flavor);
      std::unique_ptr<Lock> lock;
      const std::string name = std::string("leased-") + flavor;
      if (std::string(flavor) == "reentrant") lock = std::make_unique<ReentrantLock>(client.lock(name));
      if (std::string(flavor) == "token") lock = std::make_unique<TokenLock>(client.token_lock(name));
      if (std::string(flavor) == "fair") lock = std::make_unique<FairLock>(client.fair_lock(name));
      std::vector<LockLostReason> lost;
      lock->set_lost_handler([&](const LockLost& event) { lost.push_back(event.reason); });
      const Instant sent = holder.runtime().now();
      lock->lock(seconds(10));
      const Instant deadline = expected_deadline(sent, seconds(10));
      holder.runtime().sleep_until(deadline - milliseconds(1));
      EXPECT_TRUE(lock->is_held_by_current_thread());
      const auto left = lock->remaining_lease();
      ASSERT_TRUE(left.has_value());
      EXPECT_LE(*left, milliseconds(1));  // the holder's belief, not Redis's 103 ms
      holder.runtime().sleep_until(deadline);
      EXPECT_EQ(lost, std::vector<LockLostReason>{LockLostReason::lease_expired});
      EXPECT_FALSE(lock->is_held_by_current_thread());
      EXPECT_TRUE(lock->is_locked());   // Redis still has it for the margin...
      EXPECT_NO_THROW(lock->unlock());  // ...but it was lost: told, and unlock() returns
      EXPECT_FALSE(lock->is_locked());  // and the unlock gave it back early
    }
  });
  world_.run_until_idle();
}

TEST_F(LeaseDeadlineTest, LeaseNotLongerThanItsMarginIsRefused) {
  sim::SimClient& holder = world_.add_client("holder");
  world_.spawn(holder, [&] {
    ClientOptions client_options = options();
    client_options.stop_margin = seconds(1);
    Client client(holder.backend_ptr(), holder.runtime_ptr(), client_options);
    ReentrantLock lock = client.lock("short");
    EXPECT_THROW(lock.lock(seconds(1)), InvalidArgumentError);
    EXPECT_FALSE(lock.is_locked());
    PermitSemaphore permits = client.permit_semaphore("short-permits");
    ASSERT_TRUE(permits.try_set_permits(1));
    EXPECT_THROW((void)permits.try_acquire(AcquireOptions{.wait = {}, .lease = seconds(1)}), InvalidArgumentError);
  });
  world_.run_until_idle();
  ClientOptions bad = options();
  bad.stop_margin = seconds(5);  // more than the 3 s watchdog lease
  sim::SimClient& other = world_.add_client("other");
  EXPECT_THROW(Client(other.backend_ptr(), other.runtime_ptr(), bad), InvalidArgumentError);
  bad = options();
  bad.clock_drift_factor = 0.7;
  EXPECT_THROW(Client(other.backend_ptr(), other.runtime_ptr(), bad), InvalidArgumentError);
  bad = options();
  bad.max_hold = Duration::zero();
  EXPECT_THROW(Client(other.backend_ptr(), other.runtime_ptr(), bad), InvalidArgumentError);
  bad.max_hold = kMaxLease + std::chrono::milliseconds(1);
  EXPECT_THROW(Client(other.backend_ptr(), other.runtime_ptr(), bad), InvalidArgumentError);
}

TEST_F(LeaseDeadlineTest, PermitsKeepTheirDeadlinesToo) {
  sim::SimClient& holder = world_.add_client("holder");
  bool frozen = false;
  freeze_when(holder.link(), frozen);
  std::vector<std::pair<Instant, LockLostReason>> lost;
  Instant sent{};
  world_.spawn(holder, [&] {
    Client client(holder.backend_ptr(), holder.runtime_ptr(), options());
    PermitSemaphore permits = client.permit_semaphore("pool");
    ASSERT_TRUE(permits.try_set_permits(2));
    permits.set_lost_handler([&](const PermitLost& event) { lost.emplace_back(holder.runtime().now(), event.reason); });
    sent = holder.runtime().now();
    const PermitId fixed = permits.acquire(seconds(2));
    const PermitId renewed = permits.acquire();
    frozen = true;
    holder.runtime().sleep_for(seconds(10));
    frozen = false;
    // Both lost: releasing either is refused, whatever Redis has.
    EXPECT_THROW(permits.release(fixed), PermitNotHeldError);
    EXPECT_THROW(permits.release(renewed), PermitNotHeldError);
  });
  world_.run_until_idle();
  holder.link().set_request_filter(nullptr);  // `frozen` dies before the world
  ASSERT_EQ(lost.size(), 2u);
  EXPECT_EQ(lost[0].first, expected_deadline(sent, seconds(2)));
  EXPECT_EQ(lost[0].second, LockLostReason::lease_expired);
  EXPECT_EQ(lost[1].second, LockLostReason::lease_expired);
  EXPECT_LE(lost[1].first, expected_deadline(sent, kLease));
}

// A waiter whose Redis goes away for a while keeps waiting and gets the lock.
TEST_F(LeaseDeadlineTest, WaiterRidesOutALinkDownAndARestart) {
  sim::SimClient& holder = world_.add_client("holder");
  sim::SimClient& waiter = world_.add_client("waiter");
  bool acquired = false;
  world_.spawn(holder, [&] {
    Client client(holder.backend_ptr(), holder.runtime_ptr(), options());
    ReentrantLock lock = client.lock("job");
    lock.lock();
    holder.runtime().sleep_for(seconds(5));
    lock.unlock();
  });
  world_.spawn(waiter, [&] {
    Client client(waiter.backend_ptr(), waiter.runtime_ptr(), options());
    ReentrantLock lock = client.lock("job");
    waiter.runtime().sleep_for(milliseconds(10));
    world_.after(milliseconds(500), [&] { waiter.link().set_down(true); });
    world_.after(milliseconds(3500), [&] { waiter.link().set_down(false); });
    EXPECT_NO_THROW(lock.lock());
    acquired = lock.is_held_by_current_thread();
    lock.unlock();
  });
  world_.run_until_idle();
  EXPECT_TRUE(acquired);
}

TEST_F(LeaseDeadlineTest, WaiterGivesUpAfterTheUnreachableLimit) {
  sim::SimClient& holder = world_.add_client("holder");
  sim::SimClient& waiter = world_.add_client("waiter");
  Instant down_at{};
  Instant gave_up{};
  world_.spawn(holder, [&] {
    Client client(holder.backend_ptr(), holder.runtime_ptr(), options());
    ReentrantLock lock = client.lock("job");
    lock.lock();
    holder.runtime().sleep_for(seconds(60));
    lock.unlock();
  });
  world_.spawn(waiter, [&] {
    ClientOptions client_options = options();
    client_options.unreachable_limit = seconds(7);
    Client client(waiter.backend_ptr(), waiter.runtime_ptr(), client_options);
    ReentrantLock lock = client.lock("job");
    waiter.runtime().sleep_for(milliseconds(10));
    world_.after(milliseconds(500), [&] {
      down_at = world_.now();
      waiter.link().set_down(true);
    });
    EXPECT_THROW(lock.lock(), ConnectionError);
    gave_up = waiter.runtime().now();
    waiter.link().set_down(false);
  });
  world_.run_until_idle();
  // Counted from the first failed call, which comes at the latest when the
  // waiter wakes to retry (the holder's remaining lease, <= 3 s), plus at
  // most one backoff (1 s) past the limit.
  EXPECT_GE(gave_up - down_at, seconds(7));
  EXPECT_LE(gave_up - down_at, seconds(7) + kLease + seconds(1));
}

// The reply of the acquisition that took the lock is lost; the retry must
// not take a second hold (one unlock frees it) nor take more permits.
TEST_F(LeaseDeadlineTest, RetryAfterALostReplyNeverHoldsTwice) {
  sim::SimClient& holder = world_.add_client("holder");
  sim::SimClient& other = world_.add_client("other");
  int dropped = 0;  // outlives the task, like the filter that reads it
  world_.spawn(holder, [&] {
    preload_scripts(holder.backend());  // so the dropped reply is of a call that ran
    Client client(holder.backend_ptr(), holder.runtime_ptr(), options());
    holder.link().set_request_filter([&dropped](const std::vector<std::string>& argv) {
      sim::FakeBackend::RequestFate fate;
      // The first script call of each acquisition below runs, its reply is lost.
      if (dropped == 0 && !argv.empty() && (argv[0] == "EVALSHA" || argv[0] == "evalsha")) {
        fate.drop_reply = true;
        ++dropped;
      }
      return fate;
    });
    const auto arm = [&dropped] { dropped = 0; };

    ReentrantLock reentrant = client.lock("reentrant");
    arm();
    reentrant.lock();  // waits: its first try's reply is lost
    EXPECT_EQ(reentrant.hold_count(), 1);
    reentrant.unlock();
    EXPECT_FALSE(reentrant.is_locked());

    TokenLock token = client.token_lock("token");
    arm();
    const Instant asked = holder.runtime().now();
    token.lock();
    // At the retry, not after the phantom's lease ran out.
    EXPECT_LT(holder.runtime().now() - asked, kLease);
    token.unlock();
    EXPECT_FALSE(token.is_locked());

    FairLock fair = client.fair_lock("fair");
    arm();
    fair.lock();
    EXPECT_EQ(fair.hold_count(), 1);
    fair.unlock();
    EXPECT_FALSE(fair.is_locked());

    PermitSemaphore permits = client.permit_semaphore("pool");
    ASSERT_TRUE(permits.try_set_permits(3));
    arm();
    const PermitId permit = permits.acquire();
    EXPECT_EQ(permits.available_permits(), 2);
    permits.release(permit);
    EXPECT_EQ(permits.available_permits(), 3);
  });
  world_.run_until_idle();
  holder.link().set_request_filter(nullptr);
  (void)other;
}

// An unlock whose reply is lost after the server ran it is sent again; the
// resend reads the latch the first send wrote (lua/lib/unlock_latch.lua:
// the first send reads none), so a partial unlock counts once and the last
// one is a release, not a loss, for every latched flavor.
TEST_F(LeaseDeadlineTest, UnlockSentAgainAfterALostReplyCountsOnce) {
  sim::SimClient& holder = world_.add_client("holder");
  bool finished = false;
  world_.spawn(holder, [&] {
    preload_scripts(holder.backend());  // so the dropped reply is of a call that ran
    Client client(holder.backend_ptr(), holder.runtime_ptr(), options());
    const std::vector<const Script*> unlocks = {&scripts::reentrant_lock_unlock, &scripts::fair_lock_unlock,
                                                &scripts::read_write_lock_write_unlock,
                                                &scripts::read_write_lock_read_unlock};
    // The latch-lifetime argument of each unlock sent: ARGV[3] of the read
    // half's script, ARGV[4] of the others'.
    std::vector<std::string> lifetimes;
    bool drop_next_unlock = false;
    holder.link().set_request_filter([&](const std::vector<std::string>& argv) {
      sim::FakeBackend::RequestFate fate;
      if (argv.size() < 3 || (argv[0] != "EVALSHA" && argv[0] != "evalsha")) return fate;
      for (const Script* unlock : unlocks) {
        if (argv[1] != unlock->sha1) continue;
        const std::size_t first_arg = 3 + std::stoul(argv[2]);
        lifetimes.push_back(argv.at(first_arg + (unlock == &scripts::read_write_lock_read_unlock ? 2 : 3)));
        fate.drop_reply = std::exchange(drop_next_unlock, false);
      }
      return fate;
    });
    const std::string first = std::to_string(-detail::kUnlockLatchLifetimeMs);
    const std::string again = std::to_string(detail::kUnlockLatchLifetimeMs);
    ReentrantLock reentrant = client.lock("latched-reentrant");
    FairLock fair = client.fair_lock("latched-fair");
    ReadWriteLock read_write = client.read_write_lock("latched-rw");
    const std::vector<std::pair<const char*, Lock*>> locks = {
        {"reentrant", &reentrant}, {"fair", &fair}, {"write", &read_write.write()}, {"read", &read_write.read()}};
    for (const auto& [what, lock] : locks) {
      SCOPED_TRACE(what);
      int losses = 0;
      lock->set_lost_handler([&losses](const LockLost&) { ++losses; });
      lock->lock();
      lock->lock();
      for (const int left : {1, 0}) {
        lifetimes.clear();
        drop_next_unlock = true;
        EXPECT_NO_THROW(lock->unlock());
        EXPECT_EQ(lifetimes, (std::vector<std::string>{first, again}));  // sent, then sent again
        EXPECT_EQ(lock->hold_count(), left);
        EXPECT_EQ(lock->is_locked(), left > 0);
      }
      EXPECT_EQ(losses, 0);
    }
    finished = true;
  });
  world_.run_for(seconds(60));
  holder.link().set_request_filter(nullptr);
  EXPECT_TRUE(finished);
}

// An unlock that fails in transit leaves the hold on the server (until a
// retried unlock or its deadline); the owner's next lock() must give it
// back first, not stack a reentrant hold on it and renew both for good (nor,
// for the token lock, refuse the lock as already held by this task).
TEST_F(LeaseDeadlineTest, LockAfterAnUnlockFailedInTransitDoesNotStackOnTheOldHold) {
  sim::SimClient& holder = world_.add_client("holder");
  bool finished = false;
  world_.spawn(holder, [&] {
    Client client(holder.backend_ptr(), holder.runtime_ptr(), options());
    for (const char* flavor : {"reentrant", "fair", "token"}) {
      SCOPED_TRACE(flavor);
      std::unique_ptr<Lock> lock;
      const std::string name = std::string("relocked-") + flavor;
      if (std::string(flavor) == "reentrant") lock = std::make_unique<ReentrantLock>(client.lock(name));
      if (std::string(flavor) == "fair") lock = std::make_unique<FairLock>(client.fair_lock(name));
      // Not reentrant: the hold let go of is not "already held" either.
      if (std::string(flavor) == "token") lock = std::make_unique<TokenLock>(client.token_lock(name));
      lock->lock();
      holder.link().set_down(true);
      EXPECT_NO_THROW(lock->unlock());  // unreachable: the lease ends it; reported in the background
      holder.link().set_down(false);
      lock->lock();
      EXPECT_EQ(lock->hold_count(), 1);  // not 2: the unconfirmed hold was given back
      lock->unlock();
      EXPECT_FALSE(lock->is_locked());
      // Nothing left renewed: still free several leases later.
      holder.runtime().sleep_for(kLease * 3);
      EXPECT_FALSE(lock->is_locked());
    }
    finished = true;
  });
  world_.run_for(seconds(60));
  EXPECT_TRUE(finished);
}

// A release that fails in transit and is never retried stops the renewals
// (lock.h, "Releasing"; the README's watchdog): whatever the flavor, the
// lease frees what Redis still has within three leases of it. A watchdog
// that kept renewing would keep it held for as long as the process lives.
TEST_F(LeaseDeadlineTest, AReleaseFailedInTransitAndNeverRetriedFreesTheLockWithinThreeLeases) {
  sim::SimClient& holder = world_.add_client("holder");
  std::vector<std::string> checked;
  world_.spawn(holder, [&] {
    Client client(holder.backend_ptr(), holder.runtime_ptr(), options());
    sim::Server& server = world_.server(0);
    const std::unique_ptr<sim::Session> session = server.connect();
    for (const Flavor flavor : {Flavor::reentrant, Flavor::fair, Flavor::token, Flavor::semaphore}) {
      const std::string name = std::string("abandoned-") + std::string(flavor_name(flavor));
      SCOPED_TRACE(name);
      const std::unique_ptr<Holdable> holdable = client.holdable(flavor, name, permits_for(flavor));
      LockHold hold = holdable->acquire_hold();  // watchdog lease: renewed until released
      holder.runtime().sleep_for(kLease * 2);    // renewed meanwhile
      // Whether the server still holds it: the lock's key, or an unexpired
      // permit (expired ones stay listed until the semaphore's next call).
      const auto held_on_server = [&] {
        if (flavor != Flavor::semaphore) return server.execute(*session, {"EXISTS", name}).as_integer() == 1;
        const Reply listed =
            server.execute(*session, {"ZRANGE", key_layout(flavor, name).permit_timeouts, "0", "-1", "WITHSCORES"});
        const std::int64_t now_unix_ms = server.clock().unix_time_ms();
        for (std::size_t i = 1; i < listed.as_array().size(); i += 2) {
          if (std::stoll(listed.as_array()[i].as_string()) > now_unix_ms) return true;
        }
        return false;
      };
      ASSERT_TRUE(held_on_server());
      holder.link().set_down(true);
      hold.release();  // fails: never throws, the error goes to the background handler
      holder.link().set_down(false);
      ASSERT_TRUE(held_on_server());  // still there for its lease
      holder.runtime().sleep_for(kLease * 3);
      EXPECT_FALSE(held_on_server()) << "still renewed after a failed release";
      checked.push_back(name);
    }
  });
  world_.run_for(seconds(60));
  EXPECT_EQ(checked.size(), 4u);
}

// The expiry instant is decided once (lock.h, "The local deadline"): a
// hold is no longer held at its local deadline itself, and still is the
// millisecond before, for a lock and a permit alike. Both looks are
// scheduled before the acquisition, so they run ahead of the watchdog's
// expiry timer at the same instant: held() answers by its own comparison.
TEST_F(LeaseDeadlineTest, AHoldEndsAtTheExactMillisecondOfItsDeadline) {
  sim::SimClient& holder = world_.add_client("holder");
  std::vector<Instant> told;
  std::vector<std::pair<std::string, bool>> looks;  // (when, held())
  LockHold hold;
  std::size_t checked = 0;
  world_.spawn(holder, [&] {
    ClientOptions client_options = options();
    client_options.on_lease_deadline = [&](const LeaseDeadline& lease) { told.push_back(lease.deadline); };
    Client client(holder.backend_ptr(), holder.runtime_ptr(), client_options);
    for (const Flavor flavor : {Flavor::reentrant, Flavor::semaphore}) {
      SCOPED_TRACE(flavor_name(flavor));
      const std::string kind(flavor_name(flavor));
      const std::unique_ptr<Holdable> holdable = client.holdable(flavor, "instant-" + kind, permits_for(flavor));
      const Instant deadline = expected_deadline(holder.runtime().now(), seconds(2));
      world_.at(deadline - milliseconds(1), [&, kind] { looks.emplace_back(kind + " before", hold.held()); });
      world_.at(deadline, [&, kind] { looks.emplace_back(kind + " at", hold.held()); });
      told.clear();
      hold = holdable->acquire_hold(seconds(2));  // a fixed lease: never moved
      ASSERT_EQ(told.size(), 1u);
      ASSERT_EQ(told.back(), deadline);
      holder.runtime().sleep_for(seconds(3));
      hold = LockHold();
      ++checked;
    }
  });
  world_.run_for(seconds(60));
  EXPECT_EQ(checked, 2u);
  const std::vector<std::pair<std::string, bool>> expected{
      {"reentrant before", true}, {"reentrant at", false}, {"semaphore before", true}, {"semaphore at", false}};
  EXPECT_EQ(looks, expected);
}

// The fair lock's side of it: a waiter queued while the holder's unlock
// failed is served before the holder's next acquisition (swarm: fair-fifo
// --seed 33 --clients 7 --duration 3m --faults crashes).
TEST_F(LeaseDeadlineTest, FairWaiterQueuedEarlierIsServedBeforeTheHolderRelocksAfterAFailedUnlock) {
  sim::SimClient& holder = world_.add_client("holder");
  sim::SimClient& waiter = world_.add_client("waiter");
  std::optional<Instant> waiter_acquired;
  std::optional<Instant> holder_reacquired;
  world_.spawn(holder, [&] {
    Client client(holder.backend_ptr(), holder.runtime_ptr(), options());
    FairLock lock = client.fair_lock("fifo");
    lock.lock();
    holder.runtime().sleep_for(seconds(1));  // the waiter queues meanwhile
    holder.link().set_down(true);
    EXPECT_NO_THROW(lock.unlock());  // unreachable: the lease ends it; reported in the background
    holder.link().set_down(false);
    lock.lock();
    holder_reacquired = holder.runtime().now();
    lock.unlock();
  });
  world_.spawn(waiter, [&] {
    Client client(waiter.backend_ptr(), waiter.runtime_ptr(), options());
    FairLock lock = client.fair_lock("fifo");
    waiter.runtime().sleep_for(milliseconds(100));
    lock.lock();
    waiter_acquired = waiter.runtime().now();
    waiter.runtime().sleep_for(milliseconds(500));
    lock.unlock();
  });
  world_.run_for(seconds(60));
  ASSERT_TRUE(waiter_acquired.has_value());
  ASSERT_TRUE(holder_reacquired.has_value());
  EXPECT_LT(*waiter_acquired, *holder_reacquired);
}

TEST_F(LeaseDeadlineTest, StopTokenCancelsAWaitAndWithdrawsTheFairQueueEntry) {
  sim::SimClient& holder = world_.add_client("holder");
  sim::SimClient& quitter = world_.add_client("quitter");
  sim::SimClient& next = world_.add_client("next");
  std::stop_source stop;
  Instant stopped_at{};
  Instant quitter_returned{};
  Instant next_acquired{};
  Instant released_at{};
  world_.spawn(holder, [&] {
    Client client(holder.backend_ptr(), holder.runtime_ptr(), options());
    FairLock lock = client.fair_lock("fifo");
    lock.lock();
    holder.runtime().sleep_for(seconds(2));
    released_at = holder.runtime().now();
    lock.unlock();
  });
  world_.spawn(quitter, [&] {
    Client client(quitter.backend_ptr(), quitter.runtime_ptr(), options());
    FairLock lock = client.fair_lock("fifo");
    quitter.runtime().sleep_for(milliseconds(100));
    world_.after(milliseconds(900), [&] {
      stopped_at = world_.now();
      stop.request_stop();
    });
    EXPECT_FALSE(lock.try_lock(AcquireOptions{.wait = seconds(60), .lease = std::nullopt, .stop = stop.get_token()}));
    quitter_returned = quitter.runtime().now();
  });
  world_.spawn(next, [&] {
    Client client(next.backend_ptr(), next.runtime_ptr(), options());
    FairLock lock = client.fair_lock("fifo");
    next.runtime().sleep_for(milliseconds(200));  // queued behind the quitter
    lock.lock();
    next_acquired = next.runtime().now();
    lock.unlock();
  });
  world_.run_until_idle();
  EXPECT_EQ(quitter_returned, stopped_at);  // at once: no round trip is pending in virtual time
  // The quitter's entry was withdrawn: the next waiter is served at the release.
  EXPECT_LT(next_acquired - released_at, milliseconds(100));
}

}  // namespace
}  // namespace turnstile
