#include "workload.h"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <ctime>
#include <new>
#include <stop_token>
#include <string_view>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "core/check.h"
#include "latency.h"

namespace turnstile::benchmarks {

namespace {

// How often the parent polls for ready contenders, how long a contender's
// sleep on the start gate lasts at most before it looks again, and how long
// set-up may take at most.
constexpr auto kStartPoll = std::chrono::microseconds(500);
constexpr auto kMaxStartSleep = std::chrono::milliseconds(100);
constexpr auto kMaxSetUp = std::chrono::seconds(60);

std::uint32_t* futex_word(std::atomic<std::uint32_t>& gate) { return reinterpret_cast<std::uint32_t*>(&gate); }

// Sleeps on the arena's start gate (shared between processes, so a
// non-private futex) until the start or `deadline`; true once started.
bool wait_for_start(Arena& arena, SteadyClock::time_point deadline) {
  while (arena.start_gate.load() == 0) {
    const auto left = deadline - SteadyClock::now();
    if (left <= SteadyClock::duration::zero()) return false;
    const auto sleep_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::min<SteadyClock::duration>(left, kMaxStartSleep))
            .count();
    const timespec timeout{.tv_sec = static_cast<time_t>(sleep_ns / 1'000'000'000),
                           .tv_nsec = static_cast<long>(sleep_ns % 1'000'000'000)};
    // EAGAIN (already opened), EINTR and ETIMEDOUT all mean: look again.
    syscall(SYS_futex, futex_word(arena.start_gate), FUTEX_WAIT, 0U, &timeout, nullptr, 0);
  }
  return true;
}

// A small xorshift: which key each acquisition takes (not the lock code,
// which takes no randomness outside the Runtime).
std::uint64_t next_random(std::uint64_t& state) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

// Polls `done` until it holds, kForcedHandoffWait passed or `end_ns`.
template <typename Predicate>
void poll_until(std::int64_t end_ns, Predicate done) {
  const std::int64_t give_up_ns = std::min(
      end_ns, steady_now_ns() + std::chrono::duration_cast<std::chrono::nanoseconds>(kForcedHandoffWait).count());
  while (!done() && steady_now_ns() < give_up_ns) std::this_thread::sleep_for(kForcedHandoffPoll);
}

// Counts a failure of the workload's own calls; keeps the first message.
void note_error(ProcessSlot& slot, const std::exception& error) {
  slot.errors.fetch_add(1);
  if (slot.error_kept.exchange(true)) return;
  const std::string_view what = error.what();
  const std::size_t length = std::min(what.size(), slot.first_error.size() - 1);
  std::copy_n(what.data(), length, slot.first_error.data());
  slot.first_error[length] = '\0';
}

void release_counting_errors(LockHold& hold, ProcessSlot& slot) {
  try {
    hold.release_or_throw();
  } catch (const std::exception& error) {
    note_error(slot, error);
  }
}

}  // namespace

void prepare_key(Client& client, Flavor flavor, const std::string& key) {
  if (!is_semaphore(flavor)) return;
  if (has_leased_permits(flavor)) {
    (void)client.permit_semaphore(key).try_set_permits(1);
  } else {
    (void)client.counting_semaphore(key).try_set_permits(1);
  }
}

SharedArena::SharedArena() {
  fd_ = memfd_create("turnstile-bench-arena", 0);  // no MFD_CLOEXEC: exec'd workers inherit it
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "memfd_create");
  if (ftruncate(fd_, sizeof(Arena)) != 0) throw std::system_error(errno, std::generic_category(), "ftruncate");
  void* memory = mmap(nullptr, sizeof(Arena), PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (memory == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
  arena_ = new (memory) Arena();
}

SharedArena::SharedArena(int fd) : fd_(fd) {
  void* memory = mmap(nullptr, sizeof(Arena), PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (memory == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap of the parent's arena");
  arena_ = static_cast<Arena*>(memory);  // constructed by the parent
}

SharedArena::~SharedArena() {
  if (arena_ != nullptr) munmap(arena_, sizeof(Arena));
  if (fd_ >= 0) close(fd_);
}

std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch()).count();
}

void run_contenders(Client& client, const WorkloadShape& shape, Arena& arena, int process_index,
                    const HandoffTrace* trace) {
  TURNSTILE_CHECK(shape.keys >= 1 && shape.keys <= kMaxKeys);
  TURNSTILE_CHECK(shape.threads >= 1 && shape.threads <= kMaxThreadsPerProcess);
  TURNSTILE_CHECK(process_index >= 0 && process_index < kMaxProcesses);
  ProcessSlot& slot = arena.processes.at(static_cast<std::size_t>(process_index));
  // Ends the waits of contenders still in acquire() at the window's end.
  std::stop_source window_over;
  std::vector<std::thread> threads;
  for (int thread = 0; thread < shape.threads; ++thread) {
    threads.emplace_back([&, thread] {
      // No exception leaves a contender thread: a failure is counted.
      try {
        const std::int64_t me = process_index * kMaxThreadsPerProcess + thread;
        std::vector<std::unique_ptr<Holdable>> handles;
        for (int key = 0; key < shape.keys; ++key) handles.push_back(client.holdable(shape.flavor, shape.key(key)));
        std::uint64_t random_state = 0x9E3779B97F4A7C15ULL ^ static_cast<std::uint64_t>(me + 1);
        arena.ready.fetch_add(1);
        if (!wait_for_start(arena, SteadyClock::now() + kMaxSetUp)) {
          note_error(slot, std::runtime_error("the workload never started"));
          return;
        }
        const std::int64_t measured_from_ns = window_start_ns(arena.start_ns.load(), shape);
        const std::int64_t end_ns = window_end_ns(arena.start_ns.load(), shape);
        std::int64_t acquisitions = 0;
        std::int64_t handoffs = 0;
        std::vector<double> gaps_us;
        std::vector<HandoffParts> parts;
        std::int64_t unwoken = 0;
        while (steady_now_ns() < end_ns) {
          const auto key = static_cast<std::size_t>(shape.keys == 1 ? 0 : next_random(random_state) % shape.keys);
          KeyRecord& record = arena.keys.at(key);
          record.waiting.fetch_add(1);
          LockHold hold;
          try {
            hold = handles[key]->try_acquire_hold({.wait = kWaitForever, .lease = {}, .stop = window_over.get_token()});
          } catch (const std::exception& error) {
            record.waiting.fetch_sub(1);
            note_error(slot, error);
            continue;
          }
          const std::int64_t acquired_ns = steady_now_ns();
          record.waiting.fetch_sub(1);
          if (!hold) break;  // stopped: the window is over
          if (acquired_ns >= end_ns) {
            release_counting_errors(hold, slot);
            break;
          }
          if (acquired_ns < measured_from_ns) {
            // The warm-up: held and released, not counted (the release
            // instant kept, so the window's first handoff has its gap).
            record.holder.store(me, std::memory_order_release);
            record.release_call_ns.store(steady_now_ns());
            release_counting_errors(hold, slot);
            continue;
          }
          ++acquisitions;
          const std::int64_t previous = record.holder.load(std::memory_order_acquire);
          if (previous >= 0 && previous != me) {
            ++handoffs;
            const std::int64_t release_call_ns = record.release_call_ns.load();
            gaps_us.push_back(static_cast<double>(acquired_ns - release_call_ns) / 1e3);
            if (trace != nullptr && shape.forced_handoff) {
              const std::optional<HandoffParts> split = trace->parts_of_handoff(release_call_ns, acquired_ns);
              if (split) {
                parts.push_back(*split);
              } else {
                ++unwoken;
              }
            }
          }
          record.holder.store(me, std::memory_order_release);
          // Forced handoff, part one: release only once another contender
          // waits in acquire(), so the gap measures its wake-up.
          if (shape.forced_handoff) poll_until(end_ns, [&] { return record.waiting.load() > 0; });
          record.release_call_ns.store(steady_now_ns());
          release_counting_errors(hold, slot);
          // Part two: compete again only once another contender took the key.
          if (shape.forced_handoff) poll_until(end_ns, [&] { return record.holder.load() != me; });
        }
        slot.acquisitions.fetch_add(acquisitions);
        slot.handoffs.fetch_add(handoffs);
        const std::size_t first = slot.gap_count.fetch_add(gaps_us.size());
        for (std::size_t i = 0; i < gaps_us.size() && first + i < kMaxGapSamplesPerProcess; ++i) {
          slot.gaps_us[first + i] = gaps_us[i];
        }
        slot.unwoken_handoffs.fetch_add(unwoken);
        const std::size_t first_part = slot.part_count.fetch_add(parts.size());
        for (std::size_t i = 0; i < parts.size() && first_part + i < kMaxPartSamplesPerProcess; ++i) {
          slot.parts[first_part + i] = parts[i];
        }
      } catch (const std::exception& error) {
        note_error(slot, error);
      }
    });
  }
  // The window's end stops the waits (the start is awaited first, bounded
  // by the contenders' own set-up bound).
  std::thread stopper([&] {
    if (wait_for_start(arena, SteadyClock::now() + kMaxSetUp)) follow_window(arena, shape, {});
    window_over.request_stop();
  });
  for (std::thread& thread : threads) thread.join();
  stopper.join();
}

std::int64_t window_start_ns(std::int64_t start_ns, const WorkloadShape& shape) {
  return start_ns + std::chrono::duration_cast<std::chrono::nanoseconds>(shape.warm_up).count();
}

std::int64_t window_end_ns(std::int64_t start_ns, const WorkloadShape& shape) {
  return window_start_ns(start_ns, shape) +
         std::chrono::duration_cast<std::chrono::nanoseconds>(shape.duration).count();
}

void follow_window(const Arena& arena, const WorkloadShape& shape, const WindowHooks& hooks) {
  const std::int64_t start_ns = arena.start_ns.load();
  if (start_ns == 0) return;
  const auto sleep_until_ns = [](std::int64_t until_ns) {
    const std::int64_t left_ns = until_ns - steady_now_ns();
    if (left_ns > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(left_ns));
  };
  sleep_until_ns(window_start_ns(start_ns, shape));
  if (hooks.start) hooks.start();
  sleep_until_ns(window_end_ns(start_ns, shape));
  if (hooks.end) hooks.end();
}

void start_when_ready(Arena& arena, int contenders) {
  const auto deadline = SteadyClock::now() + kMaxSetUp;
  while (arena.ready.load() < contenders && SteadyClock::now() < deadline) std::this_thread::sleep_for(kStartPoll);
  // Starts anyway at the bound: the row is measured with the contenders
  // that made it and reports the others as errors, instead of the whole
  // benchmark dying.
  arena.not_ready_at_start.store(std::max(0, contenders - arena.ready.load()));
  arena.start_ns.store(steady_now_ns());
  arena.start_gate.store(1);
  syscall(SYS_futex, futex_word(arena.start_gate), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

WorkloadResult collect(const Arena& arena, const WorkloadShape& shape) {
  WorkloadResult result;
  for (int process = 0; process < shape.processes; ++process) {
    const ProcessSlot& slot = arena.processes.at(static_cast<std::size_t>(process));
    result.acquisitions += slot.acquisitions.load();
    result.handoffs += slot.handoffs.load();
    const std::size_t samples = std::min(slot.gap_count.load(), kMaxGapSamplesPerProcess);
    result.gaps_us.insert(result.gaps_us.end(), slot.gaps_us.begin(),
                          slot.gaps_us.begin() + static_cast<std::ptrdiff_t>(samples));
    const std::size_t part_samples = std::min(slot.part_count.load(), kMaxPartSamplesPerProcess);
    result.handoff_parts.insert(result.handoff_parts.end(), slot.parts.begin(),
                                slot.parts.begin() + static_cast<std::ptrdiff_t>(part_samples));
    result.unwoken_handoffs += slot.unwoken_handoffs.load();
    result.errors += slot.errors.load();
    if (result.first_error.empty() && slot.error_kept.load()) result.first_error = slot.first_error.data();
  }
  if (const int late = arena.not_ready_at_start.load(); late > 0) {
    result.errors += late;
    if (result.first_error.empty()) {
      result.first_error = std::to_string(late) + " contender(s) were still setting up at the start";
    }
  }
  // Acquisitions are counted within the window only.
  result.seconds = std::chrono::duration<double>(shape.duration).count();
  return result;
}

WorkloadResult run_in_process(Client& client, const WorkloadShape& shape, const HandoffTrace* trace,
                              const WindowHooks& hooks) {
  TURNSTILE_CHECK(shape.processes == 1);
  for (int key = 0; key < shape.keys; ++key) prepare_key(client, shape.flavor, shape.key(key));
  SharedArena arena;
  std::thread starter([&] {
    start_when_ready(arena.get(), shape.threads);
    follow_window(arena.get(), shape, hooks);
  });
  run_contenders(client, shape, arena.get(), 0, trace);
  starter.join();
  return collect(arena.get(), shape);
}

}  // namespace turnstile::benchmarks
