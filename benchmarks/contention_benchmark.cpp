// Every flavor (token, reentrant, fair, semaphore, permit_semaphore) under
// synthetic contention, against the fake Redis (a standalone fake backend,
// turnstile/sim/standalone.h, real threads: the raw speed of the code path)
// and against a real redis-server started here on loopback:
//
//   * uncontended: one thread, one key;
//   * 2, 8 and 32 threads on one key (free-for-all, then forced handoff:
//     a releaser waits until another contender took the key) and on 64 keys;
//   * real server only, issue #33's shapes (series "grid"): processes x
//     threads 1x64, 2x64, 8x1, 8x16 on one key, free-for-all (this program
//     exec'd again in --worker mode per process, sharing the bookkeeping
//     through a memfd arena), the cross-process rows once per wake scope
//     (process, fleet); beside the uncontended 1x1 row. The 8x16 fleet row
//     runs in kCeilingRounds rounds, each beside its own EVALSHA ceiling
//     ("ceiling_round" lines; see kCeilingRounds), and so does each
//     uncontended row (kUncontendedRounds);
//   * real server only, the fair queue-length curve (series "fair_queue"):
//     1, 10, 100, 1,000 and 5,000 fair waiters on one key (8 processes
//     beyond 64 waiters), Redis CPU per acquisition and acquisitions/s,
//     each after a warm-up in which the waiters join (Grid::fair_queue_warm_up).
//   * real server only, issue #33's gap goals (series of "gap_round" lines):
//     kGapRounds rounds of the handoff floor measured right before a forced
//     handoff of 8 contenders, reentrant and fair (see kGapRounds).
//
// --grid=quick replaces every list above by a tiny one (2 threads; 1x2 and
// 2x2, the 2x2 fleet row in one ceiling round; fair queues of 1 and 4;
// shorter ceilings): for testing this harness
// (the 'benchmarks' suite runs benchmarks/run in its quick mode), not for
// figures.
//
// Each measurement reports acquisitions/s, real handoffs/s, the handoff gap
// (release call -> next holder's acquire return) median and p99 and, on the
// real server, its CPU per acquisition (utime+stime from /proc/<pid>/stat)
// and the commands it ran per acquisition, by name (INFO commandstats after
// CONFIG RESETSTAT; Redis 7 counts the commands a script runs too, so
// "evalsha" is script calls and "hincrby" or "publish" are their insides).
// Ceilings measured in the same run: redis-benchmark PING and EVALSHA of the
// acquire script with 1 and 8 clients, and the median PING round trip. Rates
// are also given as a ratio to EVALSHA/2 (a pair is two round trips) and
// gaps in ping round trips. The handoff budget (handoff_budget.h) times
// the parts of a handoff one by one on the same server, and the in-process
// forced handoffs are split into their parts as they happen
// (handoff_trace.h: release prepared, release -> message, wake-up, acquire
// script, return; medians).
//
// Output: one JSON object per line on stdout (benchmarks/report.py reads
// them), progress on stderr.
//
//   contention_benchmark [--duration-ms=1000] [--backends=fake,redis]
//                        [--flavors=token,reentrant,...] [--contenders=8,32]
//                        [--wake-scope=process|fleet] [--grid=full|quick]
//                        [--permit-handoff=direct|announce] [--processes=8]
//
// --flavors and --contenders keep only some measurements (the uncontended
// one counts as 1 contender, the others as processes x threads), for comparing a
// change before and after without the whole run. --wake-scope sets every
// client's ClientOptions::wake_scope (default: the library's), and
// --permit-handoff=direct|announce its permit_handoff; --processes=8 keeps
// the shapes of those process counts only.

#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "ceiling.h"
#include "handoff_budget.h"
#include "latency.h"
#include "redis_server.h"
#include "turnstile/client.h"
#include "turnstile/redis_backend.h"
#include "turnstile/sim/standalone.h"
#include "workload.h"

