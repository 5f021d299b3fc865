// What the direct handoff tests share (fair_handoff_test.cpp,
// fleet_grant_test.cpp): what an inspection connection heard on one
// channel (they listen where a process would, so that a release's PUBLISH
// reaches a subscriber), and the grantee's lease story.

#ifndef TURNSTILE_TESTS_LOCKS_HANDOFF_SUPPORT_H_
#define TURNSTILE_TESTS_LOCKS_HANDOFF_SUPPORT_H_

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "lock_environment.h"
#include "turnstile/backend.h"
#include "turnstile/client.h"

namespace turnstile::testing {

class Heard {
 public:
  Heard(Backend& inspector, const std::string& channel)
      : subscription_(inspector.subscribe(channel, [this](const PubSubEvent& event) {
          const std::lock_guard guard(mutex_);
          if (event.kind == PubSubEvent::Kind::message) messages_.emplace_back(event.payload);
        })) {}
  std::vector<std::string> messages() {
    const std::lock_guard guard(mutex_);
    return messages_;
  }
  // Waits (in the client's time) until something was heard: a real
  // server's message reaches the inspector on another thread.
  std::vector<std::string> awaited(Client& client) {
    for (int i = 0; i < 200 && messages().empty(); ++i) client.runtime().sleep_for(std::chrono::milliseconds(5));
    return messages();
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> messages_;
  Subscription subscription_;
};

// Whether a waiter's first try has been answered (it is queued or
// registered, behind whoever holds): its client's script calls since it
// began to lock, read from another task.
class WaiterGate {
 public:
  // Called by the waiter just before it locks: its calls so far.
  std::uint64_t trying(Client& client) {
    const std::uint64_t before = client.metrics().script_round_trip.count;
    before_ = before;
    return before;
  }
  bool tried(Client& client) const {
    const std::uint64_t before = before_.load();
    return before != kNotYet && client.metrics().script_round_trip.count > before;
  }

