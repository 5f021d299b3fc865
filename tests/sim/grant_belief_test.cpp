// A fair lock's direct handoff judged by the checkers (issue #54: the
// grantee's deadline caught through a checker, not only by the lock
// tests' assertions). The release grants the lock to the waiter at the
// head and arms its lease on the server at the release; the grant message
// reaches the grantee late (500 ms), and the grantee is cut off right
// after it, so its renewals never arrive. It must stop believing before
// the server's lease runs out: its deadline is timed from the send of the
// try whose offer the grant answered (wake_registry.cpp, grant_sent_at),
// never from the message's arrival, which would let it believe past the
// lease beside the next holder, who gets in when the lease ends.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/fake_backend.h"
#include "turnstile/client.h"
#include "turnstile/fair_lock.h"
#include "turnstile/sim/checkers.h"
#include "turnstile/sim/world.h"

namespace turnstile::sim {
namespace {

using namespace std::chrono_literals;

constexpr std::chrono::milliseconds kLease{3000};
constexpr std::int64_t kReleaseMs = 1000;
constexpr std::chrono::milliseconds kGrantDelay{500};
constexpr std::int64_t kCutOffMs = kReleaseMs + 600;      // after the grant arrived
constexpr std::int64_t kNextTriesMs = kReleaseMs + 3001;  // just past the server's lease

TEST(GrantBeliefTest, ALateGrantIsNeverBelievedPastTheLeaseTheReleaseArmed) {
  World world(5);
  Checkers checkers(world);
  checkers.watch({.resource = "orders", .reader = state_reader(Flavor::fair, "orders"), .fifo = true});
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  SimClient& carol = world.add_client("carol");
  ClientOptions options;
  options.lease = kLease;
  bool grant_delayed = false;
  std::optional<std::int64_t> bob_acquired_ms;
  std::optional<std::int64_t> bob_lost_ms;
  std::optional<std::int64_t> carol_acquired_ms;
  bob.link().set_message_filter([&](std::string_view, std::string_view payload) {
    FakeBackend::MessageFate fate;
    if (payload.starts_with("turnstile:grant:")) {
      grant_delayed = true;
      fate.extra_delay = kGrantDelay;
    }
    return fate;
  });
  bob.link().set_request_filter([&](const std::vector<std::string>&) {
    FakeBackend::RequestFate fate;
    fate.drop_request = world.now_ms() >= kCutOffMs;  // cut off: no renewal arrives
    return fate;
  });
  world.spawn(alice, [&] {
    Client client(alice.backend_ptr(), alice.runtime_ptr(), options);
    FairLock lock = client.fair_lock("orders");
    lock.lock();
    checkers.acquired(alice, "orders");
    alice.runtime().sleep_until(Instant(std::chrono::milliseconds(kReleaseMs)));
    checkers.releasing(alice, "orders");
    lock.unlock();
    checkers.released(alice, "orders");
  });
  world.spawn(bob, [&] {
    Client client(bob.backend_ptr(), bob.runtime_ptr(), options);
    FairLock lock = client.fair_lock("orders");
    lock.set_lost_handler([&](const LockLost&) {
      if (bob_lost_ms) return;
      bob_lost_ms = world.now_ms();
      checkers.lost(bob, "orders");
    });
    bob.runtime().sleep_for(10ms);  // alice first
    checkers.waiting(bob, "orders");
    lock.lock();  // taken by the grant, without a call
    bob_acquired_ms = world.now_ms();
    checkers.acquired(bob, "orders");
    bob.runtime().sleep_for(10s);  // acts while it believes (the lost handler ends that)
    lock.unlock();                 // cut off: leaves it to its lease
  });
  world.spawn(carol, [&] {
    Client client(carol.backend_ptr(), carol.runtime_ptr(), options);
    FairLock lock = client.fair_lock("orders");
    carol.runtime().sleep_until(Instant(std::chrono::milliseconds(kNextTriesMs)));
    checkers.waiting(carol, "orders");
    if (!lock.try_lock({.wait = 5s})) return;
    carol_acquired_ms = world.now_ms();
    checkers.acquired(carol, "orders");
    carol.runtime().sleep_for(1s);
    checkers.releasing(carol, "orders");
    lock.unlock();
    checkers.released(carol, "orders");
  });
  world.run_until(Instant(std::chrono::seconds(60)));
  bob.link().set_message_filter(nullptr);  // they read locals that die before the world
  bob.link().set_request_filter(nullptr);
  ASSERT_TRUE(grant_delayed) << "the release did not grant bob the lock";
  ASSERT_TRUE(bob_acquired_ms.has_value());
  EXPECT_GE(*bob_acquired_ms, kReleaseMs + kGrantDelay.count());
  EXPECT_TRUE(bob_lost_ms.has_value()) << "bob, cut off, was never told his hold was lost";
  ASSERT_TRUE(carol_acquired_ms.has_value()) << "the lease the release armed never ran out";
  if (bob_lost_ms) {
    EXPECT_LE(*bob_lost_ms, *carol_acquired_ms);
  }
  for (const Violation& violation : checkers.violations()) ADD_FAILURE() << violation.report();
  EXPECT_EQ(checkers.count(ViolationKind::belief_overlap), 0u);
}

}  // namespace
}  // namespace turnstile::sim
