// Scenarios of the read-write lock (--flavor read-write): read-mostly,
// reader-crash, writer-starvation. Readers take the read half
// (make_lock's `shared`), writers the write half; the checkers judge them
// as readers and writers (Checkers, readers_writers).

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "scenarios/scenario_kit.h"
#include "scenarios/scenario_list.h"
#include "turnstile/errors.h"

namespace turnstile::sim::scenarios {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kNeedsReadWrite[] = "has no read half; this scenario needs --flavor read-write";

// read-mostly: nine rounds in ten read.
constexpr std::uint64_t kWriteOneIn = 10;
constexpr auto kReadMostlyHold = milliseconds(200);
constexpr auto kReadMostlyMaxThink = milliseconds(1000);
// reader-crash: a cycle per crashing reader. The steady reader reads
// beside it, the writer asks while both read; the crasher crashes a few
// seconds in, mid-hold.
constexpr auto kCrashFirstCycle = seconds(1);
constexpr auto kCrashCycle = seconds(60);
constexpr auto kSteadyReaderAfter = milliseconds(100);
constexpr auto kSteadyReadHold = seconds(3);
constexpr auto kWriterAsksAfter = seconds(1);
constexpr auto kWriterHold = seconds(1);
constexpr std::int64_t kCrashAfterMinMs = 4'000;
constexpr std::uint64_t kCrashJitterMs = 4'000;
constexpr auto kCrasherHold = std::chrono::hours(1);  // until it crashes
// writer-starvation: readers hold 2 s with at most 100 ms between holds,
// arriving 500 ms apart: a steady stream of overlapping readers; the
// writer asks 5 s in, holds briefly, and asks again a second later.
constexpr auto kStreamReadHold = seconds(2);
constexpr auto kStreamMaxThink = milliseconds(100);
constexpr auto kStreamStagger = milliseconds(500);
constexpr auto kStarvedWriterArrives = seconds(5);
constexpr auto kStarvedWriterHold = milliseconds(100);
constexpr auto kStarvedWriterThink = seconds(1);

// A read round that holds for `hold`.
RoundOptions reading(Runtime& runtime, Duration hold) {
  RoundOptions round;
  round.shared = true;
  round.while_held = [&runtime, hold](const LockHold&) { runtime.sleep_for(hold); };
  return round;
}

void require_read_write(const ScenarioOptions& options) {
  if (!has_shared_holds(options.flavor)) {
    throw InvalidArgumentError(options.scenario + ": --flavor " + std::string(flavor_name(options.flavor)) + " " +
                               kNeedsReadWrite);
  }
}

// Writer waits in virtual ms: the longest and the median (0 if none).
struct Waits {
  std::vector<std::int64_t> ms;
  std::int64_t max() const { return ms.empty() ? 0 : *std::max_element(ms.begin(), ms.end()); }
  std::int64_t median() const {
    if (ms.empty()) return 0;
    std::vector<std::int64_t> sorted = ms;
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2), sorted.end());
    return sorted[sorted.size() / 2];
  }
};

// A round of `member` on `lock` that adds the wait (asked -> granted) to
// `waits`, then runs `hold`.
Round timed_round(ScenarioWorld& sw, Member& member, Holdable& lock, const std::string& name, bool shared, Waits& waits,
                  const std::function<void()>& hold) {
  Runtime& runtime = member.sim->runtime();
  const Instant asked = runtime.now();
  RoundOptions round;
  round.shared = shared;
  round.while_held = [&](const LockHold&) {
    waits.ms.push_back(to_ms(runtime.now() - asked));
    hold();
  };
  return hold_round(sw, member, lock, name, round);
}

}  // namespace

