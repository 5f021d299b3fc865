// benchmarks/workload.h
//
// The contended workload shared by the benchmark programs: contenders
// (threads, possibly in several processes) loop acquire -> release on one or
// more keys of one flavor, and the harness counts
//
//   * acquisitions;
//   * real handoffs: acquisitions by another contender than the previous
//     holder of that key;
//   * the handoff gap: from the previous holder's release call to the next
//     holder's acquire return (microseconds, handoffs only).
//
// Bookkeeping lives in an Arena: a shared memory region (memfd) that forked
// worker processes attach to by file descriptor, so a handoff between two
// processes is seen like one between two threads (steady_clock is
// CLOCK_MONOTONIC, common to every process). Each key's record is written
// only by the contender holding that key, so the lock under test is what
// orders the writes.
//
// The measurement is the window [start + warm_up, start + warm_up +
// duration]: acquisitions returning outside it are not counted, and
// contenders still waiting at its end leave through AcquireOptions::stop (a
// fair waiter withdraws), so a long queue is measured at its length, not
// while it drains. A warm-up lets thousands of waiters join (their first
// tries and subscriptions) before the window, which then measures the
// queue's service, not its arrival. A caller may sample the server at the
// window's start and end (WindowHooks). A contender whose
// acquisition throws counts an error and tries again (a benchmark reports
// failures, it does not abort on them).
//
// With forced handoff, the holder releases only once another contender waits
// in acquire() on that key, and then competes again only once another
// contender took it (both waits bounded, by polling): every acquisition is a
// handoff to a contender already waiting, as in the peers' workload
// (benchmarks/peers/workload.js).

#ifndef TURNSTILE_BENCHMARKS_WORKLOAD_H_
#define TURNSTILE_BENCHMARKS_WORKLOAD_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "handoff_trace.h"
#include "turnstile/client.h"
#include "turnstile/flavor.h"

namespace turnstile::benchmarks {

// The flavors measured (turnstile/flavor.h; the composite locks have
// benchmarks of their own, over several servers). Each contender holds
// its keys through Client::holdable(); semaphores hold one permit of a
// total of one, so every flavor is a mutual exclusion.
// Every single-node flavor of one holder (or one permit) at a time: none
// composite, none with shared holds (read_write_benchmark has its own).
inline constexpr std::size_t kMeasuredFlavorCount = [] {
  std::size_t count = 0;
  for (const FlavorTraits& traits : kFlavorTable) count += !traits.is_composite && !traits.has_shared_holds ? 1 : 0;
  return count;
}();
inline constexpr std::array<Flavor, kMeasuredFlavorCount> kFlavors = [] {
  std::array<Flavor, kMeasuredFlavorCount> flavors{};
  std::size_t next = 0;
  for (const FlavorTraits& traits : kFlavorTable) {
    if (!traits.is_composite && !traits.has_shared_holds) flavors[next++] = traits.flavor;
  }
  return flavors;
}();

// Sets the permit total of a semaphore key to one (no-op for locks). Call
// once per key before any contender starts.
void prepare_key(Client& client, Flavor flavor, const std::string& key);

inline constexpr int kMaxKeys = 64;
inline constexpr int kMaxProcesses = 8;
// 625: the fair queue of 5,000 waiters is 8 processes of 625 threads.
inline constexpr int kMaxThreadsPerProcess = 640;
inline constexpr std::size_t kMaxGapSamplesPerProcess = 200'000;
// Handoffs split into their parts (handoff_trace.h), per process.
inline constexpr std::size_t kMaxPartSamplesPerProcess = 50'000;
// How long a forced-handoff contender waits for another to take the key
// before it competes again anyway (nobody else may be waiting).
inline constexpr auto kForcedHandoffWait = std::chrono::milliseconds(50);
inline constexpr auto kForcedHandoffPoll = std::chrono::microseconds(100);

struct WorkloadShape {
  Flavor flavor = Flavor::reentrant;
  int processes = 1;  // 1: threads of the calling process only
  int threads = 1;    // per process
  int keys = 1;       // 1..kMaxKeys; each acquisition picks one at random
  bool forced_handoff = false;
  std::chrono::milliseconds duration{1000};
  std::chrono::milliseconds warm_up{0};  // before the window: contenders run, nothing is counted
  std::string key_prefix = "bench";

