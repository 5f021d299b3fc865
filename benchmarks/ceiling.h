// benchmarks/ceiling.h
//
// What every benchmark against a real redis-server compares itself with:
// redis-benchmark sending the very same command in the same run (the
// ceiling: what the server and loopback allow), and a reporter that keeps
// the best rate of each benchmark so it can be printed as a ratio.

#ifndef TURNSTILE_BENCHMARKS_CEILING_H_
#define TURNSTILE_BENCHMARKS_CEILING_H_

#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/backend.h"
#include "turnstile/script.h"

namespace turnstile::benchmarks {

// The embedded script called `name` (turnstile/script.h), whose EVALSHA the
// ceilings send. Throws std::logic_error if the build has none.
const Script& embedded_script(std::string_view name);

// Requests redis-benchmark sends per measurement.
inline constexpr int kRedisBenchmarkRequests = 100'000;

// Runs `redis-benchmark -c <clients>` sending `command` (its words) to the
// server on 127.0.0.1:<port>; returns its requests per second. Throws
// std::runtime_error naming the command if it fails.
double redis_benchmark_rate(int port, int clients, const std::vector<std::string>& command,
                            int requests = kRedisBenchmarkRequests);

// Sends `command` (its words) `requests` times, one after another, over one
// hiredis connection in blocking mode (write, then a read that sleeps until
// the reply: the I/O of a synchronous client, turnstile's among them) to the
// server on 127.0.0.1:<port>; returns its requests per second. Beside
// redis_benchmark_rate (an event loop over epoll, same command, same
// server), it shows how much of a synchronous client's distance to that
// ceiling is its I/O rather than its work. Throws std::runtime_error naming
// the command if the connection or a reply fails.
double blocking_client_rate(int port, const std::vector<std::string>& command, int requests);

// The best of `rounds` runs of redis_benchmark_rate.
double best_redis_benchmark_rate(int port, int clients, const std::vector<std::string>& command, int rounds);

// Prints as the console reporter does (without color) and keeps, per benchmark name (as
// reported, e.g. "BM_Lock/threads:8"), the best items_per_second.
class BestRateReporter : public ::benchmark::ConsoleReporter {
 public:
  // Never colored: the output goes to logs and to the test runner's XML,
  // where terminal escapes are invalid characters.
  BestRateReporter() : ConsoleReporter(OO_Tabular) {}
  void ReportRuns(const std::vector<Run>& runs) override;
  // The best rate of benchmark `function` (the name it was registered
  // under, whatever arguments follow it: "BM_Lock" matches
  // "BM_Lock/threads:8/real_time"); 0 if none reported a rate.
  double best(const std::string& function) const;

 private:
  std::map<std::string, double> best_;
};

// Loads the lock-acquire script through `backend` (so redis-benchmark's
// EVALSHA finds it), then runs every registered benchmark `rounds` times,
// alternating with `redis-benchmark -c 1` sending EVALSHA of that script, so
// a burst of load elsewhere on the machine hits both sides. `reporter` keeps
// each benchmark's best rate; returns the best EVALSHA rate (requests/s).
double run_rounds_beside_evalsha_ceiling(Backend& backend, int port, BestRateReporter& reporter, int rounds);

}  // namespace turnstile::benchmarks

#endif  // TURNSTILE_BENCHMARKS_CEILING_H_
