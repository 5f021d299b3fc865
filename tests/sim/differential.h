// sim/differential.h
//
// Runs the same commands on a real redis-server and on the fake sim::Server
// and compares the replies. One real server per test binary (started lazily
// on first use), a fresh fake server per test.
//
// Time: the real server runs on real time, the fake on its virtual clock,
// which starts each test at the real Unix time (so EXPIREAT and friends mean
// the same on both) and then moves only when a test advances it. TTL and PTTL
// are compared by sign class and within kTtlToleranceMs; exact expiry
// instants belong in the fake's unit tests.

#ifndef TURNSTILE_TESTS_SIM_DIFFERENTIAL_H_
#define TURNSTILE_TESTS_SIM_DIFFERENTIAL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fake_redis/server.h"
#include "fake_redis/virtual_clock.h"
#include "turnstile/reply.h"

namespace turnstile::testing {

// How far the real server's TTLs may drift from the fake's while a test runs.
inline constexpr std::int64_t kTtlToleranceMs = 2000;

// True if `fake` is what the real server would have answered for `argv`,
// given `real`: equal, or for TTL/PTTL the same sign class and within
// tolerance, or for TIME the same shape. `why` explains a mismatch.
bool replies_match(const std::vector<std::string>& argv, const Reply& real, const Reply& fake,
                   std::string* why = nullptr);

// A count a long run can raise: the environment variable `name` if it is
// a positive integer (at most 100,000,000), else `fallback`.
int count_from_environment(const char* name, int fallback);

// argv rendered for failure messages, binary bytes escaped.
std::string describe(const std::vector<std::string>& argv);

class DifferentialTest : public ::testing::Test {
 protected:
  void SetUp() override;  // FLUSHALL + SCRIPT FLUSH on the real server; new fake server, clock at 0
  void TearDown() override;

  Reply real(const std::vector<std::string>& argv);
  Reply fake(const std::vector<std::string>& argv);
  // Runs argv on both and EXPECTs identical replies (TTL/PTTL: same sign
  // class and within a tolerance); returns the fake's reply.
  Reply expect_same(const std::vector<std::string>& argv);
  // The fake's clock; advancing it does not move the real server's time.
  sim::VirtualClock& clock();

  sim::Server& fake_server() { return *fake_server_; }

 private:
  std::unique_ptr<sim::VirtualClock> clock_;
  std::unique_ptr<sim::Server> fake_server_;
  std::unique_ptr<sim::Session> fake_session_;
};

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_SIM_DIFFERENTIAL_H_