ScenarioResult read_mostly(const ScenarioOptions& options, std::size_t clients, Duration duration) {
  require_read_write(options);
  ScenarioWorld sw(options, clients);
  const std::string lock_name = "lock:catalog";
  sw.watch(lock_name);
  const Instant end = at_offset(duration);
  std::int64_t reads = 0, writes = 0, failed_calls = 0;
  Waits reader_waits, writer_waits;
  for (std::size_t i = 0; i < clients; ++i) {
    Member& member = sw.member(i);
    sw.world.spawn(*member.sim, [&, end] {
      Runtime& runtime = member.sim->runtime();
      auto read = make_lock(sw, member, lock_name, false, /*shared=*/true);
      auto write = make_lock(sw, member, lock_name, false);
      while (runtime.now() < end) {
        const bool writing = runtime.random_u64() % kWriteOneIn == 0;
        const Round done =
            timed_round(sw, member, writing ? *write : *read, lock_name, !writing,
                        writing ? writer_waits : reader_waits, [&runtime] { runtime.sleep_for(kReadMostlyHold); });
        if (done.acquired) ++(writing ? writes : reads);
        failed_calls += static_cast<std::int64_t>(done.failed_calls + (done.lost_before_unlock ? 1 : 0));
        runtime.sleep_for(milliseconds(runtime.random_u64() % kReadMostlyMaxThink.count()));
      }
    });
  }
  sw.run_until(end, end);
  drain_and_check(sw, end);
  ScenarioResult result;
  sw.finish(result);
  result.facts = {{"reads", reads},
                  {"writes", writes},
                  {"max_readers_together", sw.max_readers},
                  {"reader_wait_max_ms", reader_waits.max()},
                  {"writer_wait_max_ms", writer_waits.max()},
                  {"writer_wait_median_ms", writer_waits.median()},
                  {"failed_calls", failed_calls}};
  result.summary = std::to_string(reads) + " reads and " + std::to_string(writes) + " writes by " +
                   std::to_string(clients) + " clients, up to " + std::to_string(sw.max_readers) +
                   " readers together; writers waited up to " + std::to_string(writer_waits.max()) + " ms (median " +
                   std::to_string(writer_waits.median()) + " ms)";
  return result;
}

ScenarioResult reader_crash(const ScenarioOptions& options, std::size_t clients, Duration duration) {
  require_read_write(options);
  ScenarioWorld sw(options, clients);
  const std::string lock_name = "lock:ledger";
  sw.watch(lock_name);
  const Instant end = at_offset(duration);
  // client-01 writes, client-02 reads beside each crasher, client-03.. read
  // and crash, one per cycle.
  Member& writer = sw.member(0);
  Member& steady = sw.member(1);
  std::vector<Instant> cycles;
  for (Instant start = at_offset(kCrashFirstCycle); start < end && cycles.size() + 2 < clients; start += kCrashCycle)
    cycles.push_back(start);
  std::optional<Instant> crashed_at;
  std::int64_t crashes = 0, max_wait_after_crash_ms = 0, writes = 0;
  Waits writer_waits;
  for (std::size_t cycle = 0; cycle < cycles.size(); ++cycle) {
    Member& crasher = sw.member(cycle + 2);
    const Instant start = cycles[cycle];
    const Instant crash_at =
        start + milliseconds(kCrashAfterMinMs + static_cast<std::int64_t>(sw.world.random_u64() % kCrashJitterMs));
    auto holding = std::make_shared<bool>(false);
    sw.world.spawn(*crasher.sim, [&sw, &crasher, lock_name, start, holding] {
      Runtime& runtime = crasher.sim->runtime();
      runtime.sleep_for(start - runtime.now());
      auto read = make_lock(sw, crasher, lock_name, false, /*shared=*/true);
      RoundOptions round = reading(runtime, kCrasherHold);
      round.while_held = [&runtime, holding](const LockHold&) {
        *holding = true;
        runtime.sleep_for(kCrasherHold);
      };
      (void)hold_round(sw, crasher, *read, lock_name, round);
    });
    sw.world.at(crash_at, [&sw, &crasher, &crashed_at, &crashes, holding] {
      if (!*holding) return;
      sw.world.note("crashing the reader " + crasher.sim->name());
      crashed_at = sw.world.now();
      ++crashes;
      sw.world.crash(*crasher.sim);
    });
  }
  sw.world.spawn(*steady.sim, [&sw, &steady, &cycles, lock_name] {
    Runtime& runtime = steady.sim->runtime();
    auto read = make_lock(sw, steady, lock_name, false, /*shared=*/true);
    const RoundOptions round = reading(runtime, kSteadyReadHold);
    for (const Instant start : cycles) {
      runtime.sleep_for(start + kSteadyReaderAfter - runtime.now());
      (void)hold_round(sw, steady, *read, lock_name, round);
    }
  });
  sw.world.spawn(*writer.sim, [&] {
    Runtime& runtime = writer.sim->runtime();
    auto write = make_lock(sw, writer, lock_name, false);
    for (const Instant start : cycles) {
      runtime.sleep_for(start + kWriterAsksAfter - runtime.now());
      const Round done = timed_round(sw, writer, *write, lock_name, false, writer_waits, [&] {
        if (crashed_at) {
          max_wait_after_crash_ms = std::max(max_wait_after_crash_ms, to_ms(runtime.now() - *crashed_at));
          crashed_at.reset();
        }
        runtime.sleep_for(kWriterHold);
      });
      if (done.acquired) ++writes;
    }
  });
  sw.run_until(end, end);
  drain_and_check(sw, end);
  ScenarioResult result;
  sw.finish(result);
  result.faults_injected += static_cast<std::uint64_t>(crashes);
  const std::int64_t watchdog_ms = to_ms(ClientOptions().lease);
  const bool within_lease = max_wait_after_crash_ms <= watchdog_ms;
  result.facts = {{"crashes", crashes},
                  {"writes", writes},
                  {"max_readers_together", sw.max_readers},
                  {"max_writer_wait_after_crash_ms", max_wait_after_crash_ms},
                  {"writer_wait_max_ms", writer_waits.max()},
                  {"lease_ms", watchdog_ms},
                  {"writer_in_within_lease", within_lease ? 1 : 0}};
  result.summary = std::to_string(crashes) + " readers crashed mid-hold; the writer got in at most " +
                   std::to_string(max_wait_after_crash_ms) + " ms after a crash (" +
                   (within_lease ? "within" : "NOT within") + " the " + std::to_string(watchdog_ms) +
                   " ms watchdog lease)";
  return result;
}