namespace {

namespace bench = turnstile::benchmarks;
using nlohmann::json;

constexpr int kManyKeys = 64;
constexpr int kCeilingClients = 8;
// Beyond this many fair waiters the queue is spread over processes.
constexpr int kFairQueueThreadsInOneProcess = 100;
constexpr int kFairQueueProcesses = 8;
// Long queues are measured over this many times the duration: each waiter
// then gets its turn at least a few times.
constexpr int kLongQueue = 1000;
constexpr int kLongQueueDurationFactor = 3;

// Issue #33's forced-handoff gap goals compare a gap with the floor of its
// parts (handoff_budget.h). On a shared two-core VM both swing by up to 2×
// from minute to minute (the floor from 108 to 211 µs in three runs a
// minute apart), so one floor beside one gap measured seconds apart decides
// little: each round measures the floor and, right after it, the forced
// handoff; the report takes the median of the rounds' ratios.
constexpr int kGapRounds = 5;
constexpr int kGapContenders = 8;
constexpr std::array kGapFlavors = {turnstile::Flavor::reentrant, turnstile::Flavor::fair};

// Issue #33's 8 × 16 goal compares a row's acquisitions/s with the EVALSHA
// ceiling. The ceiling is measured once at the run's start, and on this VM
// it swings by up to 2.4× between minutes (redis-benchmark -c 1 EVALSHA:
// 3,870 and 9,500/s in two runs a minute apart), so that row runs in
// rounds: each measures a shorter ceiling and, right after it, the row; the
// row kept is the round of median ratio, reported against its own ceiling.
constexpr int kCeilingRounds = 3;
constexpr int kPairedCeilingRequests = 10'000;  // about 1-3 s of EVALSHA, one client
// Uncontended rows run in this many rounds: one pair is short, so a burst
// of load elsewhere on the shared machine would decide a single run. On the
// fake, the best round is kept; on the real server each round measures its
// own EVALSHA ceiling first (as the 8 x 16 row), and the round of median
// ratio is kept, against its own ceiling (issue #52's uncontended goals).
constexpr int kUncontendedRounds = 3;

// What one run measures: the full lists, or tiny ones that test the harness.
struct Grid {
  std::vector<int> thread_counts;                 // in one process, on one key and on many
  std::vector<std::pair<int, int>> process_grid;  // (processes, threads), real server only
  std::vector<int> fair_queue;                    // fair waiters, real server only
  int ceiling_requests = bench::kRedisBenchmarkRequests;
  int gap_rounds = kGapRounds;  // paired budget + forced handoff, real server only
  // The (processes, threads) shape measured in rounds against a paired
  // ceiling (wake scope fleet), and how.
  std::pair<int, int> paired_ceiling_shape = {8, 16};
  int ceiling_rounds = kCeilingRounds;
  int uncontended_rounds = kUncontendedRounds;  // real server: each against its own ceiling
  int paired_ceiling_requests = kPairedCeilingRequests;
  // Before each fair queue's window: its waiters join (first tries and
  // subscriptions: 5,000 of them take seconds on two cores), so the window
  // measures the queue's service, not its arrival.
  std::chrono::milliseconds fair_queue_warm_up = std::chrono::seconds(5);
};

Grid full_grid() {
  return {.thread_counts = {2, 8, 32},
          .process_grid = {{1, 64}, {2, 64}, {8, 1}, {8, 16}},
          .fair_queue = {1, 10, 100, 1000, 5000}};
}

Grid quick_grid() {
  return {.thread_counts = {2},
          .process_grid = {{1, 2}, {2, 2}},
          .fair_queue = {1, 4},
          .ceiling_requests = 2000,
          .gap_rounds = 1,
          .paired_ceiling_shape = {2, 2},
          .ceiling_rounds = 1,
          .uncontended_rounds = 1,
          .paired_ceiling_requests = 1000,
          .fair_queue_warm_up = std::chrono::milliseconds(100)};
}

struct Ceilings {
  double ping_us = 0;             // median PING round trip through the backend
  double evalsha_1_per_s = 0;     // redis-benchmark -c 1
  double evalsha_many_per_s = 0;  // redis-benchmark -c kCeilingClients
};

void emit(const json& line) { std::cout << line.dump() << std::endl; }

// utime+stime of `pid` in seconds; nullopt if /proc/<pid>/stat is unreadable.
std::optional<double> cpu_seconds_of(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!stat || !std::getline(stat, text)) return std::nullopt;
  // The command name may hold spaces: fields are counted after its ')'.
  const std::size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 2));
  std::vector<std::string> words;
  for (std::string word; fields >> word;) words.push_back(word);
  constexpr std::size_t kUtime = 11;  // field 14 of proc(5); 'state' (field 3) is words[0]
  constexpr std::size_t kStime = 12;
  if (words.size() <= kStime) return std::nullopt;
  return static_cast<double>(std::stoll(words[kUtime]) + std::stoll(words[kStime])) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Calls per command name from INFO commandstats ("cmdstat_evalsha:calls=12,...").
std::map<std::string, long long> command_calls(turnstile::Backend& backend) {
  std::map<std::string, long long> calls;
  const turnstile::Reply info = backend.command({"INFO", "commandstats"});
  if (!info.is_bulk()) return calls;
  std::istringstream lines(info.as_string());
  constexpr std::string_view kPrefix = "cmdstat_";
  constexpr std::string_view kCalls = ":calls=";
  for (std::string line; std::getline(lines, line);) {
    const std::size_t at = line.find(kCalls);
    if (line.rfind(kPrefix, 0) != 0 || at == std::string::npos) continue;
    calls[line.substr(kPrefix.size(), at - kPrefix.size())] = std::atoll(line.c_str() + at + kCalls.size());
  }
  return calls;
}

