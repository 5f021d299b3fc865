// Fleet-wide wake-ups of the read-write lock (lua/lib/read_write_wake.lua),
// in simulated worlds (virtual time, exact schedules), several processes
// each with its own Client:
//
//   * a write release lets every waiting reader of the fleet in at once,
//     each with one try; a read release wakes a writer only when the last
//     reader leaves, and then exactly one try;
//   * the longest waiter is served first, whichever its kind: a writer
//     that waited longer than the readers is not passed over (nor readers
//     that waited longer than a writer);
//   * a downgrade (write, then read, then the write released) lets the
//     waiting readers in;
//   * a release nobody hears (the lock deleted behind the library's back)
//     is caught by the waiter's own retry timer, bounded by the lease it
//     was told;
//   * a property over seeds: readers and writers of three processes, with
//     random delays on every call and message, never overlap wrongly, all
//     finish, and none waits while it could have the lock for longer than
//     a handoff takes.
//
// Leases are the watchdog's 30 s unless a test says otherwise: a waiter's
// own timer fires only that late, so every prompt handoff is a wake-up.

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "link_delays.h"
#include "lua_scripts.h"
#include "sim/fake_backend.h"
#include "sim/random.h"
#include "turnstile/client.h"
#include "turnstile/read_write_lock.h"
#include "turnstile/sim/world.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::uint64_t kSeed = 20261126;
constexpr char kName[] = "rw-fleet";
// Far below the 30 s lease a waiter's own timer waits for.
constexpr milliseconds kPromptHandoff{500};

ClientOptions fleet_options() {
  return ClientOptions{.lease = seconds(30),
                       .key_prefix = "",
                       .on_background_error = [](std::exception_ptr) {},
                       .wake_scope = WakeScope::fleet};
}

// Counts the read and write acquisition attempts one link sends while
// armed. Cleared before it dies (the filter reads it).
class TryCounter {
 public:
  explicit TryCounter(sim::FakeBackend& link) : link_(link) {
    link_.set_request_filter([this](const std::vector<std::string>& argv) {
      if (armed && argv.size() > 1 && argv[0] == "EVALSHA") {
        if (argv[1] == scripts::read_write_lock_read_acquire.sha1) ++reads;
        if (argv[1] == scripts::read_write_lock_write_acquire.sha1) ++writes;
      }
      return sim::FakeBackend::RequestFate{};
    });
  }
  ~TryCounter() { link_.set_request_filter(nullptr); }
  TryCounter(const TryCounter&) = delete;
  TryCounter& operator=(const TryCounter&) = delete;

  bool armed = false;
  int reads = 0;
  int writes = 0;

 private:
  sim::FakeBackend& link_;
};

// A world of simulated processes, each with one Client and a TryCounter.
class ReadWriteWakeupTest : public ::testing::Test {
 protected:
  ReadWriteWakeupTest() : world_(kSeed) {}
  ~ReadWriteWakeupTest() override {
    counters_.clear();
    clients_.clear();  // before the world
  }

  std::size_t add_process(const std::string& name) {
    sim::SimClient& simulated = world_.add_client(name);
    processes_.push_back(&simulated);
    clients_.push_back(std::make_unique<Client>(simulated.backend_ptr(), simulated.runtime_ptr(), fleet_options()));
    counters_.push_back(std::make_unique<TryCounter>(simulated.link()));
    return processes_.size() - 1;
  }
  Client& client(std::size_t p) { return *clients_.at(p); }
  Runtime& runtime(std::size_t p) { return processes_.at(p)->runtime(); }
  Duration since_start() const { return world_.now() - Instant{}; }
  void arm() {
    for (const auto& counter : counters_) counter->armed = true;
  }
  int reads() const {
    int total = 0;
    for (const auto& counter : counters_) total += counter->reads;
    return total;
  }
  int writes() const {
    int total = 0;
    for (const auto& counter : counters_) total += counter->writes;
    return total;
  }

  // A task of process `p` that starts at `start`, takes the `write` or
  // read half, notes when it got in (in `order` too), holds `hold` and
  // releases.
  void spawn_waiter(std::size_t p, bool write, Duration start, Duration hold, std::vector<std::string>* order,
                    const std::string& label) {
    world_.spawn(*processes_.at(p), [=, this] {
      runtime(p).sleep_for(start);
      ReadWriteLock lock = client(p).read_write_lock(kName);
      Lock& half = write ? static_cast<Lock&>(lock.write()) : static_cast<Lock&>(lock.read());
      half.lock();
      acquired_at_[label] = since_start();
      if (order != nullptr) order->push_back(label);
      inside_ += 1;
      most_inside_ = std::max(most_inside_, inside_);
      runtime(p).sleep_for(hold);
      inside_ -= 1;
      half.unlock();
    });
  }

