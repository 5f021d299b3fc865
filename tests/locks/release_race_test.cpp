// A watchdog renewal that runs while the holder's own release is on its way
// finds the lock (or permit) gone: that is the release, not a loss, and
// must not be reported as one. In simulation the race is exact: the release
// runs on the server at once, its reply is held back longer than a watchdog
// period, so a renewal always lands in between.

#include <gtest/gtest.h>

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "lua_scripts.h"
#include "sim/fake_backend.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/fair_lock.h"
#include "turnstile/lock.h"
#include "turnstile/semaphore.h"
#include "turnstile/sim/world.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::uint64_t kSeed = 20261122;
constexpr milliseconds kWatchdogTimeout{3'000};  // renewals every second
// Longer than a watchdog period: a renewal runs while the reply is away.
constexpr milliseconds kReleaseReplyDelay{1'500};

class ReleaseRaceTest : public ::testing::Test {
 protected:
  ReleaseRaceTest() : world_(kSeed), alice_(world_.add_client("alice")) {
    ClientOptions options;
    options.lease = kWatchdogTimeout;
    options.on_background_error = [this](std::exception_ptr error) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        background_errors_.push_back(e.what());
      }
    };
    client_ = std::make_unique<Client>(alice_.backend_ptr(), alice_.runtime_ptr(), options);
  }

  // Holds back the replies of `script` (the release) when `armed`.
  void delay_replies_of(const Script& script) {
    alice_.link().set_request_filter([this, sha1 = std::string(script.sha1)](const std::vector<std::string>& argv) {
      sim::FakeBackend::RequestFate fate;
      if (armed_ && argv.size() > 1 && argv[0] == "EVALSHA" && argv[1] == sha1) {
        fate.extra_reply_delay = kReleaseReplyDelay;
      }
      return fate;
    });
  }

  // Takes `lock` with the watchdog, holds it past a few renewals, releases
  // it with the reply of its `unlock` script held back, then holds nothing
  // for a while; expects no loss reported.
  void expect_no_loss_on_release(Lock& lock, const Script& unlock) {
    delay_replies_of(unlock);
    lock.set_lost_handler([this](const LockLost& lost) { losses_.emplace_back(lost.owner); });
    world_.spawn(alice_, [&] {
      lock.lock();
      alice_.runtime().sleep_for(seconds(5));
      armed_ = true;
      lock.unlock();
      released_ = true;
      EXPECT_FALSE(lock.is_held_by_current_thread());
      alice_.runtime().sleep_for(seconds(10));
    });
    world_.run_for(std::chrono::minutes(1));
    expect_released_without_a_loss();
  }

  void expect_released_without_a_loss() {
    EXPECT_TRUE(released_);
    EXPECT_TRUE(losses_.empty()) << "a loss was reported for " << losses_.front();
    EXPECT_TRUE(background_errors_.empty()) << background_errors_.front();
  }

  sim::World world_;
  sim::SimClient& alice_;
  std::unique_ptr<Client> client_;
  bool armed_ = false;
  bool released_ = false;
  std::vector<std::string> losses_;
  std::vector<std::string> background_errors_;
};

TEST_F(ReleaseRaceTest, ReentrantLock) {
  ReentrantLock lock = client_->lock("race");
  expect_no_loss_on_release(lock, scripts::reentrant_lock_unlock);
}

TEST_F(ReleaseRaceTest, TokenLock) {
  TokenLock lock = client_->token_lock("race");
  expect_no_loss_on_release(lock, scripts::token_lock_release);
}

TEST_F(ReleaseRaceTest, FairLock) {
  FairLock lock = client_->fair_lock("race");
  expect_no_loss_on_release(lock, scripts::fair_lock_unlock);
}

TEST_F(ReleaseRaceTest, PermitSemaphore) {
  PermitSemaphore semaphore = client_->permit_semaphore("race");
  std::vector<std::string> lost_permits;
  semaphore.set_lost_handler([&](const PermitLost& lost) { lost_permits.emplace_back(lost.permit.hex()); });
  delay_replies_of(scripts::permit_semaphore);
  world_.spawn(alice_, [&] {
    ASSERT_TRUE(semaphore.try_set_permits(1));
    const PermitId permit = semaphore.acquire();
    alice_.runtime().sleep_for(seconds(5));
    armed_ = true;
    semaphore.release(permit);
    released_ = true;
    alice_.runtime().sleep_for(seconds(10));
  });
  world_.run_for(std::chrono::minutes(1));
  EXPECT_TRUE(lost_permits.empty()) << "permit " << lost_permits.front() << " reported lost";
  expect_released_without_a_loss();
}

// The other side: a lock that is really lost while held (another client
// deleted it) is still reported, once, by the next renewal.
TEST_F(ReleaseRaceTest, ARealLossIsStillReported) {
  ReentrantLock lock = client_->lock("race");
  lock.set_lost_handler([this](const LockLost& lost) { losses_.emplace_back(lost.owner); });
  Client other(alice_.backend_ptr(), alice_.runtime_ptr());
  world_.spawn(alice_, [&] {
    lock.lock();
    alice_.runtime().sleep_for(seconds(2));
    EXPECT_TRUE(other.lock("race").force_unlock());
    alice_.runtime().sleep_for(seconds(3));
    EXPECT_NO_THROW(lock.unlock());  // lost: told, unlock() returns (lock.h)
  });
  world_.run_for(std::chrono::minutes(1));
  EXPECT_EQ(losses_.size(), 1u);
}

}  // namespace
}  // namespace turnstile::testing