  int contenders() const { return processes * threads; }
  std::string key(int index) const { return key_prefix + ":" + std::to_string(index); }
};

struct KeyRecord {
  std::atomic<std::int64_t> holder{-1};  // contender id; -1 before the first acquisition
  std::atomic<std::int64_t> release_call_ns{0};
  std::atomic<int> waiting{0};  // contenders inside acquire() on this key
};

struct ProcessSlot {
  std::atomic<std::int64_t> acquisitions{0};
  std::atomic<std::int64_t> handoffs{0};
  std::atomic<std::size_t> gap_count{0};  // may exceed the capacity: samples beyond it are dropped
  std::array<double, kMaxGapSamplesPerProcess> gaps_us;
  std::atomic<std::size_t> part_count{0};         // as gap_count
  std::atomic<std::int64_t> unwoken_handoffs{0};  // traced handoffs whose stamps show no wake-up message
  std::array<HandoffParts, kMaxPartSamplesPerProcess> parts;
  std::atomic<std::int64_t> errors{0};  // acquisitions or releases that threw
  std::atomic<bool> error_kept{false};  // first_error written (by the one that set it)
  std::array<char, 256> first_error{};  // NUL-terminated
};

struct Arena {
  std::atomic<int> ready{0};              // contenders set up and waiting for the start
  std::atomic<std::int64_t> start_ns{0};  // 0 until the start; steady_clock nanoseconds
  // A futex word, 0 until the start and 1 after: thousands of contenders
  // sleep on it instead of polling start_ns (5,000 pollers at 500 µs would
  // take the two cores the set-up needs).
  std::atomic<std::uint32_t> start_gate{0};
  std::atomic<int> not_ready_at_start{0};  // contenders still setting up when the set-up bound passed
  std::array<KeyRecord, kMaxKeys> keys;
  std::array<ProcessSlot, kMaxProcesses> processes;
};
static_assert(std::atomic<std::int64_t>::is_always_lock_free, "the arena is shared between processes");
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
                  std::atomic<std::uint32_t>::is_always_lock_free,
              "the start gate is a futex word");

// An Arena in a memfd mapping, inherited by exec'd children through fd().
class SharedArena {
 public:
  // A new, zeroed arena.
  SharedArena();
  // The arena of a parent process, by its file descriptor.
  explicit SharedArena(int fd);
  ~SharedArena();
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  Arena& get() { return *arena_; }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  Arena* arena_ = nullptr;
};

std::int64_t steady_now_ns();

// Runs `shape.threads` contenders of process `process_index` over `client`:
// each sets up its handles, counts itself ready, waits for arena.start_ns,
// and loops until the window's end. Results go to
// arena.processes[process_index]. With `trace` (the backend `client` calls
// through) and forced handoff, each handoff is also split into its parts.
void run_contenders(Client& client, const WorkloadShape& shape, Arena& arena, int process_index,
                    const HandoffTrace* trace = nullptr);

// Waits until `contenders` are ready, then starts them.
void start_when_ready(Arena& arena, int contenders);

// Where a caller samples the server: `start` once the warm-up is over (the
// measured window begins), `end` once the window ended, while the
// contenders leave. Either may be empty.
struct WindowHooks {
  std::function<void()> start;
  std::function<void()> end;
};

// The measured window of `shape` in a run started at `start_ns`.
std::int64_t window_start_ns(std::int64_t start_ns, const WorkloadShape& shape);
std::int64_t window_end_ns(std::int64_t start_ns, const WorkloadShape& shape);

// Once the run of `shape` in `arena` has started: calls hooks.start at the
// window's start and hooks.end at its end, sleeping in between.
void follow_window(const Arena& arena, const WorkloadShape& shape, const WindowHooks& hooks);

struct WorkloadResult {
  std::int64_t acquisitions = 0;
  std::int64_t handoffs = 0;
  double seconds = 0;
  std::int64_t errors = 0;
  std::string first_error;  // of the first process that had one
  std::vector<double> gaps_us;
  // Traced forced handoffs only (run_contenders' `trace`): each split into
  // its parts, and how many showed no wake-up message.
  std::vector<HandoffParts> handoff_parts;
  std::int64_t unwoken_handoffs = 0;
  // CPU (utime+stime) the Redis server spent during the run, if readable;
  // set by the caller, which knows the server.
  std::optional<double> server_cpu_s;
  // Calls per command name the Redis server ran during the run (INFO
  // commandstats); empty if not measured. Set by the caller too.
  std::map<std::string, long long> server_commands;

  double acquisitions_per_s() const { return seconds > 0 ? static_cast<double>(acquisitions) / seconds : 0; }
  double handoffs_per_s() const { return seconds > 0 ? static_cast<double>(handoffs) / seconds : 0; }
  double handoff_share() const {
    return acquisitions > 0 ? static_cast<double>(handoffs) / static_cast<double>(acquisitions) : 0;
  }
};

// The totals of every process of `shape` once they finished.
WorkloadResult collect(const Arena& arena, const WorkloadShape& shape);

// In this process only (shape.processes must be 1): prepares the keys, runs
// the contenders (with `trace` as run_contenders), calls `hooks` at the
// window's start and end and collects.
WorkloadResult run_in_process(Client& client, const WorkloadShape& shape, const HandoffTrace* trace = nullptr,
                              const WindowHooks& hooks = {});

}  // namespace turnstile::benchmarks

#endif  // TURNSTILE_BENCHMARKS_WORKLOAD_H_
