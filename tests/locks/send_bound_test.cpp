// A lock's wait passes what is left of its deadline down to the backend
// (Backend::eval_synced_within, EvalOptions::send_within), so a busy
// connection pool cannot hold a try_lock_for(50ms) up to the command
// timeout. On the fake, in virtual time: a decorator records the bound of
// every acquisition call (tests/locks/pool_waiters_redis_test.cpp: the pool
// of a real backend ends its wait by it).

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "turnstile/backend.h"
#include "turnstile/client.h"
#include "turnstile/lock.h"
#include "turnstile/sim/world.h"

namespace turnstile {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

constexpr std::uint64_t kSeed = 33;

// Records the bound of each acquisition call, and the instant it was made.
class BoundRecordingBackend final : public ForwardingBackend {
 public:
  BoundRecordingBackend(std::shared_ptr<Backend> inner, Runtime& runtime)
      : ForwardingBackend(std::move(inner)), runtime_(runtime) {}

  SyncedReply eval_synced_within(const Script& script, const std::vector<std::string>& keys,
                                 const std::vector<std::string>& args, const EvalOptions& options) override {
    calls.push_back({runtime_.now(), options.send_within});
    return inner().eval_synced_within(script, keys, args, options);
  }

  struct Call {
    Instant at;
    std::optional<nanoseconds> send_within;
  };
  std::vector<Call> calls;

 private:
  Runtime& runtime_;
};

TEST(SendBoundTest, AWaitPassesWhatIsLeftOfItsDeadlineToEveryTry) {
  sim::World world(kSeed);
  sim::SimClient& holder = world.add_client("holder");
  sim::SimClient& waiter = world.add_client("waiter");
  const auto recording = std::make_shared<BoundRecordingBackend>(waiter.backend_ptr(), waiter.runtime());
  bool acquired = true;
  Instant deadline{};
  Instant waited_until{};
  world.spawn(holder, [&] {
    Client client(holder.backend_ptr(), holder.runtime_ptr());
    ReentrantLock lock = client.lock("bounded");
    lock.lock();
    holder.runtime().sleep_for(seconds(5));
    lock.unlock();
  });
  world.spawn(waiter, [&] {
    Client client(recording, waiter.runtime_ptr());
    ReentrantLock lock = client.lock("bounded");
    waiter.runtime().sleep_for(milliseconds(10));  // the holder is in
    deadline = waiter.runtime().now() + milliseconds(50);
    acquired = lock.try_lock_for(milliseconds(50));
    waited_until = waiter.runtime().now();
    // A single try keeps the backend's own bound.
    EXPECT_FALSE(lock.try_lock());
  });
  world.run_until_idle();

  EXPECT_FALSE(acquired);
  EXPECT_GE(waited_until, deadline);
  ASSERT_GE(recording->calls.size(), 2U);  // the wait's tries, then the single one
  for (std::size_t i = 0; i + 1 < recording->calls.size(); ++i) {
    const BoundRecordingBackend::Call& call = recording->calls[i];
    ASSERT_TRUE(call.send_within.has_value()) << "try " << i;
    EXPECT_EQ(*call.send_within, deadline - call.at) << "try " << i;
  }
  EXPECT_FALSE(recording->calls.back().send_within.has_value());
}

}  // namespace
}  // namespace turnstile