  // Process `p` holds the write half from 0 to `release_at` (arming the
  // counters just before its release).
  void spawn_writer_until(std::size_t p, Duration release_at) {
    world_.spawn(*processes_.at(p), [=, this] {
      ReadWriteLock lock = client(p).read_write_lock(kName);
      lock.write().lock();
      runtime(p).sleep_for(release_at);
      arm();
      lock.write().unlock();
    });
  }

  sim::World world_;
  std::vector<sim::SimClient*> processes_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::vector<std::unique_ptr<TryCounter>> counters_;
  std::map<std::string, Duration> acquired_at_;
  int inside_ = 0;
  int most_inside_ = 0;
};

TEST_F(ReadWriteWakeupTest, AWriteReleaseLetsEveryWaitingReaderOfTheFleetInWithOneTryEach) {
  const std::size_t holder = add_process("holder");
  spawn_writer_until(holder, seconds(1));
  constexpr int kReaders = 8;
  for (int i = 0; i < kReaders; ++i) {
    const std::size_t p = add_process("reader-" + std::to_string(i));
    spawn_waiter(p, /*write=*/false, milliseconds(i + 1), milliseconds(200), nullptr, "r" + std::to_string(i));
  }
  world_.run_until_idle();
  ASSERT_EQ(acquired_at_.size(), static_cast<std::size_t>(kReaders));
  for (const auto& [label, at] : acquired_at_) {
    EXPECT_GE(at, seconds(1)) << label;
    EXPECT_LT(at, seconds(1) + kPromptHandoff) << label;
  }
  EXPECT_EQ(most_inside_, kReaders) << "the readers are inside together";
  EXPECT_EQ(reads(), kReaders) << "one try per reader after the release";
  EXPECT_EQ(writes(), 0);
}

TEST_F(ReadWriteWakeupTest, AReadReleaseWakesAWriterOnlyWhenTheLastReaderLeaves) {
  const std::size_t first = add_process("first-reader");
  const std::size_t second = add_process("second-reader");
  const std::size_t writer = add_process("writer");
  world_.spawn(*processes_[first], [&] {
    ReadWriteLock lock = client(first).read_write_lock(kName);
    lock.read().lock();
    runtime(first).sleep_for(seconds(1));
    arm();
    lock.read().unlock();
  });
  world_.spawn(*processes_[second], [&] {
    ReadWriteLock lock = client(second).read_write_lock(kName);
    lock.read().lock();
    runtime(second).sleep_for(milliseconds(1500));
    lock.read().unlock();
  });
  spawn_waiter(writer, /*write=*/true, milliseconds(10), milliseconds(10), nullptr, "writer");
  world_.run_until_idle();
  ASSERT_TRUE(acquired_at_.contains("writer"));
  EXPECT_GE(acquired_at_["writer"], milliseconds(1500));
  EXPECT_LT(acquired_at_["writer"], milliseconds(1500) + kPromptHandoff);
  EXPECT_EQ(writes(), 1) << "the first reader's release woke nobody; the last one's, the writer";
}

// Policy: a release that frees the lock serves the longest-registered
// waiting process, a writer's (one writer) or a reader's (every reader).
TEST_F(ReadWriteWakeupTest, AWriterThatWaitedLongerThanTheReadersIsServedFirst) {
  const std::size_t holder = add_process("holder");
  const std::size_t writer = add_process("writer");
  const std::size_t readers = add_process("readers");
  const std::size_t more_readers = add_process("more-readers");
  std::vector<std::string> order;
  spawn_writer_until(holder, seconds(1));
  spawn_waiter(writer, /*write=*/true, milliseconds(1), milliseconds(100), &order, "writer");
  spawn_waiter(readers, /*write=*/false, milliseconds(2), milliseconds(100), &order, "reader-1");
  spawn_waiter(more_readers, /*write=*/false, milliseconds(3), milliseconds(100), &order, "reader-2");
  world_.run_until_idle();
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0], "writer");
  EXPECT_LT(acquired_at_["writer"], seconds(1) + kPromptHandoff);
  // The writer's release lets both readers in at once.
  EXPECT_LT(acquired_at_["reader-1"], seconds(1) + milliseconds(100) + kPromptHandoff);
  EXPECT_LT(acquired_at_["reader-2"], seconds(1) + milliseconds(100) + kPromptHandoff);
}