std::string describe(const bench::WorkloadShape& shape) {
  std::string text = std::string(turnstile::flavor_name(shape.flavor)) + " ";
  if (shape.processes > 1) text += std::to_string(shape.processes) + " processes x ";
  text += std::to_string(shape.threads) + " threads on " + std::to_string(shape.keys) + " key(s)";
  if (shape.forced_handoff) text += ", forced handoff";
  return text;
}

// Which curve a row belongs to: "threads" (one process), "grid"
// (processes x threads), "fair_queue" (queue length).
struct RowTags {
  std::string_view series = "threads";
  std::optional<turnstile::WakeScope> wake_scope;  // set where it matters: across processes
};

json result_line(std::string_view backend, const bench::WorkloadShape& shape, const bench::WorkloadResult& result,
                 const std::optional<Ceilings>& ceilings, const RowTags& tags = {}) {
  json line = {
      {"kind", "workload"},
      {"series", tags.series},
      {"backend", backend},
      {"flavor", turnstile::flavor_name(shape.flavor)},
      {"processes", shape.processes},
      {"threads", shape.threads},
      {"contenders", shape.contenders()},
      {"keys", shape.keys},
      {"forced_handoff", shape.forced_handoff},
      {"warm_up_ms", shape.warm_up.count()},
      {"seconds", result.seconds},
      {"acquisitions", result.acquisitions},
      {"acquisitions_per_s", result.acquisitions_per_s()},
      {"handoffs", result.handoffs},
      {"handoffs_per_s", result.handoffs_per_s()},
      {"handoff_share", result.handoff_share()},
      {"gap_median_us", bench::percentile_us(result.gaps_us, 0.5)},
      {"gap_p99_us", bench::percentile_us(result.gaps_us, 0.99)},
      {"gap_samples", result.gaps_us.size()},
      {"errors", result.errors},
  };
  if (tags.wake_scope) line["wake_scope"] = *tags.wake_scope == turnstile::WakeScope::fleet ? "fleet" : "process";
  if (!result.first_error.empty()) line["first_error"] = result.first_error;
  if (!result.handoff_parts.empty() || result.unwoken_handoffs > 0) {
    const auto count_of = [&](bool granted) {
      return std::ranges::count(result.handoff_parts, granted, &bench::HandoffParts::granted);
    };
    const bench::HandoffParts woken = bench::median_parts(result.handoff_parts, /*granted=*/false);
    line["handoff_parts_median_us"] = {
        {"release_prepare", woken.release_prepare_us},
        {"release_to_message", woken.release_to_message_us},
        {"wake_up", woken.wake_up_us},
        {"acquire_script", woken.acquire_script_us},
        {"return", woken.return_us},
    };
    line["handoff_parts_samples"] = count_of(false);
    // A fair lock's direct handoffs: the message carried the grant.
    const bench::HandoffParts granted = bench::median_parts(result.handoff_parts, /*granted=*/true);
    line["granted_parts_median_us"] = {
        {"release_prepare", granted.release_prepare_us},
        {"release_to_message", granted.release_to_message_us},
        {"grant_taken", granted.wake_up_us},
    };
    line["granted_parts_samples"] = count_of(true);
    line["unwoken_handoffs"] = result.unwoken_handoffs;
  }
  if (result.server_cpu_s && result.acquisitions > 0) {
    line["redis_cpu_us_per_acquisition"] = *result.server_cpu_s * 1e6 / static_cast<double>(result.acquisitions);
  }
  if (!result.server_commands.empty() && result.acquisitions > 0) {
    json per_acquisition = json::object();
    for (const auto& [name, calls] : result.server_commands) {
      per_acquisition[name] = static_cast<double>(calls) / static_cast<double>(result.acquisitions);
    }
    line["redis_commands_per_acquisition"] = per_acquisition;
  }
  if (ceilings) {
    // One key serializes the contenders: its ceiling is one client's.
    const double evalsha =
        shape.contenders() > 1 && shape.keys > 1 ? ceilings->evalsha_many_per_s : ceilings->evalsha_1_per_s;
    line["ratio_to_evalsha_pair_ceiling"] = result.acquisitions_per_s() / (evalsha / 2);
    line["gap_median_pings"] = line["gap_median_us"].get<double>() / ceilings->ping_us;
    line["gap_p99_pings"] = line["gap_p99_us"].get<double>() / ceilings->ping_us;
  }
  return line;
}

void progress(std::string_view backend, const bench::WorkloadShape& shape, const bench::WorkloadResult& result,
              const RowTags& tags = {}) {
  std::string what = describe(shape);
  if (tags.wake_scope) what += tags.wake_scope == turnstile::WakeScope::fleet ? ", fleet" : ", process";
  std::fprintf(stderr, "  %-5s %-66s %9.0f acq/s %6.1f%% handoffs, gap median %6.0f us p99 %7.0f us\n",
               std::string(backend).c_str(), what.c_str(), result.acquisitions_per_s(), 100 * result.handoff_share(),
               bench::percentile_us(result.gaps_us, 0.5), bench::percentile_us(result.gaps_us, 0.99));
  if (result.errors > 0) {
    std::fprintf(stderr, "        %lld error(s), the first: %s\n", static_cast<long long>(result.errors),
                 result.first_error.c_str());
  }
}

