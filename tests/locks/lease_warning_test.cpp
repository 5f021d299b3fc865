// The warning before expiry (ClientOptions::lease_warning, issue #53): told
// once when a holding's local deadline comes within the warning without
// moving, at that exact instant; never while renewals are healthy; again
// after a renewal moved the deadline. Every test runs in a sim::World on a
// fixed seed: exact, no real time.

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "sim/fake_backend.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/events.h"
#include "turnstile/lock.h"
#include "turnstile/sim/world.h"

namespace turnstile {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::uint64_t kSeed = 29;
constexpr auto kWatchdog = seconds(30);
constexpr auto kWarning = seconds(10);

// The window of a lease with the default margins (1 % + 2 ms).
Duration window(Duration lease) { return lease - Duration(lease.count() / 100) - kDefaultStopMargin; }

struct Told {
  Instant at{};
  LeaseAtRisk at_risk;
  std::string key;  // at_risk.key's text, kept
};

class LeaseWarningTest : public ::testing::Test {
 protected:
  LeaseWarningTest() : world_(kSeed), holder_(world_.add_client("holder")) {
    // Requests hang while frozen_ (a link that stopped forwarding); the
    // send instant of the last one the server got is kept.
    holder_.link().set_request_filter([this](const std::vector<std::string>&) {
      sim::FakeBackend::RequestFate fate;
      fate.drop_request = frozen_;
      if (!frozen_) last_sent_ = world_.now();
      return fate;
    });
  }
  ~LeaseWarningTest() override { holder_.link().set_request_filter(nullptr); }

  ClientOptions options() {
    ClientOptions options;
    options.lease = std::chrono::duration_cast<milliseconds>(kWatchdog);
    options.on_background_error = [](std::exception_ptr) {};
    options.server_check = ServerCheck::off;  // its round trip would come first
    options.lease_warning = kWarning;
    options.on_lease_at_risk = [this](const LeaseAtRisk& at_risk) {
      told_.push_back(Told{holder_.runtime().now(), at_risk, std::string(at_risk.key)});
    };
    options.event_sink = [this](const LockEvent& event) {
      if (event.kind == EventKind::lease_at_risk) events_.push_back(event.remaining);
    };
    options.event_level = EventLevel::warning;
    return options;
  }

  sim::World world_;
  sim::SimClient& holder_;
  bool frozen_ = false;
  Instant last_sent_{};
  std::vector<Told> told_;
  std::vector<Duration> events_;
};

// Renewals stop being confirmed right after the acquisition: told at the
// deadline less the warning, with that much left, once; lost at the deadline.
TEST_F(LeaseWarningTest, AFrozenLinkWarnsOnceBeforeTheLoss) {
  std::optional<Instant> lost_at;
  Instant acquired_sent{};
  world_.spawn(holder_, [&] {
    Client client(holder_.backend_ptr(), holder_.runtime_ptr(), options());
    ReentrantLock lock = client.lock("job");
    lock.set_lost_handler([&](const LockLost&) { lost_at = holder_.runtime().now(); });
    lock.lock();
    acquired_sent = last_sent_;
    frozen_ = true;
    holder_.runtime().sleep_for(seconds(40));
    EXPECT_FALSE(lock.is_held_by_current_thread());
  });
  world_.run_until_idle();
  const Instant deadline = acquired_sent + window(kWatchdog);
  ASSERT_EQ(told_.size(), 1u);
  EXPECT_EQ(told_[0].at, deadline - kWarning);
  EXPECT_EQ(told_[0].at_risk.deadline, deadline);
  EXPECT_EQ(told_[0].at_risk.remaining, kWarning);
  EXPECT_EQ(told_[0].key, "job");
  EXPECT_EQ(events_, std::vector<Duration>{kWarning});
  ASSERT_TRUE(lost_at.has_value());
  EXPECT_EQ(*lost_at, deadline);
}

// Healthy renewals keep the deadline two thirds of a window ahead: ten
// minutes of holding, no warning.
TEST_F(LeaseWarningTest, HealthyRenewalsNeverWarn) {
  world_.spawn(holder_, [&] {
    Client client(holder_.backend_ptr(), holder_.runtime_ptr(), options());
    ReentrantLock lock = client.lock("job");
    lock.lock();
    holder_.runtime().sleep_for(std::chrono::minutes(10));
    EXPECT_TRUE(lock.is_held_by_current_thread());
    lock.unlock();
  });
  world_.run_until_idle();
  EXPECT_TRUE(told_.empty());
}

// A fixed lease is warned about before it runs out; an unlock in time
// ends it without a loss.
TEST_F(LeaseWarningTest, AFixedLeaseIsWarnedAboutBeforeItRunsOut) {
  bool lost = false;
  Instant acquired_sent{};
  world_.spawn(holder_, [&] {
    Client client(holder_.backend_ptr(), holder_.runtime_ptr(), options());
    ReentrantLock lock = client.lock("job");
    lock.set_lost_handler([&](const LockLost&) { lost = true; });
    lock.lock(seconds(25));
    acquired_sent = last_sent_;
    holder_.runtime().sleep_for(seconds(20));
    lock.unlock();
  });
  world_.run_until_idle();
  ASSERT_EQ(told_.size(), 1u);
  EXPECT_EQ(told_[0].at, acquired_sent + window(seconds(25)) - kWarning);
  EXPECT_FALSE(lost);
}

// Warned, then a renewal gets through and moves the deadline: the warning
// is armed again, and told again when the link freezes once more.
TEST_F(LeaseWarningTest, ARenewalAfterTheWarningArmsItAgain) {
  std::optional<Instant> lost_at;
  std::optional<Instant> renewed_sent;
  world_.spawn(holder_, [&] {
    Client client(holder_.backend_ptr(), holder_.runtime_ptr(), options());
    ReentrantLock lock = client.lock("job");
    lock.set_lost_handler([&](const LockLost&) { lost_at = holder_.runtime().now(); });
    lock.lock();
    frozen_ = true;
    // Warned at about 19.7 s (the deadline, 29.698 s, less 10 s); the
    // renewal of about 19.8 s (every 9.9 s) goes through.
    holder_.runtime().sleep_for(milliseconds(19'750));
    ASSERT_EQ(told_.size(), 1u);
    frozen_ = false;
    holder_.runtime().sleep_for(milliseconds(1'250));
    renewed_sent = last_sent_;
    frozen_ = true;
    holder_.runtime().sleep_for(seconds(60));
  });
  world_.run_until_idle();
  ASSERT_EQ(told_.size(), 2u);
  ASSERT_TRUE(lost_at.has_value());
  EXPECT_EQ(told_[1].at_risk.deadline, *lost_at);
  EXPECT_EQ(told_[1].at, *lost_at - kWarning);
  EXPECT_GT(*lost_at, *renewed_sent + seconds(20)) << "the renewal moved the deadline";
}

TEST(LeaseWarningOptionsTest, AWarningHealthyRenewalsWouldGiveIsRefused) {
  sim::World world(kSeed);
  sim::SimClient& holder = world.add_client("holder");
  ClientOptions options;
  options.lease_warning = seconds(15);  // more than half of 29.698 s
  EXPECT_THROW(Client(holder.backend_ptr(), holder.runtime_ptr(), options), InvalidArgumentError);
  options.lease_warning = -milliseconds(1);
  EXPECT_THROW(Client(holder.backend_ptr(), holder.runtime_ptr(), options), InvalidArgumentError);
  options.lease_warning = milliseconds(14'849);
  EXPECT_NO_THROW(Client(holder.backend_ptr(), holder.runtime_ptr(), options));
}

}  // namespace
}  // namespace turnstile