ScenarioResult writer_starvation(const ScenarioOptions& options, std::size_t clients, Duration duration) {
  require_read_write(options);
  ScenarioWorld sw(options, clients);
  const std::string lock_name = "lock:feed";
  sw.watch(lock_name);
  const Instant end = at_offset(duration);
  std::int64_t reads = 0, writes = 0, writes_during_stream = 0;
  Waits writer_waits;
  bool starved = false;
  Member& writer = sw.member(0);
  for (std::size_t i = 1; i < clients; ++i) {
    Member& reader = sw.member(i);
    sw.world.spawn(*reader.sim, [&sw, &reader, &reads, lock_name, i, end] {
      Runtime& runtime = reader.sim->runtime();
      runtime.sleep_for(kStreamStagger * static_cast<int>(i - 1));
      auto read = make_lock(sw, reader, lock_name, false, /*shared=*/true);
      const RoundOptions round = reading(runtime, kStreamReadHold);
      while (runtime.now() < end) {
        if (hold_round(sw, reader, *read, lock_name, round).acquired) ++reads;
        runtime.sleep_for(milliseconds(runtime.random_u64() % kStreamMaxThink.count()));
      }
    });
  }
  sw.world.spawn(*writer.sim, [&] {
    Runtime& runtime = writer.sim->runtime();
    auto write = make_lock(sw, writer, lock_name, false);
    runtime.sleep_for(kStarvedWriterArrives);
    while (runtime.now() < end) {
      const Round done = timed_round(sw, writer, *write, lock_name, false, writer_waits, [&] {
        // Granted only once the reader stream stopped: it starved.
        if (runtime.now() >= end)
          starved = true;
        else
          ++writes_during_stream;
        runtime.sleep_for(kStarvedWriterHold);
      });
      if (done.acquired) ++writes;
      runtime.sleep_for(kStarvedWriterThink);
    }
  });
  sw.run_until(end, end);
  drain_and_check(sw, end);
  ScenarioResult result;
  sw.finish(result);
  result.facts = {{"reads", reads},
                  {"max_readers_together", sw.max_readers},
                  {"writes", writes},
                  {"writes_during_stream", writes_during_stream},
                  {"writer_wait_max_ms", writer_waits.max()},
                  {"writer_wait_median_ms", writer_waits.median()},
                  {"stream_ms", to_ms(duration)},
                  {"starved", starved ? 1 : 0}};
  result.summary = std::to_string(clients - 1) + " overlapping readers, 1 writer: the writer waited up to " +
                   std::to_string(writer_waits.max()) + " ms (median " + std::to_string(writer_waits.median()) +
                   " ms) and " +
                   (starved ? "starved: it got in only after the reader stream stopped"
                            : "got in " + std::to_string(writes_during_stream) + " times during the stream") +
                   " (readers are admitted while the lock is in read mode; writers do not queue ahead)";
  return result;
}

}  // namespace turnstile::sim::scenarios