// Which measurements to run (empty: all).
struct Selection {
  std::vector<turnstile::Flavor> flavors;
  std::vector<int> contenders;
  std::vector<int> processes;
  turnstile::ClientOptions client_options;  // every client's (--wake-scope, --permit-handoff)

  bool keeps(turnstile::Flavor flavor) const {
    return flavors.empty() || std::find(flavors.begin(), flavors.end(), flavor) != flavors.end();
  }
  bool keeps(const bench::WorkloadShape& shape) const {
    return keeps(shape.flavor) &&
           (contenders.empty() ||
            std::find(contenders.begin(), contenders.end(), shape.contenders()) != contenders.end()) &&
           (processes.empty() || std::find(processes.begin(), processes.end(), shape.processes) != processes.end());
  }
};

// The shapes run on both backends, in order.
std::vector<bench::WorkloadShape> thread_shapes(turnstile::Flavor flavor, std::chrono::milliseconds duration,
                                                const Grid& grid) {
  std::vector<bench::WorkloadShape> shapes;
  shapes.push_back({.flavor = flavor, .duration = duration});
  for (const int threads : grid.thread_counts) {
    shapes.push_back({.flavor = flavor, .threads = threads, .duration = duration});
    shapes.push_back({.flavor = flavor, .threads = threads, .forced_handoff = true, .duration = duration});
    shapes.push_back({.flavor = flavor, .threads = threads, .keys = kManyKeys, .duration = duration});
  }
  return shapes;
}

// `measure` once, or the best of kUncontendedRounds for one contender.
bench::WorkloadResult best_run(const bench::WorkloadShape& shape,
                               const std::function<bench::WorkloadResult()>& measure) {
  bench::WorkloadResult best = measure();
  for (int round = 1; shape.contenders() == 1 && round < kUncontendedRounds; ++round) {
    bench::WorkloadResult next = measure();
    if (next.acquisitions_per_s() > best.acquisitions_per_s()) best = std::move(next);
  }
  return best;
}

std::string unique_prefix(std::string_view backend, const bench::WorkloadShape& shape, int run) {
  return "bench:" + std::string(backend) + ":" + std::string(turnstile::flavor_name(shape.flavor)) + ":" +
         std::to_string(run);
}

// Runs `shape` in shape.processes exec'd copies of this program; calls
// `hooks` at the window's start and end.
bench::WorkloadResult run_in_processes(turnstile::Client& client, int port, const bench::WorkloadShape& shape,
                                       turnstile::WakeScope wake_scope, turnstile::Handoff permit_handoff,
                                       const bench::WindowHooks& hooks) {
  for (int key = 0; key < shape.keys; ++key) bench::prepare_key(client, shape.flavor, shape.key(key));
  bench::SharedArena arena;
  std::vector<pid_t> workers;
  for (int process = 0; process < shape.processes; ++process) {
    const std::vector<std::string> words = {
        "contention_benchmark",
        "--worker",
        "--port=" + std::to_string(port),
        "--arena-fd=" + std::to_string(arena.fd()),
        "--process-index=" + std::to_string(process),
        "--flavor=" + std::string(turnstile::flavor_name(shape.flavor)),
        "--threads=" + std::to_string(shape.threads),
        "--keys=" + std::to_string(shape.keys),
        "--forced-handoff=" + std::string(shape.forced_handoff ? "1" : "0"),
        "--duration-ms=" + std::to_string(shape.duration.count()),
        "--warm-up-ms=" + std::to_string(shape.warm_up.count()),
        "--key-prefix=" + shape.key_prefix,
        std::string("--wake-scope=") + (wake_scope == turnstile::WakeScope::fleet ? "fleet" : "process"),
        std::string("--permit-handoff=") + (permit_handoff == turnstile::Handoff::direct ? "direct" : "announce"),
    };
    std::vector<char*> argv;
    for (const std::string& word : words) argv.push_back(const_cast<char*>(word.c_str()));
    argv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      execv("/proc/self/exe", argv.data());
      _exit(127);
    }
    workers.push_back(pid);
  }
  bench::start_when_ready(arena.get(), shape.contenders());
  bench::follow_window(arena.get(), shape, hooks);
  int failed_workers = 0;
  for (const pid_t pid : workers) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed_workers;
  }
  // A failed worker is counted in the row, not fatal to the benchmark.
  bench::WorkloadResult result = bench::collect(arena.get(), shape);
  if (failed_workers > 0) {
    result.errors += failed_workers;
    if (result.first_error.empty()) result.first_error = std::to_string(failed_workers) + " worker process(es) failed";
  }
  return result;
}

