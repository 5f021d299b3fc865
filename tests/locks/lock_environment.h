// locks/lock_environment.h
//
// Where a lock test runs: on the fake Redis in a simulated world (virtual
// time, deterministic), or against a real redis-server on loopback with the
// real runtime. Test bodies are written once as tasks of clients:
//
//   Client& alice = env().add_client();
//   env().spawn(alice, [&] { auto lock = alice.lock("l"); lock.lock(); ... });
//   env().run();
//
// In simulation, sleep_for() advances virtual time; against the real server
// it sleeps, so tests that need long waits run in simulation only
// (virtual_time()).

#ifndef TURNSTILE_TESTS_LOCKS_LOCK_ENVIRONMENT_H_
#define TURNSTILE_TESTS_LOCKS_LOCK_ENVIRONMENT_H_

#include <gtest/gtest.h>

#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <memory>
#include <string>
#include <vector>

#include "turnstile/backend.h"
#include "turnstile/client.h"
#include "turnstile/flavor.h"
#include "turnstile/lock.h"
#include "turnstile/runtime.h"

namespace turnstile::testing {

class LockEnvironment {
 public:
  virtual ~LockEnvironment() = default;

  // A new client with its own UUID (in simulation: its own simulated
  // process, with its own runtime and connection).
  virtual Client& add_client(ClientOptions options = {}) = 0;
  // Runs `task` as a new task of `client`, concurrently with the others.
  virtual void spawn(Client& client, std::function<void()> task) = 0;
  // Runs every spawned task to its end.
  virtual void run() = 0;
  // Crashes `client` at once: its tasks stop, its watchdog dies, nothing is
  // released (simulation only).
  virtual void crash(Client& client) = 0;
  // Freezes `client` at once, as SIGSTOP does: its tasks and timers stop,
  // its connection and subscriptions stay open. crash() ends it, before
  // run() returns (simulation only).
  virtual void freeze(Client& client) = 0;
  // Ends a freeze(): what it froze goes on, its timers due at once
  // (simulation only).
  virtual void thaw(Client& client) = 0;
  // A connection for inspecting keys directly (PTTL, HGETALL, ...).
  virtual Backend& inspector() = 0;
  virtual bool virtual_time() const = 0;
  virtual std::string name() const = 0;
};

using EnvironmentFactory = std::function<std::unique_ptr<LockEnvironment>()>;

struct EnvironmentParam {
  std::string name;
  EnvironmentFactory make;
};

inline std::string PrintToString(const EnvironmentParam& param) { return param.name; }

// The fixture of every lock test body.
class LockTest : public ::testing::TestWithParam<EnvironmentParam> {
 protected:
  void SetUp() override { environment_ = GetParam().make(); }
  void TearDown() override { environment_.reset(); }

  LockEnvironment& env() { return *environment_; }
  // Runs a command on the inspection connection.
  Reply inspect(const std::vector<std::string>& argv) { return environment_->inspector().command(argv); }
  // Skips a test that needs virtual time (hours of waiting, crashes).
  bool needs_virtual_time() {
    if (environment_->virtual_time()) return false;
    return true;
  }

 private:
  std::unique_ptr<LockEnvironment> environment_;
};

// A LockTest that counts what a client reports: the losses its lost
// handlers are told, and the errors sent to its background error handler.
class LossCountingTest : public LockTest {
 protected:
  // A client whose background errors are counted.
  Client& counting_client() {
    return env().add_client(
        ClientOptions{.on_background_error = [this](std::exception_ptr) { background_errors_.fetch_add(1); }});
  }
  void count_losses(Holdable& holdable) {
    holdable.set_lost_handler([this](const LockLost& lost) {
      std::lock_guard guard(mutex_);
      reasons_.push_back(lost.reason);
    });
  }
  std::vector<LockLostReason> reasons() {
    std::lock_guard guard(mutex_);
    return reasons_;
  }

  std::atomic<int> background_errors_{0};

 private:
  std::mutex mutex_;
  std::vector<LockLostReason> reasons_;
};

// `clients` clients each take the lock made by `make_lock` `rounds` times,
// holding it 2 ms (virtual or real); expects that nobody was ever inside
// together with anybody else and that every round ran.
void expect_mutual_exclusion(LockEnvironment& environment, int clients, int rounds,
                             const std::function<std::unique_ptr<Lock>(Client&)>& make_lock);

// Two clients each take the fenced lock made by `make_lock` five times;
// expects a token per acquisition, strictly increasing in lock order, and
// the counter at `token_key` left at the last one.
void expect_increasing_fencing_tokens(LockEnvironment& environment, const std::string& token_key,
                                      const std::function<std::unique_ptr<Lock>(Client&)>& make_lock);

// Sleeps on `client`'s runtime (5 ms at a time) until `condition` holds;
// false if it did not within `patience` (generous: tests wait for
// conditions, they never time them).
bool eventually(Client& client, const std::function<bool()>& condition, Duration patience = std::chrono::seconds(30));

// The environments this binary instantiates the bodies with.
std::vector<EnvironmentParam> lock_environments();

}  // namespace turnstile::testing

#define TURNSTILE_SIM_ONLY()                                        \
  do {                                                              \
    if (needs_virtual_time()) GTEST_SKIP() << "needs virtual time"; \
  } while (false)

#endif  // TURNSTILE_TESTS_LOCKS_LOCK_ENVIRONMENT_H_
