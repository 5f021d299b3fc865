// locks/semaphore_test_support.h
//
// Small helpers the semaphore tests share: a log of the messages on a
// channel, a count of concurrent holders, and an Instant shared between
// tasks (threads against a real server).

#ifndef TURNSTILE_TESTS_LOCKS_SEMAPHORE_TEST_SUPPORT_H_
#define TURNSTILE_TESTS_LOCKS_SEMAPHORE_TEST_SUPPORT_H_

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "lock_environment.h"
#include "turnstile/backend.h"
#include "turnstile/runtime.h"

namespace turnstile::testing {

// Every message published on one channel while it lives.
class MessageLog {
 public:
  // How long wait_for() waits at most, in steps of kPollStep.
  static constexpr int kMaxPolls = 400;
  static constexpr Duration kPollStep = std::chrono::milliseconds(5);

  MessageLog(Backend& backend, const std::string& channel)
      : subscription_(backend.subscribe(channel, [this](const PubSubEvent& event) {
          if (event.kind != PubSubEvent::Kind::message) return;
          std::lock_guard guard(mutex_);
          messages_.emplace_back(event.payload);
        })) {}

  // Waits until `count` messages arrived (they arrive on another thread
  // against a real server) or kMaxPolls steps passed.
  void wait_for(Runtime& runtime, std::size_t count) {
    for (int poll = 0; poll < kMaxPolls && messages().size() < count; ++poll) runtime.sleep_for(kPollStep);
  }

  std::vector<std::string> messages() const {
    std::lock_guard guard(mutex_);
    return messages_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> messages_;
  Subscription subscription_;  // last: unsubscribed before the log dies
};

// How many permits are in use at once, at most.
class HolderCount {
 public:
  void enter(int permits) {
    std::lock_guard guard(mutex_);
    inside_ += permits;
    max_ = std::max(max_, inside_);
    ++entries_;
  }
  void leave(int permits) {
    std::lock_guard guard(mutex_);
    inside_ -= permits;
  }
  int max() const {
    std::lock_guard guard(mutex_);
    return max_;
  }
  int entries() const {
    std::lock_guard guard(mutex_);
    return entries_;
  }

 private:
  mutable std::mutex mutex_;
  int inside_ = 0;
  int max_ = 0;
  int entries_ = 0;
};

// An Instant written by one task and read by another.
class SharedInstant {
 public:
  void set(Instant value) {
    std::lock_guard guard(mutex_);
    value_ = value;
  }
  Instant get() const {
    std::lock_guard guard(mutex_);
    return value_;
  }

 private:
  mutable std::mutex mutex_;
  Instant value_{};
};

// `clients` clients each take one permit `rounds` times through
// `with_permit` (which acquires, runs the critical section, releases),
// holding it 2 ms; expects that never more than `permits` were in use at
// once and that every round ran.
inline void expect_at_most_permits_in_use(
    LockEnvironment& environment, int clients, int rounds, int permits,
    const std::function<void(Client&, const std::function<void()>& critical_section)>& with_permit) {
  HolderCount holders;
  std::vector<Client*> all;
  for (int i = 0; i < clients; ++i) all.push_back(&environment.add_client());
  for (Client* client : all) {
    environment.spawn(*client, [&, client] {
      for (int round = 0; round < rounds; ++round) {
        with_permit(*client, [&] {
          holders.enter(1);
          client->runtime().sleep_for(std::chrono::milliseconds(2));
          holders.leave(1);
        });
      }
    });
  }
  environment.run();
  EXPECT_LE(holders.max(), permits);
  EXPECT_EQ(holders.entries(), clients * rounds);
}

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_LOCKS_SEMAPHORE_TEST_SUPPORT_H_