int worker_main(int port, int arena_fd, int process_index, const bench::WorkloadShape& shape,
                turnstile::ClientOptions options) {
  bench::SharedArena arena(arena_fd);
  turnstile::Client client(
      turnstile::make_redis_backend(turnstile::RedisOptions::from_url("redis://127.0.0.1:" + std::to_string(port))),
      std::move(options));
  bench::run_contenders(client, shape, arena.get(), process_index);
  return 0;
}

// Runs the peer libraries' workloads against the server on `port`: their
// JSON lines go to stdout with ours, their progress to stderr. A failure of
// the peers is reported, not fatal: they are a comparison, not the subject.
void run_peers(const std::string& command, int port, pid_t server) {
  std::fprintf(stderr, "contention_benchmark: peers (%s)\n", command.c_str());
  // As turnstile's uncontended rounds are: the peers' clients on other
  // cores than the server (their processes inherit this thread's CPUs).
  const bench::ServerAndClientApart apart(server);
  const std::string line = "'" + command + "' " + std::to_string(port);
  FILE* pipe = popen(line.c_str(), "r");
  if (pipe == nullptr) {
    std::fprintf(stderr, "  cannot run the peers: %s\n", line.c_str());
    return;
  }
  char buffer[65536];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) std::cout << buffer << std::flush;
  const int status = pclose(pipe);
  if (status != 0) std::fprintf(stderr, "  the peers exited with status %d\n", status);
}

// The ceilings' script: the reentrant lock's acquire, one client re-entering
// one key. measure_ceilings loads it, so redis-benchmark's EVALSHA finds it.
const turnstile::Script& ceiling_script() { return bench::embedded_script("reentrant_lock_acquire"); }

std::vector<std::string> evalsha_ceiling_command() {
  return {"EVALSHA", std::string(ceiling_script().sha1), "1", "ceiling", "30000", "owner"};
}

Ceilings measure_ceilings(turnstile::testing::RedisServer& server, turnstile::Backend& backend, const Grid& grid) {
  backend.eval(ceiling_script(), {"ceiling"}, {"30000", "owner"});
  const std::vector<std::string> evalsha = evalsha_ceiling_command();
  Ceilings ceilings;
  ceilings.ping_us = bench::ping_round_trip_us(backend);
  emit({{"kind", "ping_round_trip"}, {"median_us", ceilings.ping_us}});
  for (const int clients : {1, kCeilingClients}) {
    const double ping = bench::redis_benchmark_rate(server.port(), clients, {"PING"}, grid.ceiling_requests);
    const double script = bench::redis_benchmark_rate(server.port(), clients, evalsha, grid.ceiling_requests);
    emit({{"kind", "ceiling"}, {"command", "PING"}, {"clients", clients}, {"requests_per_s", ping}});
    emit({{"kind", "ceiling"},
          {"command", "EVALSHA reentrant_lock_acquire"},
          {"clients", clients},
          {"requests_per_s", script}});
    std::fprintf(stderr, "  ceiling -c %d: PING %.0f/s, EVALSHA %.0f/s\n", clients, ping, script);
    (clients == 1 ? ceilings.evalsha_1_per_s : ceilings.evalsha_many_per_s) = script;
  }
  const bench::HandoffBudget budget = bench::measure_handoff_budget(backend, "bench:budget");
  emit({{"kind", "handoff_budget"},
        {"publish_to_handler_us", budget.publish_to_handler_us},
        {"publish_reply_us", budget.publish_reply_us},
        {"handler_to_waiter_us", budget.handler_to_waiter_us},
        {"acquire_script_us", budget.acquire_script_us}});
  std::fprintf(stderr,
               "  handoff budget: PUBLISH -> handler %.1f us, handler -> waiter %.1f us, acquire script %.1f us\n",
               budget.publish_to_handler_us, budget.handler_to_waiter_us, budget.acquire_script_us);
  return ceilings;
}

// One round of the gap goals: the floor (one-way PUBLISH + the acquire
// script's round trip) measured on `backend`, then `shape` (a forced
// handoff) through `measure`; one "gap_round" line.
void gap_round(turnstile::Backend& backend, const bench::WorkloadShape& shape, int round,
               const std::function<bench::WorkloadResult()>& measure) {
  const bench::HandoffBudget budget = bench::measure_handoff_budget(backend, "bench:budget:" + std::to_string(round));
  const bench::WorkloadResult result = measure();
  const double floor_us = budget.publish_to_handler_us + budget.acquire_script_us;
  const double gap_us = bench::percentile_us(result.gaps_us, 0.5);
  emit({{"kind", "gap_round"},
        {"round", round},
        {"flavor", turnstile::flavor_name(shape.flavor)},
        {"contenders", shape.contenders()},
        {"publish_to_handler_us", budget.publish_to_handler_us},
        {"acquire_script_us", budget.acquire_script_us},
        {"floor_us", floor_us},
        {"gap_median_us", gap_us},
        {"gap_samples", result.gaps_us.size()},
        {"errors", result.errors}});
  std::fprintf(stderr, "  gap round %d, %s: floor %.1f us, gap %.1f us = %.2f x\n", round,
               std::string(turnstile::flavor_name(shape.flavor)).c_str(), floor_us, gap_us,
               floor_us > 0 ? gap_us / floor_us : 0.0);
}