TEST_F(ReadWriteWakeupTest, ReadersThatWaitedLongerThanAWriterAreServedFirst) {
  const std::size_t holder = add_process("holder");
  const std::size_t readers = add_process("readers");
  const std::size_t more_readers = add_process("more-readers");
  const std::size_t writer = add_process("writer");
  std::vector<std::string> order;
  spawn_writer_until(holder, seconds(1));
  spawn_waiter(readers, /*write=*/false, milliseconds(1), milliseconds(100), &order, "reader-1");
  spawn_waiter(more_readers, /*write=*/false, milliseconds(2), milliseconds(100), &order, "reader-2");
  spawn_waiter(writer, /*write=*/true, milliseconds(3), milliseconds(100), &order, "writer");
  world_.run_until_idle();
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[2], "writer");
  EXPECT_LT(acquired_at_["reader-1"], seconds(1) + kPromptHandoff);
  EXPECT_LT(acquired_at_["reader-2"], seconds(1) + kPromptHandoff);
  EXPECT_EQ(most_inside_, 2);
  // The last reader's release wakes the writer.
  EXPECT_LT(acquired_at_["writer"], seconds(1) + milliseconds(100) + kPromptHandoff);
}

TEST_F(ReadWriteWakeupTest, ADowngradeLetsTheWaitingReadersIn) {
  const std::size_t holder = add_process("holder");
  const std::size_t readers = add_process("readers");
  const std::size_t more_readers = add_process("more-readers");
  bool holder_reads = false;
  world_.spawn(*processes_[holder], [&] {
    ReadWriteLock lock = client(holder).read_write_lock(kName);
    lock.write().lock();
    lock.read().lock();
    runtime(holder).sleep_for(seconds(1));
    lock.write().unlock();  // now only a reader
    holder_reads = true;
    runtime(holder).sleep_for(seconds(2));
    holder_reads = false;
    lock.read().unlock();
  });
  int readers_beside_holder = 0;
  for (const std::size_t p : {readers, more_readers}) {
    world_.spawn(*processes_[p], [&, p] {
      runtime(p).sleep_for(milliseconds(5));
      ReadWriteLock lock = client(p).read_write_lock(kName);
      lock.read().lock();
      EXPECT_LT(since_start(), seconds(1) + kPromptHandoff);
      if (holder_reads) ++readers_beside_holder;
      lock.read().unlock();
    });
  }
  world_.run_until_idle();
  EXPECT_EQ(readers_beside_holder, 2);
}

// Nobody announces the release (the lock deleted behind the library's
// back): the waiters are not woken, and try again when the lease they were
// told runs out.
TEST_F(ReadWriteWakeupTest, AWakeUpNobodySentIsMadeUpForByTheRetryTimer) {
  const std::size_t holder = add_process("holder");
  const std::size_t writer = add_process("writer");
  const std::size_t reader = add_process("reader");
  world_.spawn(*processes_[holder], [&] {
    ReadWriteLock lock = client(holder).read_write_lock(kName);
    ASSERT_TRUE(lock.write().try_lock({.wait = {}, .lease = seconds(2), .stop = {}}));
    runtime(holder).sleep_for(seconds(1));
    (void)processes_[holder]->backend().command({"DEL", kName});
  });
  std::optional<Duration> writer_at;
  std::optional<Duration> reader_at;
  world_.spawn(*processes_[writer], [&] {
    runtime(writer).sleep_for(milliseconds(5));
    ReadWriteLock lock = client(writer).read_write_lock(kName);
    ASSERT_TRUE(lock.write().try_lock({.wait = seconds(10), .lease = seconds(1), .stop = {}}));
    writer_at = since_start();
    lock.write().unlock();
  });
  world_.spawn(*processes_[reader], [&] {
    runtime(reader).sleep_for(milliseconds(6));
    ReadWriteLock lock = client(reader).read_write_lock(kName);
    ASSERT_TRUE(lock.read().try_lock({.wait = seconds(10), .lease = seconds(1), .stop = {}}));
    reader_at = since_start();
    lock.read().unlock();
  });
  world_.run_until_idle();
  ASSERT_TRUE(writer_at && reader_at);
  // The first of them retries at 2 s (the lease it was told), not at 1 s.
  EXPECT_GE(std::min(*writer_at, *reader_at), milliseconds(1900));
  EXPECT_LT(std::max(*writer_at, *reader_at), seconds(2) + kPromptHandoff);
}

// ---- the property -------------------------------------------------------