 private:
  static constexpr std::uint64_t kNotYet = ~std::uint64_t{0};
  std::atomic<std::uint64_t> before_ = kNotYet;
};

// The grantee believes its lease from the send instant of its own try that
// the grant followed, never from the message's arrival: its local deadline
// is that instant + lease (no margin here), earlier than the server's
// expiry by the time the grant took. A grant that leaves less than a third
// of the lease is taken by a try first, which re-arms the lease from its
// own send instant, and the waiter proceeds on its success. `make_lock`
// makes a task's lock of `name` (a Lock) on a client.
template <class MakeLock>
void expect_grantee_lease_timed_from_its_try(LockEnvironment& env, const std::string& name, const MakeLock& make_lock) {
  using std::chrono::milliseconds;
  ClientOptions exact;
  exact.clock_drift_factor = 0;
  exact.stop_margin = Duration::zero();
  Client& holder = env.add_client();
  Client& prompt = env.add_client(exact);
  Client& delayed = env.add_client(exact);
  struct Seen {
    std::uint64_t acquire_calls = 0;
    std::int64_t local_left_ms = -1;
    std::int64_t server_left_ms = -1;
  };
  Seen prompt_seen;
  Seen delayed_seen;
  // The order is kept by what each side saw, not by sleeps alone: on a
  // real server a loaded machine may start a thread late (the delayed
  // waiter once queued first and took the first grant).
  std::atomic<bool> held = false;
  WaiterGate prompt_gate;
  WaiterGate delayed_gate;
  const auto wait_for_grant = [&](Client& client, Seen& seen, WaiterGate& gate, milliseconds hold) {
    auto lock = make_lock(client);
    const std::uint64_t before = gate.trying(client);
    lock.lock(milliseconds(1000));  // a fixed lease: the local deadline is never renewed
    seen.acquire_calls = client.metrics().script_round_trip.count - before;
    seen.server_left_ms = env.inspector().command({"PTTL", name}).as_integer();
    seen.local_left_ms = lock.remaining_lease().value_or(milliseconds(-1)).count();
    client.runtime().sleep_for(hold);
    lock.unlock();
  };
  env.spawn(holder, [&] {
    auto lock = make_lock(holder);
    lock.lock();
    held = true;
    EXPECT_TRUE(eventually(holder, [&] { return prompt_gate.tried(prompt) && delayed_gate.tried(delayed); }));
    holder.runtime().sleep_for(milliseconds(400));
    lock.unlock();
  });
  // Waiting from 20 ms, granted about 400 ms later: under 640 ms of its
  // lease left.
  env.spawn(prompt, [&] {
    ASSERT_TRUE(eventually(prompt, [&] { return held.load(); }));
    prompt.runtime().sleep_for(milliseconds(20));
    wait_for_grant(prompt, prompt_seen, prompt_gate, milliseconds(400));
  });
  // Waiting behind the prompt one, granted after its hold (about 800 ms
  // after the holder took it): under a third of the lease left, so a try
  // takes it first.
  env.spawn(delayed, [&] {
    ASSERT_TRUE(eventually(delayed, [&] { return prompt_gate.tried(prompt); }));
    // Registered later by the clock too (the oldest registration is woken
    // first; a tie goes by the process's channel name).
    delayed.runtime().sleep_for(milliseconds(10));
    wait_for_grant(delayed, delayed_seen, delayed_gate, milliseconds(10));
  });
  env.run();
  EXPECT_EQ(prompt_seen.acquire_calls, 2u);
  EXPECT_LE(prompt_seen.local_left_ms, 640);
  EXPECT_GE(prompt_seen.server_left_ms, 900);
  EXPECT_GE(delayed_seen.acquire_calls, 3u);
  EXPECT_GE(delayed_seen.local_left_ms, 700);
}

// A grantee the watchdog renews (no fixed lease) needs two renewal periods
// of its lease left, timed from its try's send instant: the watchdog's
// next tick may be a whole period away, and that renewal must be confirmed
// before the deadline. With one period, a grant to an offer left two
// periods before was renewed at its deadline and lost under load
// (cli-redis, NineProcessesWithThreePermitsNeverHaveMoreThanThreeInside).
// With less than two, a try takes the grant first, re-arming the lease.
template <class MakeLock>
void expect_renewed_grantee_keeps_two_renewal_periods(LockEnvironment& env, const MakeLock& make_lock) {
  using std::chrono::milliseconds;
  ClientOptions exact;
  exact.lease = milliseconds(1000);  // renewed every 333 ms
  exact.clock_drift_factor = 0;
  exact.stop_margin = Duration::zero();
  Client& holder = env.add_client(exact);
  Client& waiter = env.add_client(exact);
  std::uint64_t acquire_calls = 0;
  std::int64_t local_left_ms = -1;
  std::atomic<bool> held = false;
  WaiterGate gate;
  env.spawn(holder, [&] {
    auto lock = make_lock(holder);
    lock.lock();
    held = true;
    EXPECT_TRUE(eventually(holder, [&] { return gate.tried(waiter); }));
    holder.runtime().sleep_for(milliseconds(500));
    lock.unlock();
  });
  env.spawn(waiter, [&] {
    auto lock = make_lock(waiter);
    ASSERT_TRUE(eventually(waiter, [&] { return held.load(); }));
    waiter.runtime().sleep_for(milliseconds(30));
    const std::uint64_t before = gate.trying(waiter);
    lock.lock();  // the watchdog's lease: renewed
    acquire_calls = waiter.metrics().script_round_trip.count - before;
    local_left_ms = lock.remaining_lease().value_or(milliseconds(-1)).count();
    lock.unlock();
  });
  env.run();
  // Waiting from 30 ms, granted 500 ms after its first try was answered:
  // under 530 ms of its lease left, under two periods (667 ms), so a try
  // took the grant and re-armed the lease.
  EXPECT_GE(acquire_calls, 3u);
  EXPECT_GE(local_left_ms, 667);
}

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_LOCKS_HANDOFF_SUPPORT_H_
