// sim/differential.h
//
// Runs the same commands on a real redis-server and on the fake sim::Server
// and compares the replies. The fake speaks the real server's release
// (fake_redis/server_profile.h: Redis 6.2, 7.0, 7.2 or Valkey 8.0). One real server per test binary (started lazily
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
#include <string_view>
#include <vector>

#include "env_count.h"
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

// EVAL of `source` with `keys` and `args`.
std::vector<std::string> eval_argv(std::string_view source, const std::vector<std::string>& keys,
                                   const std::vector<std::string>& args);

// argv rendered for failure messages, binary bytes escaped.
std::string describe(const std::vector<std::string>& argv);

class DifferentialTest : public ::testing::Test {
 protected:
  void SetUp() override;  // FLUSHALL + SCRIPT FLUSH on the real server; new fake server, clock at 0
  void TearDown() override;

  Reply real(const std::vector<std::string>& argv);
  // The fake's reply as a RESP2 client would read it off the wire.
  Reply fake(const std::vector<std::string>& argv);
  // Runs argv on both and EXPECTs identical replies (TTL/PTTL: same sign
  // class and within a tolerance); returns the fake's reply.
  Reply expect_same(const std::vector<std::string>& argv);
  // The fake's clock; advancing it does not move the real server's time.
  sim::VirtualClock& clock();

  sim::Server& fake_server() { return *fake_server_; }
  // The release of the real server, which the fake speaks (read once from
  // its INFO server; throws if the fake has no profile for it).
  static const sim::ServerProfile& server_profile();

  // Runs argv on both: "" if the replies are equal, else what differs.
  std::string run_on_both(const std::vector<std::string>& argv);
  // Every difference between the two keyspaces: the keys, each key's type,
  // contents (a hash's pairs in any order, a zset's scores within
  // kTtlToleranceMs: deadlines chained after a PTTL) and PTTL
  // (replies_match). Empty: the same.
  std::vector<std::string> keyspace_differences();
  // Two replies of a script: equal, but for integers above a second (ttls,
  // deadlines), which may differ by kTtlToleranceMs, at any depth.
  static bool script_replies_match(const Reply& real, const Reply& fake);
  // The bulk strings of an array reply, sorted.
  static std::vector<std::string> sorted_keys(const Reply& reply);

 private:
  std::unique_ptr<sim::VirtualClock> clock_;
  std::unique_ptr<sim::Server> fake_server_;
  std::unique_ptr<sim::Session> fake_session_;
};

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_SIM_DIFFERENTIAL_H_
