// benchmarks/ceiling.h
//
// What every benchmark against a real redis-server compares itself with:
// redis-benchmark sending the very same command in the same run (the
// ceiling: what the server and loopback allow), and a reporter that keeps
// the best rate of each benchmark so it can be printed as a ratio.

#ifndef TURNSTILE_BENCHMARKS_CEILING_H_
#define TURNSTILE_BENCHMARKS_CEILING_H_

#include <benchmark/benchmark.h>
#include <sched.h>
#include <sys/types.h>

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

// The server and the measuring client on different cores, for as long as
// it lives: the server's process (its main thread, which runs every
// command) on the first CPU, the calling thread, and every thread and
// process it starts meanwhile (workload threads, redis-benchmark, the
// peers), on the others; on a machine of one CPU it does nothing. On this
// project's two-core VM a round trip between two threads of the same core
// took a third of one between cores (57,000 against 18,000 EVALSHA/s,
// loop and server pinned), so where the scheduler happened to put a
// client, not what the client does, decided an uncontended row: the same
// flavor measured 0.80 of its ceiling in one run and 0.91 in another.
// Apart, every client pays the wake-ups a network would, as in a
// deployment. The destructor puts both back on every CPU.
class ServerAndClientApart {
 public:
  explicit ServerAndClientApart(pid_t server);
  ~ServerAndClientApart();
  ServerAndClientApart(const ServerAndClientApart&) = delete;
  ServerAndClientApart& operator=(const ServerAndClientApart&) = delete;

 private:
  pid_t server_;
  bool apart_ = false;
  cpu_set_t server_before_{};
  cpu_set_t client_before_{};
};

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