// A row measured in `round_count` rounds against paired ceilings (issue
// #33's grid.paired_ceiling_shape, wake scope fleet; every uncontended
// row): each round measures the one-client EVALSHA ceiling and, right
// after it, the row through `measure`; one "ceiling_round" line per round,
// then the row of the round of median ratio, its ratio taken to that
// round's ceiling. An uncontended row's rounds also send the same EVALSHA
// from a blocking client (bench::blocking_client_rate) between the two:
// the ceiling a synchronous client's I/O allows.
void ceiling_rounds(int port, pid_t server, const bench::WorkloadShape& shape, const RowTags& tags, const Grid& grid,
                    int round_count, const Ceilings& ceilings, const std::function<bench::WorkloadResult()>& measure) {
  TURNSTILE_CHECK(round_count >= 1);
  struct Round {
    double evalsha_1_per_s;
    std::optional<double> blocking_evalsha_1_per_s;
    bench::WorkloadResult result;
    double ratio() const { return result.acquisitions_per_s() / (evalsha_1_per_s / 2); }
  };
  const bool uncontended = shape.contenders() == 1;
  // An uncontended row and its ceilings: server and client on different
  // cores (bench::ServerAndClientApart), as the peers' rows are.
  std::optional<bench::ServerAndClientApart> apart;
  if (uncontended) apart.emplace(server);
  std::vector<Round> rounds;
  for (int round = 0; round < round_count; ++round) {
    const double evalsha =
        bench::redis_benchmark_rate(port, 1, evalsha_ceiling_command(), grid.paired_ceiling_requests);
    std::optional<double> blocking;
    if (uncontended)
      blocking = bench::blocking_client_rate(port, evalsha_ceiling_command(), grid.paired_ceiling_requests);
    rounds.push_back({evalsha, blocking, measure()});
    const Round& last = rounds.back();
    json line = {{"kind", "ceiling_round"},
                 {"round", round},
                 {"flavor", turnstile::flavor_name(shape.flavor)},
                 {"processes", shape.processes},
                 {"threads", shape.threads},
                 {"evalsha_1_per_s", evalsha},
                 {"evalsha_requests", grid.paired_ceiling_requests},
                 {"acquisitions_per_s", last.result.acquisitions_per_s()},
                 {"errors", last.result.errors},
                 {"ratio_to_evalsha_pair_ceiling", last.ratio()}};
    if (blocking) line["blocking_evalsha_1_per_s"] = *blocking;
    emit(line);
    std::fprintf(stderr, "  ceiling round %d, %s: EVALSHA %.0f/s (blocking client %.0f/s), %.0f acq/s = %.2f\n", round,
                 std::string(turnstile::flavor_name(shape.flavor)).c_str(), evalsha, blocking.value_or(0.0),
                 last.result.acquisitions_per_s(), last.ratio());
  }
  std::sort(rounds.begin(), rounds.end(), [](const Round& a, const Round& b) { return a.ratio() < b.ratio(); });
  const Round& median = rounds[rounds.size() / 2];
  Ceilings paired = ceilings;
  paired.evalsha_1_per_s = median.evalsha_1_per_s;
  progress("redis", shape, median.result, tags);
  json line = result_line("redis", shape, median.result, paired, tags);
  line["paired_evalsha_1_per_s"] = median.evalsha_1_per_s;
  if (median.blocking_evalsha_1_per_s) line["paired_blocking_evalsha_1_per_s"] = *median.blocking_evalsha_1_per_s;
  line["ceiling_rounds"] = rounds.size();
  emit(line);
}

void run_fake(std::chrono::milliseconds duration, const Selection& selection, const Grid& grid) {
  const auto traced = std::make_shared<bench::HandoffTrace>(turnstile::sim::make_standalone_fake_backend("bench"));
  turnstile::Client client(traced, selection.client_options);
  int run = 0;
  for (const turnstile::Flavor flavor : bench::kFlavors) {
    for (bench::WorkloadShape shape : thread_shapes(flavor, duration, grid)) {
      if (!selection.keeps(shape)) continue;
      shape.key_prefix = unique_prefix("fake", shape, run++);
      const bench::WorkloadResult result =
          best_run(shape, [&] { return bench::run_in_process(client, shape, traced.get()); });
      progress("fake", shape, result);
      emit(result_line("fake", shape, result, std::nullopt));
    }
  }
}

