// The server check before a Client's first script call
// (ClientOptions::server_check, locks/engine/server_checking_backend.h) obeys the
// caller's deadline: a try_lock_for(50ms) whose check stalls returns false
// at 50 ms, a check that did not finish is made again by the next call,
// and concurrent first callers share one check, each waiting only until
// its own deadline. On the fake, in virtual time: a decorator answers
// INFO memory as a server whose link is frozen until a given instant
// would (tests/redis/server_check_test.cpp: the same on a SIGSTOPped
// redis-server).

#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "turnstile/backend.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/lock.h"
#include "turnstile/sim/world.h"

namespace turnstile {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::uint64_t kSeed = 33;
// What the decorator's server takes before it gives up on an unanswered
// INFO (a real backend's command_timeout_ms).
constexpr Duration kCommandTimeout = seconds(2);

// One master whose INFO memory answers (maxmemory-policy allkeys-lru with
// a limit: evicting) only once `frozen_until` has passed; a call that
// would wait past the command timeout fails with a TimeoutError then.
class FrozenInfoBackend final : public ForwardingBackend {
 public:
  FrozenInfoBackend(std::shared_ptr<Backend> inner, Runtime& runtime, Instant frozen_until)
      : ForwardingBackend(std::move(inner)), runtime_(runtime), frozen_until_(frozen_until) {}

  std::vector<MasterReply> command_each_master(const std::vector<std::string>& argv) override {
    (void)argv;
    ++checks;
    const Instant timeout_at = runtime_.now() + kCommandTimeout;
    MasterReply answer{.node = "frozen:6379", .reply = Reply::nil(), .failure = nullptr};
    if (frozen_until_ > timeout_at) {
      runtime_.sleep_until(timeout_at);
      answer.failure = std::make_exception_ptr(TimeoutError("frozen:6379 timed out after 2000 ms"));
    } else {
      runtime_.sleep_until(frozen_until_);
      answer.reply = Reply::bulk("# Memory\r\nmaxmemory:104857600\r\nmaxmemory_policy:allkeys-lru\r\n");
    }
    return {answer};
  }

  int checks = 0;

 private:
  Runtime& runtime_;
  const Instant frozen_until_;
};

// Counts the UnsafeServerError reports.
ClientOptions counting_reports(int& reports) {
  ClientOptions options;
  options.on_background_error = [&reports](std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const UnsafeServerError&) {
      ++reports;
    } catch (...) {
    }
  };
  return options;
}

TEST(ServerCheckDeadlineTest, AStalledCheckEndsATimedTryAtItsDeadlineAndRunsAgainLater) {
  sim::World world(kSeed);
  sim::SimClient& waiter = world.add_client("waiter");
  const Instant start = waiter.runtime().now();
  // Frozen past the command timeout: the first check fails.
  const auto frozen = std::make_shared<FrozenInfoBackend>(waiter.backend_ptr(), waiter.runtime(), start + seconds(5));
  int reports = 0;
  std::optional<bool> timed_try;
  Duration timed_try_took{};
  int checks_after_first_failed = 0;
  std::optional<bool> later_try;
  world.spawn(waiter, [&] {
    Client client(frozen, waiter.runtime_ptr(), counting_reports(reports));
    ReentrantLock lock = client.lock("checked");
    const Instant asked = waiter.runtime().now();
    timed_try = lock.try_lock_for(milliseconds(50));
    timed_try_took = waiter.runtime().now() - asked;
    // The check goes on after the try gave up, fails at the command
    // timeout, and is not remembered as done.
    waiter.runtime().sleep_until(start + seconds(6));
    checks_after_first_failed = frozen->checks;
    later_try = lock.try_lock_for(milliseconds(50));
    if (*later_try) lock.unlock();
  });
  world.run_until_idle();

  ASSERT_TRUE(timed_try.has_value());
  EXPECT_FALSE(*timed_try);
  EXPECT_EQ(timed_try_took, milliseconds(50));  // not the command timeout
  EXPECT_EQ(checks_after_first_failed, 1);
  ASSERT_TRUE(later_try.has_value());
  EXPECT_TRUE(*later_try);
  EXPECT_EQ(frozen->checks, 2);  // checked again, then remembered
  EXPECT_EQ(reports, 1);         // the evicting server, once
}

TEST(ServerCheckDeadlineTest, ConcurrentFirstCallersShareOneCheckEachUntilItsOwnDeadline) {
  sim::World world(kSeed);
  sim::SimClient& waiter = world.add_client("waiter");
  const Instant start = waiter.runtime().now();
  // Answers at 200 ms, within the command timeout: the check completes.
  const auto frozen =
      std::make_shared<FrozenInfoBackend>(waiter.backend_ptr(), waiter.runtime(), start + milliseconds(200));
  int reports = 0;
  struct Caller {
    std::optional<Duration> timeout;  // nullopt: lock(), no deadline
    std::optional<bool> acquired;
    Duration took{};
    Instant returned_at{};
  };
  std::vector<Caller> callers(3);
  callers[0].timeout = milliseconds(30);
  callers[1].timeout = milliseconds(80);
  world.spawn(waiter, [&] {
    Client client(frozen, waiter.runtime_ptr(), counting_reports(reports));
    for (std::size_t i = 0; i < callers.size(); ++i) {
      waiter.runtime().spawn([&, i] {
        Caller& caller = callers[i];
        ReentrantLock lock = client.lock("shared-check-" + std::to_string(i));
        const Instant asked = waiter.runtime().now();
        if (caller.timeout) {
          caller.acquired = lock.try_lock_for(*caller.timeout);
        } else {
          lock.lock();
          caller.acquired = true;
        }
        caller.returned_at = waiter.runtime().now();
        caller.took = caller.returned_at - asked;
        if (*caller.acquired) lock.unlock();
      });
    }
    waiter.runtime().sleep_until(start + seconds(1));  // the callers are done
  });
  world.run_until_idle();

  for (const Caller& caller : callers) ASSERT_TRUE(caller.acquired.has_value());
  EXPECT_FALSE(*callers[0].acquired);
  EXPECT_EQ(callers[0].took, milliseconds(30));
  EXPECT_FALSE(*callers[1].acquired);
  EXPECT_EQ(callers[1].took, milliseconds(80));
  EXPECT_TRUE(*callers[2].acquired);
  EXPECT_GE(callers[2].returned_at, start + milliseconds(200));  // after the check
  EXPECT_EQ(frozen->checks, 1);
  EXPECT_EQ(reports, 1);
}

}  // namespace
}  // namespace turnstile