constexpr std::uint64_t kFirstSeed = 1;
constexpr std::uint64_t kSeeds = 16;
constexpr int kProcesses = 3;
constexpr int kTasksPerProcess = 4;
constexpr int kRounds = 15;
constexpr std::int64_t kMaxDelayUs = 3'000;
constexpr std::int64_t kMaxHoldMs = 20;
constexpr std::int64_t kLongHoldMs = 300;
constexpr std::int64_t kMaxPauseMs = 600;
constexpr milliseconds kMonitorPeriod{2};
// A handoff: a release, a message and a try, a few delays of kMaxDelayUs
// each, and one more try if another process's waiter won. Longer is a
// waiter that missed its wake-up.
constexpr milliseconds kMaxHandoff{100};

struct MixState {
  int readers = 0;
  int writers = 0;
  std::map<int, bool> waiting;  // task -> wants to write
  Duration longest_stranded{};
  int rounds_done = 0;
  int finished = 0;
  std::optional<std::string> violation;

  void check_exclusion() {
    if (writers > 1 || (writers == 1 && readers > 0)) violation = "a writer was not alone";
  }
  // Some waiter could have the lock now.
  bool could_have_it() const {
    return std::any_of(waiting.begin(), waiting.end(),
                       [this](const auto& entry) { return writers == 0 && (!entry.second || readers == 0); });
  }
};

void run_mix_world(std::uint64_t seed) {
  sim::Random rng(seed, /*stream=*/33);
  MixState state;
  sim::World world(seed);
  std::vector<sim::SimClient*> processes;
  for (int p = 0; p < kProcesses; ++p) processes.push_back(&world.add_client("process-" + std::to_string(p)));
  sim::SimClient& monitor = world.add_client("monitor");
  delay_links_at_random(processes, rng, kMaxDelayUs);
  std::vector<std::unique_ptr<Client>> clients;  // destroyed before the world
  for (sim::SimClient* process : processes) {
    clients.push_back(std::make_unique<Client>(process->backend_ptr(), process->runtime_ptr(), fleet_options()));
  }
  for (int p = 0; p < kProcesses; ++p) {
    for (int t = 0; t < kTasksPerProcess; ++t) {
      const int task = p * kTasksPerProcess + t;
      world.spawn(*processes[p], [&, p, task] {
        Runtime& runtime = processes[p]->runtime();
        runtime.sleep_for(milliseconds(1 + below(rng, 10)));
        for (int round = 0; round < kRounds; ++round) {
          ReadWriteLock lock = clients[p]->read_write_lock(kName);
          // One writer in three.
          const bool write = below(rng, 3) == 0;
          Lock& half = write ? static_cast<Lock&>(lock.write()) : static_cast<Lock&>(lock.read());
          state.waiting[task] = write;
          half.lock();
          state.waiting.erase(task);
          (write ? state.writers : state.readers) += 1;
          state.check_exclusion();
          const bool long_hold = below(rng, 5) == 0;
          runtime.sleep_for(milliseconds(long_hold ? kLongHoldMs : below(rng, kMaxHoldMs)));
          (write ? state.writers : state.readers) -= 1;
          half.unlock();
          ++state.rounds_done;
          runtime.sleep_for(milliseconds(below(rng, kMaxPauseMs)));
        }
        ++state.finished;
      });
    }
  }
  world.spawn(monitor, [&] {
    Runtime& runtime = monitor.runtime();
    Duration stranded{};
    while (state.finished < kProcesses * kTasksPerProcess && !state.violation) {
      runtime.sleep_for(kMonitorPeriod);
      stranded = state.could_have_it() ? stranded + kMonitorPeriod : Duration{};
      state.longest_stranded = std::max(state.longest_stranded, stranded);
      if (stranded > kMaxHandoff) {
        state.violation = "a waiter was left waiting while it could have the lock, at " +
                          std::to_string(std::chrono::duration_cast<milliseconds>(runtime.now() - Instant{}).count()) +
                          " ms";
      }
    }
  });
  world.run_for(std::chrono::minutes(10));
  for (sim::SimClient* process : processes) process->link().set_request_filter(nullptr);
  EXPECT_FALSE(state.violation) << *state.violation;
  EXPECT_EQ(state.finished, kProcesses * kTasksPerProcess);
  EXPECT_EQ(state.rounds_done, kProcesses * kTasksPerProcess * kRounds);
  clients.clear();
}

TEST(ReadWriteWakeupPropertyTest, ReadersAndWritersOfThreeProcessesNeitherOverlapNorStrand) {
  for (std::uint64_t seed = kFirstSeed; seed < kFirstSeed + kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    run_mix_world(seed);
    if (HasFailure()) break;
  }
}

}  // namespace
}  // namespace turnstile::testing