void run_redis(std::chrono::milliseconds duration, const std::string& peers_command, const Selection& selection,
               const Grid& grid) {
  turnstile::testing::RedisServer server;
  std::shared_ptr<turnstile::Backend> backend =
      turnstile::make_redis_backend(turnstile::RedisOptions::from_url(server.url()));
  // The workloads' client stamps its handoffs (handoff_trace.h); the
  // ceilings use the backend directly.
  const auto traced = std::make_shared<bench::HandoffTrace>(backend);
  turnstile::Client client(traced, selection.client_options);
  const Ceilings ceilings = measure_ceilings(server, *backend, grid);
  int run = 0;
  // One measurement window of `shape`, with the server's counters over it.
  const auto measure_once = [&](const bench::WorkloadShape& shape, const RowTags& tags) {
    std::optional<double> cpu_before;
    std::optional<double> cpu_after;
    std::map<std::string, long long> commands;
    // The server's counters from the window's start (before the run, or
    // after its warm-up) to its end, before the contenders still waiting
    // leave (a long fair queue withdraws its entries).
    const auto sample_start = [&] {
      (void)backend->command({"CONFIG", "RESETSTAT"});
      cpu_before = cpu_seconds_of(server.pid());
    };
    bench::WindowHooks hooks{.end = [&] {
      cpu_after = cpu_seconds_of(server.pid());
      commands = command_calls(*backend);
    }};
    if (shape.warm_up > std::chrono::milliseconds::zero()) {
      hooks.start = sample_start;
    } else {
      sample_start();
    }
    bench::WorkloadResult run_result =
        shape.processes > 1 ? run_in_processes(client, server.port(), shape,
                                               tags.wake_scope.value_or(selection.client_options.wake_scope),
                                               selection.client_options.permit_handoff, hooks)
                            : bench::run_in_process(client, shape, traced.get(), hooks);
    if (cpu_before && cpu_after) run_result.server_cpu_s = *cpu_after - *cpu_before;
    run_result.server_commands = std::move(commands);
    run_result.server_commands.erase("config|resetstat");
    run_result.server_commands.erase("info");
    return run_result;
  };
  const auto measure = [&](bench::WorkloadShape shape, const RowTags& tags) {
    if (!selection.keeps(shape)) return;
    const bool paired_shape = tags.wake_scope == turnstile::WakeScope::fleet &&
                              std::pair(shape.processes, shape.threads) == grid.paired_ceiling_shape;
    const bool uncontended = shape.contenders() == 1 && tags.series == RowTags{}.series;
    if (paired_shape || uncontended) {
      const int rounds = paired_shape ? grid.ceiling_rounds : grid.uncontended_rounds;
      ceiling_rounds(server.port(), server.pid(), shape, tags, grid, rounds, ceilings, [&] {
        shape.key_prefix = unique_prefix("redis", shape, run++);
        return measure_once(shape, tags);
      });
      return;
    }
    shape.key_prefix = unique_prefix("redis", shape, run++);
    const bench::WorkloadResult result = best_run(shape, [&] { return measure_once(shape, tags); });
    progress("redis", shape, result, tags);
    emit(result_line("redis", shape, result, ceilings, tags));
  };
  for (const turnstile::Flavor flavor : bench::kFlavors) {
    for (const bench::WorkloadShape& shape : thread_shapes(flavor, duration, grid)) measure(shape, {});
    for (const auto& [processes, threads] : grid.process_grid) {
      const bench::WorkloadShape shape{
          .flavor = flavor, .processes = processes, .threads = threads, .duration = duration};
      if (processes == 1) {
        measure(shape, {.series = "grid"});
        continue;
      }
      for (const turnstile::WakeScope scope : {turnstile::WakeScope::process, turnstile::WakeScope::fleet}) {
        measure(shape, {.series = "grid", .wake_scope = scope});
      }
    }
  }
  // The read-write lock's write half (every contender a writer): issue
  // #33's read-write herd, on the processes × threads grid only (its
  // mixed reader/writer figures are read_write_benchmark's).
  if (selection.keeps(turnstile::Flavor::read_write)) {
    const turnstile::Flavor flavor = turnstile::Flavor::read_write;
    measure({.flavor = flavor, .duration = duration}, {});
    for (const auto& [processes, threads] : grid.process_grid) {
      const bench::WorkloadShape shape{
          .flavor = flavor, .processes = processes, .threads = threads, .duration = duration};
      measure(shape, {.series = "grid",
                      .wake_scope = processes > 1 ? std::optional(turnstile::WakeScope::fleet) : std::nullopt});
    }
  }
  if (selection.keeps(turnstile::Flavor::fair)) {
    for (const int waiters : grid.fair_queue) {
      const int processes = waiters > kFairQueueThreadsInOneProcess ? kFairQueueProcesses : 1;
      measure({.flavor = turnstile::Flavor::fair,
               .processes = processes,
               .threads = waiters / processes,
               .duration = waiters >= kLongQueue ? duration * kLongQueueDurationFactor : duration,
               .warm_up = grid.fair_queue_warm_up},
              {.series = "fair_queue"});
    }
  }
  for (int round = 0; round < grid.gap_rounds; ++round) {
    for (const turnstile::Flavor flavor : kGapFlavors) {
      bench::WorkloadShape shape{
          .flavor = flavor, .threads = kGapContenders, .forced_handoff = true, .duration = duration};
      if (!selection.keeps(shape)) continue;
      shape.key_prefix = unique_prefix("redis-gap", shape, run++);
      gap_round(*backend, shape, round, [&] { return bench::run_in_process(client, shape, traced.get()); });
    }
  }
  if (!peers_command.empty()) run_peers(peers_command, server.port(), server.pid());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("turnstile under synthetic contention (JSON lines on stdout)");
  int duration_ms = 1000;
  std::vector<std::string> backends = {"fake", "redis"};
  bool worker = false;
  int port = 0;
  int arena_fd = -1;
  int process_index = 0;
  std::string grid_name = "full";
  std::string flavor = "reentrant";
  bench::WorkloadShape shape;
  bool forced_handoff = false;
  app.add_option("--duration-ms", duration_ms, "length of each measurement")->check(CLI::Range(50, 60'000));
  app.add_option("--backends", backends, "fake, redis or both")->delimiter(',');
  std::string peers_command;
  app.add_option("--peers-command", peers_command,
                 "run '<command> <port>' against the same server after the redis workloads; its stdout JSON lines "
                 "are passed on");
  // Worker mode: one process of a multi-process measurement.
  app.add_flag("--worker", worker);
  app.add_option("--port", port);
  app.add_option("--arena-fd", arena_fd);
  app.add_option("--process-index", process_index)->check(CLI::Range(0, bench::kMaxProcesses - 1));
  app.add_option("--flavor", flavor);
  app.add_option("--threads", shape.threads)->check(CLI::Range(1, bench::kMaxThreadsPerProcess));
  app.add_option("--keys", shape.keys)->check(CLI::Range(1, bench::kMaxKeys));
  app.add_option("--forced-handoff", forced_handoff);
  int warm_up_ms = 0;
  app.add_option("--warm-up-ms", warm_up_ms)->check(CLI::Range(0, 60'000));
  app.add_option("--key-prefix", shape.key_prefix);
  std::vector<std::string> flavor_names;
  Selection selection;
  app.add_option("--flavors", flavor_names, "only these flavors (default: all)")->delimiter(',');
  app.add_option("--contenders", selection.contenders, "only these contender counts (default: all)")->delimiter(',');
  const std::map<std::string, turnstile::WakeScope> wake_scopes = {{"process", turnstile::WakeScope::process},
                                                                   {"fleet", turnstile::WakeScope::fleet}};
  app.add_option("--wake-scope", selection.client_options.wake_scope, "process or fleet (ClientOptions::wake_scope)")
      ->transform(CLI::CheckedTransformer(wake_scopes));
  const std::map<std::string, turnstile::Handoff> handoffs = {{"direct", turnstile::Handoff::direct},
                                                              {"announce", turnstile::Handoff::announce}};
  app.add_option("--permit-handoff", selection.client_options.permit_handoff,
                 "direct or announce (ClientOptions::permit_handoff)")
      ->transform(CLI::CheckedTransformer(handoffs));
  app.add_option("--processes", selection.processes, "only shapes of these process counts (default: all)")
      ->delimiter(',');
  app.add_option("--grid", grid_name, "full, or quick: a tiny grid that tests the harness")
      ->check(CLI::IsMember({"full", "quick"}));
  CLI11_PARSE(app, argc, argv);
  const Grid grid = grid_name == "quick" ? quick_grid() : full_grid();
  for (const std::string& name : flavor_names) {
    const std::optional<turnstile::Flavor> selected = turnstile::parse_flavor(name);
    if (!selected) {
      std::fprintf(stderr, "unknown flavor '%s'\n", name.c_str());
      return 64;
    }
    selection.flavors.push_back(*selected);
  }
  const std::optional<turnstile::Flavor> parsed = turnstile::parse_flavor(flavor);
  if (!parsed) {
    std::fprintf(stderr, "unknown flavor '%s'\n", flavor.c_str());
    return 64;
  }
  shape.flavor = *parsed;
  shape.forced_handoff = forced_handoff;
  shape.duration = std::chrono::milliseconds(duration_ms);
  shape.warm_up = std::chrono::milliseconds(warm_up_ms);
  if (worker) return worker_main(port, arena_fd, process_index, shape, selection.client_options);

  const auto duration = std::chrono::milliseconds(duration_ms);
  for (const std::string& backend : backends) {
    std::fprintf(stderr, "contention_benchmark: %s\n", backend.c_str());
    if (backend == "fake") {
      run_fake(duration, selection, grid);
    } else if (backend == "redis") {
      run_redis(duration, peers_command, selection, grid);
    } else {
      std::fprintf(stderr, "unknown backend '%s' (fake or redis)\n", backend.c_str());
      return 64;
    }
  }
  return 0;
}
