// What an acquisition costs Redis, counted on the fake in simulated worlds
// (virtual time, exact schedules: the figures are the same at every run),
// so that a herd or a whole-queue script coming back fails here (issue #33):
//
//   * the read-write lock's write half, 64 tasks of one process: script
//     calls per acquisition (a write release publishes Redisson's "1",
//     which used to wake every local waiter);
//   * the reentrant and token locks, 8 processes x 16 tasks on one key:
//     script calls per acquisition (each process with a waiter used to
//     wake one per release; fleet-wide wake-ups wake one of the fleet);
//   * the fair lock, from 1 to 1,000 queued waiters: the script work per
//     call (commands run inside the scripts, their arguments and reply
//     elements) stays flat, keep-alives included; behind a long hold, the
//     keep-alives of the waiters behind the first two are rarer;
//   * every flavor with a wake registry across processes: pub/sub
//     messages delivered per acquisition (about one: a fleet of turnstile
//     holders is not told on the shared channel too), and the token lock's
//     commands run in scripts per acquisition (what made its contended
//     acquisitions cost Redis the most CPU next to its uncontended one);
//   * the fair lock's handoff, 8 processes x 4 tasks: direct handoff (the
//     release grants the head, the message carries it) saves the woken
//     waiter's acquisition call that announce-then-acquire makes;
//   * the reentrant lock's direct handoff to registered processes, 8
//     processes x 1 task (<= 3.3 calls per acquisition) and x 2 tasks (the
//     woken waiter's call saved); the crash-safe semaphore's alike;
//   * the counting semaphore, 8 processes x 1 task on one permit with no
//     hold: a process's own release, heard on the shared channel during
//     its next try, does not wake it for a second one (issue #52).
//
// Each test prints a "script-cost:" line with its figures. Before this
// test (main at 1a0e437), they were: write half 25.88 calls per
// acquisition, the 1:3 mix 3.70, the fleet 6.37, the fair queue 42.3 words
// per call at 1 waiter and 2,496 at 1,000. Fleet-wide wake-ups brought the
// fleet to 3.04 (reentrant; 37.4 script words per call).

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fake_redis/server.h"
#include "sim/fake_backend.h"
#include "turnstile/client.h"
#include "turnstile/fair_lock.h"
#include "turnstile/lock.h"
#include "turnstile/read_write_lock.h"
#include "turnstile/semaphore.h"
#include "turnstile/sim/world.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::uint64_t kSeed = 20261126;
// Script calls per acquisition at 8 processes x 16 tasks: issue #33's goal
// (6.37 before fleet-wide wake-ups, 3.04 with them).
constexpr double kFleetHerdScripts = 3.3;
// The read-write lock's write half at 8 processes x 16 tasks: issue #33's
// goal (6.37 before the read-write lock joined the wake registry, when a
// write release woke one writer in each process with a waiter).
constexpr double kReadWriteAcrossProcessesScripts = 3.5;
// Pub/sub messages delivered to the processes per acquisition, every
// flavor with a wake registry, across processes: about one, on the woken
// (or granted) process's own channel. While every process with a waiter
// subscribed the shared channel too, each release's "0" there reached
// them all, to be ignored: 7.23 (token), 8.45 (reentrant, 8 x 16), 7.42
// (reentrant, 8 x 1), 6.83 (both semaphores), 7.23 (read-write). The token
// lock's waiters never subscribe it; the others only while their latest
// try found a holder that may be foreign (WakeupHub, wakeup_hub.h).
constexpr double kFleetHerdMessages = 1.1;
// The semaphores' waiting processes keep the shared channel: a foreign
// client may release permits nobody was seen to take (Redisson's
// RSemaphore.release()), told only there. Each release's signed count
// ("+2", turnstile's own) reaches each of the 8 processes with a waiter,
// which ignores it (no try: kFleetHerdScripts holds); about one more
// message wakes the registered process: 6.83 to 8.50 measured.
constexpr double kSemaphoreFleetMessages = 8 + kFleetHerdMessages;
// The token lock at 8 processes x 16 tasks, per acquisition: commands its
// scripts run (20.05 while a failed try read the key's type, value and
// pttl apart and its first try read value and pttl again for the shape;
// 18.02 since).
constexpr double kTokenHerdScriptCommands = 18.5;
// Script calls per acquisition of 100 fair waiters queued behind a 2 min
// hold: 74.4 while every waiter kept alive every third of the waiter
// timeout; 14.3 since only the first two do (the others a third of eight).
constexpr double kFairLongHoldScripts = 16;
// Script calls per acquisition a fair lock's direct handoff saves at 8
// processes x 4 tasks (nearly every acquisition is a handoff).
constexpr double kDirectHandoffSaving = 0.8;
// Script calls per acquisition the reentrant lock's direct handoff saves at
// 8 processes x 2 tasks (3.02 announced, 2.62 granted when it came: a
// process offers for its oldest waiting task only).
constexpr double kFleetHandoffSaving = 0.3;
// Free-for-all with one permit and no hold: the releaser's next try and the
// woken process's try, one of them failing, and the release: 3 calls per
// acquisition (2.94 here; 3.13 when a process's own release's message
// woke it again, 3.46 on redis-server).
constexpr double kFleetBargingScripts = 3.05;
// A request's and a reply's way over loopback, and a pub/sub message's
// (later than the publishing call's reply: the subscriber connection is
// read by a thread of its own), so that a process's own release's message
// comes in while its next try is on its way.
constexpr Duration kOneWay = std::chrono::microseconds(20);
constexpr Duration kLateMessage = std::chrono::microseconds(30);

// The acquisitions' own calls: no wipe check (a background call per second
// per Client while it holds anything, ClientOptions::wipe_check_period),
// which would count against whichever acquisition's window it fell in.
ClientOptions quiet_options() {
  ClientOptions options{.lease = seconds(30),
                        .key_prefix = "",
                        .on_background_error = [](std::exception_ptr) {},
                        .wake_scope = WakeScope::fleet};
  options.wipe_check_period = Duration::zero();
  return options;
}

// A world of `processes` simulated processes, each with one Client.
class CostWorld {
 public:
  explicit CostWorld(std::size_t processes, const ClientOptions& options = quiet_options()) : world_(kSeed) {
    for (std::size_t i = 0; i < processes; ++i) {
      sim::SimClient& simulated = world_.add_client("process-" + std::to_string(i));
      processes_.push_back(&simulated);
      clients_.push_back(std::make_unique<Client>(simulated.backend_ptr(), simulated.runtime_ptr(), options));
    }
  }
  ~CostWorld() { clients_.clear(); }  // before the world
  CostWorld(const CostWorld&) = delete;
  CostWorld& operator=(const CostWorld&) = delete;

  std::size_t size() const { return clients_.size(); }
  Client& client(std::size_t i) { return *clients_.at(i); }
  sim::SimClient& process(std::size_t i) { return *processes_.at(i); }
  sim::World& world() { return world_; }
  const sim::Server::WorkCounters& work() { return world_.server(0).work(); }

 private:
  sim::World world_;
  std::vector<sim::SimClient*> processes_;
  std::vector<std::unique_ptr<Client>> clients_;
};

struct Figures {
  std::uint64_t scripts = 0;
  std::uint64_t script_words = 0;
  std::uint64_t script_commands = 0;  // redis.call / redis.pcall
  std::uint64_t messages = 0;         // pub/sub messages delivered to the processes
  int acquisitions = 0;
  Duration elapsed{};  // virtual time until the last acquisition was released

  double scripts_per_acquisition() const { return static_cast<double>(scripts) / acquisitions; }
  double words_per_script() const { return static_cast<double>(script_words) / static_cast<double>(scripts); }
  double script_commands_per_acquisition() const { return static_cast<double>(script_commands) / acquisitions; }
  double messages_per_acquisition() const { return static_cast<double>(messages) / acquisitions; }
};

// `tasks` tasks spread over the processes of `world`, each acquiring
// `rounds` times through `acquire_release` (which holds 1 ms); every task
// starts within the first 64 ms. Returns the server's work for the run.
Figures contend(CostWorld& world, int tasks, int rounds,
                const std::function<void(Client&, sim::SimClient&, int task)>& acquire_release) {
  Figures figures;
  for (int task = 0; task < tasks; ++task) {
    const std::size_t p = static_cast<std::size_t>(task) % world.size();
    world.world().spawn(world.process(p), [&, task, p] {
      world.process(p).runtime().sleep_for(milliseconds(task % 64));
      for (int round = 0; round < rounds; ++round) {
        acquire_release(world.client(p), world.process(p), task);
        ++figures.acquisitions;
        figures.elapsed = std::max(figures.elapsed, world.world().now() - Instant{});
      }
    });
  }
  const sim::RunStats stats = world.world().run_until_idle();
  EXPECT_EQ(stats.stuck_tasks, 0u);
  EXPECT_EQ(figures.acquisitions, tasks * rounds);
  figures.scripts = world.work().scripts;
  figures.script_words = world.work().script_words;
  figures.script_commands = world.work().script_commands;
  for (std::size_t p = 0; p < world.size(); ++p) figures.messages += world.process(p).link().messages_delivered();
  return figures;
}

// No waiter slept until a holder's lease ran out (30 s): every handoff was
// a wake-up.
constexpr Duration kNoLeaseSleptOut = seconds(5);

void print(const std::string& what, const Figures& figures) {
  std::printf(
      "script-cost: %s: %d acquisitions, %.2f script calls each, %.1f script words per call, %.2f commands in "
      "scripts and %.2f messages delivered per acquisition, %lld ms\n",
      what.c_str(), figures.acquisitions, figures.scripts_per_acquisition(), figures.words_per_script(),
      figures.script_commands_per_acquisition(), figures.messages_per_acquisition(),
      static_cast<long long>(std::chrono::duration_cast<milliseconds>(figures.elapsed).count()));
}

// The write half of a read-write lock, 64 tasks of one process: a write
// release publishes "1" (Redisson's "readers come in together"), which
// woke all 63 waiters of the process (29 calls per acquisition measured on
// redis-server). It wakes one writer now: the goal is <= 3.5.
// `tasks` writers over `processes` on the write half of `name`, `rounds`
// acquisitions each.
Figures write_half_contention(std::size_t processes, int tasks, int rounds, const std::string& name) {
  CostWorld world(processes);
  return contend(world, tasks, rounds, [&name](Client& client, sim::SimClient& process, int) {
    ReadWriteLock both = client.read_write_lock(name);
    WriteLock& lock = both.write();
    lock.lock();
    process.runtime().sleep_for(milliseconds(1));
    lock.unlock();
  });
}

TEST(ScriptCostTest, ReadWriteWriteHalfOneProcessOf64Tasks) {
  const Figures figures = write_half_contention(1, 64, 4, "rw-herd");
  print("read-write, write half, 1 process x 64 tasks", figures);
  EXPECT_LE(figures.scripts_per_acquisition(), 3.5);
  EXPECT_LT(figures.elapsed, kNoLeaseSleptOut);
}

// Readers and writers of one process: a reader that gets in wakes the
// other sleeping readers, a writer one at a time.
TEST(ScriptCostTest, ReadWriteMixOneProcessOf64Tasks) {
  CostWorld world(1);
  const Figures figures = contend(world, 64, 4, [](Client& client, sim::SimClient& process, int task) {
    ReadWriteLock lock = client.read_write_lock("rw-mix");
    Lock& half = task % 4 == 0 ? static_cast<Lock&>(lock.write()) : static_cast<Lock&>(lock.read());
    half.lock();
    process.runtime().sleep_for(milliseconds(1));
    half.unlock();
  });
  print("read-write, 1 writer : 3 readers, 1 process x 64 tasks", figures);
  EXPECT_LE(figures.scripts_per_acquisition(), 3.5);
  EXPECT_LT(figures.elapsed, kNoLeaseSleptOut);
}

// The herd across processes: when every unlock woke one waiter in each
// process with a waiter, P processes ran about P - 1 failed tries per
// release. A release wakes one registered process of the fleet now
// (lua/lib/wake_registry.lua): an acquire, a release and about one failed
// try (the arrival's) per acquisition. `make_lock` makes the lock a task
// acquires twice.
Figures expect_no_fleet_herd(const std::string& what, const std::function<std::unique_ptr<Lock>(Client&)>& make_lock) {
  CostWorld world(8);
  const Figures figures = contend(world, 128, 2, [&](Client& client, sim::SimClient& process, int) {
    const std::unique_ptr<Lock> lock = make_lock(client);
    lock->lock();
    process.runtime().sleep_for(milliseconds(1));
    lock->unlock();
  });
  print(what + ", 8 processes x 16 tasks", figures);
  EXPECT_LE(figures.scripts_per_acquisition(), kFleetHerdScripts);
  EXPECT_LE(figures.messages_per_acquisition(), kFleetHerdMessages);
  EXPECT_LT(figures.elapsed, kNoLeaseSleptOut);
  return figures;
}

TEST(ScriptCostTest, ReentrantEightProcessesOf16Tasks) {
  expect_no_fleet_herd("reentrant",
                       [](Client& client) { return std::make_unique<ReentrantLock>(client.lock("herd-fleet")); });
}

// The reentrant lock's direct handoff (ClientOptions::fleet_handoff): a
// release grants the lock to the oldest registered process's offer, whose
// task takes it from the message without a call. At 8 processes x 1 task,
// issue #33's shape where barging showed (3.32 calls per acquisition on
// redis-server while a woken waiter acquired with a call of its own, the
// releaser's next try beating it about 1 time in 3): on the fake, whose
// subscriptions do not linger after a wait, each arrival pays two failed
// tries (before and after subscribing), so the figure is an arrival's two
// tries and the release: <= 3.3. At 8 processes x 2 tasks (the process
// keeps its subscription) the woken waiter's call is saved.
Figures reentrant_handoff(Handoff handoff, int tasks) {
  ClientOptions options = quiet_options();
  options.fleet_handoff = handoff;
  CostWorld world(8, options);
  return contend(world, tasks, 128 / tasks, [](Client& client, sim::SimClient& process, int) {
    ReentrantLock lock = client.lock("handoff-fleet");
    lock.lock();
    process.runtime().sleep_for(milliseconds(1));
    lock.unlock();
  });
}

TEST(ScriptCostTest, ReentrantDirectHandoffEightProcessesOfOneTask) {
  const Figures direct = reentrant_handoff(Handoff::direct, 8);
  print("reentrant, direct, 8 processes x 1 task", direct);
  EXPECT_LE(direct.scripts_per_acquisition(), kFleetHerdScripts);
  EXPECT_LE(direct.messages_per_acquisition(), kFleetHerdMessages);
  EXPECT_LT(direct.elapsed, kNoLeaseSleptOut);
}

// At 8 processes x 2 tasks, `handoff_run`'s direct handoff saves the woken
// waiter's call that announce-then-acquire makes.
void expect_direct_handoff_saves_a_call(const std::string& what,
                                        const std::function<Figures(Handoff, int)>& handoff_run) {
  const Figures announce = handoff_run(Handoff::announce, 16);
  const Figures direct = handoff_run(Handoff::direct, 16);
  print(what + ", announce, 8 processes x 2 tasks", announce);
  print(what + ", direct, 8 processes x 2 tasks", direct);
  EXPECT_LE(direct.scripts_per_acquisition(), announce.scripts_per_acquisition() - kFleetHandoffSaving);
  EXPECT_LT(direct.elapsed, kNoLeaseSleptOut);
}

TEST(ScriptCostTest, ReentrantDirectHandoffSavesTheWokenWaitersCall) {
  expect_direct_handoff_saves_a_call("reentrant", reentrant_handoff);
}

// The token lock's contended acquisitions cost Redis more, next to its
// cheap uncontended one (SET NX), than any other flavor's (issue #33: 2.1x
// its uncontended Redis CPU, the goal <= 2x). Most of it was pub/sub:
// every release's "0" on the shared channel went to each of the 8
// processes, subscribed although a token lock's try never heeds it (every
// holder's release wakes a registered process): 7.23 messages delivered
// per acquisition. Now its waiters hear their own channel only: one
// message per handoff.
TEST(ScriptCostTest, TokenEightProcessesOf16Tasks) {
  const Figures figures = expect_no_fleet_herd(
      "token", [](Client& client) { return std::make_unique<TokenLock>(client.token_lock("herd-fleet-token")); });
  EXPECT_LE(figures.script_commands_per_acquisition(), kTokenHerdScriptCommands);
}

// The semaphores, 8 processes x 16 tasks on 2 permits: a release of one
// permit wakes one registered process of the fleet (wake_for_permits in
// lua/lib/wake_registry.lua), not one waiter in every process with one.
// `acquire_release` takes one permit, holds it 1 ms and gives it back;
// `tasks` tasks (16 per process, or 1) acquire 256 times in all.
Figures semaphore_contention(const std::function<void(Client&, sim::SimClient&)>& acquire_release,
                             const std::function<void(Client&)>& set_two_permits, int tasks,
                             const ClientOptions& options = quiet_options()) {
  CostWorld world(8, options);
  world.world().spawn(world.process(0), [&] { set_two_permits(world.client(0)); });
  (void)world.world().run_until_idle();
  const std::uint64_t setup_scripts = world.work().scripts;
  Figures figures = contend(world, tasks, 256 / tasks,
                            [&](Client& client, sim::SimClient& process, int) { acquire_release(client, process); });
  figures.scripts -= setup_scripts;
  return figures;
}

void expect_no_semaphore_herd(const std::string& what,
                              const std::function<void(Client&, sim::SimClient&)>& acquire_release,
                              const std::function<void(Client&)>& set_two_permits, int tasks = 128) {
  const Figures figures = semaphore_contention(acquire_release, set_two_permits, tasks);
  print(what + ", 2 permits, 8 processes x " + std::to_string(tasks / 8) + " tasks", figures);
  EXPECT_LE(figures.scripts_per_acquisition(), kFleetHerdScripts);
  EXPECT_LE(figures.messages_per_acquisition(), kSemaphoreFleetMessages);
  EXPECT_LT(figures.elapsed, kNoLeaseSleptOut);
}

TEST(ScriptCostTest, CountingSemaphoreEightProcessesOf16Tasks) {
  expect_no_semaphore_herd(
      "counting semaphore",
      [](Client& client, sim::SimClient& process) {
        CountingSemaphore semaphore = client.counting_semaphore("herd-counting");
        semaphore.acquire();
        process.runtime().sleep_for(milliseconds(1));
        semaphore.release();
      },
      [](Client& client) { ASSERT_TRUE(client.counting_semaphore("herd-counting").try_set_permits(2)); });
}

// 8 processes x 1 task on one permit, no hold (issue #33's shape where the
// counting semaphore showed 3.46 calls per acquisition on redis-server, 3.02
// at 8 x 16): each process's next acquisition, its channels still
// subscribed (lingering), heard its own release's count on the shared
// channel during its first try (messages arrive later than replies here,
// as they did there), and tried a second time when that try failed. A
// semaphore's signed count wakes nobody now (WakeupHub), from a queue's
// first try on: the release woke a registered process on its own channel.
TEST(ScriptCostTest, CountingSemaphoreEightProcessesOfOneTaskWithoutHold) {
  CostWorld world(8);
  for (std::size_t p = 0; p < world.size(); ++p) {
    sim::FakeBackend& link = world.process(p).link();
    link.set_request_filter([](const std::vector<std::string>&) {
      return sim::FakeBackend::RequestFate{.extra_request_delay = kOneWay, .extra_reply_delay = kOneWay};
    });
    link.set_pubsub_delay(kLateMessage);
  }
  world.world().spawn(world.process(0),
                      [&] { ASSERT_TRUE(world.client(0).counting_semaphore("herd-counting").try_set_permits(1)); });
  (void)world.world().run_until_idle();
  const std::uint64_t setup_scripts = world.work().scripts;
  Figures figures = contend(world, 8, 128, [](Client& client, sim::SimClient&, int) {
    CountingSemaphore semaphore = client.counting_semaphore("herd-counting");
    semaphore.acquire();
    semaphore.release();
  });
  figures.scripts -= setup_scripts;
  print("counting semaphore, 1 permit, no hold, 8 processes x 1 task", figures);
  EXPECT_LE(figures.scripts_per_acquisition(), kFleetBargingScripts);
  EXPECT_LT(figures.elapsed, kNoLeaseSleptOut);
}

void permit_acquire_release(Client& client, sim::SimClient& process) {
  PermitSemaphore semaphore = client.permit_semaphore("herd-permits");
  const PermitId permit = semaphore.acquire();
  process.runtime().sleep_for(milliseconds(1));
  semaphore.release(permit);
}

void set_two_permits(Client& client) { ASSERT_TRUE(client.permit_semaphore("herd-permits").try_set_permits(2)); }

TEST(ScriptCostTest, PermitSemaphoreEightProcessesOf16Tasks) {
  expect_no_semaphore_herd("crash-safe semaphore", permit_acquire_release, set_two_permits);
}

// 8 processes x 1 task (issue #33's shape where barging showed: 3.37 on
// redis-server while announced; 2.00 with direct handoff, the default).
TEST(ScriptCostTest, PermitSemaphoreEightProcessesOfOneTask) {
  expect_no_semaphore_herd("crash-safe semaphore", permit_acquire_release, set_two_permits, 8);
}

// The crash-safe semaphore's direct handoff (ClientOptions::permit_handoff):
// a release grants its permit to the oldest registered process's offer,
// whose task takes it from the message without a call. As for the
// reentrant rows: at 8 x 1 the fake's subscriptions end with each wait, so
// the figure is an arrival's two tries and the release; at 8 x 2 the woken
// waiter's call is saved.
Figures permit_handoff(Handoff handoff, int tasks) {
  ClientOptions options = quiet_options();
  options.permit_handoff = handoff;
  return semaphore_contention(permit_acquire_release, set_two_permits, tasks, options);
}

TEST(ScriptCostTest, PermitSemaphoreDirectHandoffEightProcessesOfOneTask) {
  const Figures direct = permit_handoff(Handoff::direct, 8);
  print("crash-safe semaphore, direct, 2 permits, 8 processes x 1 task", direct);
  EXPECT_LE(direct.scripts_per_acquisition(), kFleetHerdScripts);
  EXPECT_LT(direct.elapsed, kNoLeaseSleptOut);
}

TEST(ScriptCostTest, PermitSemaphoreDirectHandoffSavesTheWokenWaitersCall) {
  expect_direct_handoff_saves_a_call("crash-safe semaphore, 2 permits", permit_handoff);
}

// The write half across processes, 8 x 16 writers: a write release
// publishes Redisson's "1" on the lock's one channel, which every process
// with a waiter used to hear (6.37 calls per acquisition, a herd of about
// one failed try per process). It wakes one registered process of the
// fleet now, on its own channel (lua/lib/read_write_wake.lua).
TEST(ScriptCostTest, ReadWriteWriteHalfEightProcessesOf16Tasks) {
  const Figures figures = write_half_contention(8, 128, 2, "rw-herd-fleet");
  print("read-write, write half, 8 processes x 16 tasks", figures);
  EXPECT_LE(figures.scripts_per_acquisition(), kReadWriteAcrossProcessesScripts);
  EXPECT_LE(figures.messages_per_acquisition(), kFleetHerdMessages);
  EXPECT_LT(figures.elapsed, kNoLeaseSleptOut);
}

// Script calls per acquisition of 16 tasks of one process looping over
// fair-lock holds: 3.00 while each hold subscribed a new wait channel.
constexpr double kFairLoopScripts = 2.2;

// The fair lock with `waiters` queued behind a holder for `hold` (the
// first two retry each 1.7 s to keep their place, the others each 13.3 s),
// then served one by one.
Figures fair_queue(int waiters, Duration hold = seconds(6)) {
  CostWorld world(10);
  const FairLockOptions options{.waiter_timeout = seconds(5)};
  Figures figures;
  world.world().spawn(world.process(0), [&] {
    FairLock lock = world.client(0).fair_lock("fair-cost", options);
    lock.lock();
    world.process(0).runtime().sleep_for(hold);
    lock.unlock();
    ++figures.acquisitions;
  });
  for (int task = 0; task < waiters; ++task) {
    const std::size_t p = static_cast<std::size_t>(task) % world.size();
    world.world().spawn(world.process(p), [&, task, p] {
      // Queued in arrival order, all within the first second.
      world.process(p).runtime().sleep_for(milliseconds(1 + task % 1000));
      FairLock lock = world.client(p).fair_lock("fair-cost", options);
      lock.lock();
      world.process(p).runtime().sleep_for(milliseconds(1));
      lock.unlock();
      ++figures.acquisitions;
      figures.elapsed = std::max(figures.elapsed, world.world().now() - Instant{});
    });
  }
  const sim::RunStats stats = world.world().run_until_idle();
  EXPECT_EQ(stats.stuck_tasks, 0u);
  EXPECT_EQ(figures.acquisitions, waiters + 1);
  figures.scripts = world.work().scripts;
  figures.script_words = world.work().script_words;
  return figures;
}

// Every call reads and writes a bounded number of entries whatever the
// queue's length (goal: flat within 2x from 1 to 1,000 waiters). Reading
// and rewriting the whole queue at each keep-alive made a call at 1,000
// waiters hundreds of times the work of one at 1.
TEST(ScriptCostTest, FairQueueWorkPerCallIsFlatFromOneToAThousandWaiters) {
  const Figures one = fair_queue(1);
  const Figures thousand = fair_queue(1'000);
  print("fair, 1 waiter", one);
  print("fair, 1000 waiters", thousand);
  EXPECT_LE(thousand.words_per_script(), 2 * one.words_per_script());
  // Keep-alives every third of the waiter timeout, one acquisition and
  // one release each: a handful of calls per acquisition at any length.
  EXPECT_LE(thousand.scripts_per_acquisition(), 2 * one.scripts_per_acquisition());
}

// 100 waiters behind a holder for 2 minutes: only the first two keep
// alive every third of the waiter timeout (lib/fair_queue.lua, "Near and
// far waiters"); the 98 behind them every third of eight, and are told
// when they move up (kFairLongHoldScripts).
TEST(ScriptCostTest, FairWaitersBehindTheFirstTwoKeepAliveEightTimesLessOften) {
  const Figures figures = fair_queue(100, std::chrono::minutes(2));
  print("fair, 100 waiters behind a 2 min hold", figures);
  EXPECT_LE(figures.scripts_per_acquisition(), kFairLongHoldScripts);
}

// `handoff` on a fair lock, 8 processes x 4 tasks, 4 acquisitions each.
Figures fair_handoff(Handoff handoff) {
  CostWorld world(8);
  const FairLockOptions options{.waiter_timeout = seconds(5), .handoff = handoff};
  return contend(world, 32, 4, [&options](Client& client, sim::SimClient& process, int) {
    FairLock lock = client.fair_lock("fair-handoff", options);
    lock.lock();
    process.runtime().sleep_for(milliseconds(1));
    lock.unlock();
  });
}

// Every handoff to a waiting turnstile waiter costs one call fewer.
TEST(ScriptCostTest, FairDirectHandoffSavesTheWokenWaitersCall) {
  const Figures announce = fair_handoff(Handoff::announce);
  const Figures direct = fair_handoff(Handoff::direct);
  print("fair, announce, 8 processes x 4 tasks", announce);
  print("fair, direct, 8 processes x 4 tasks", direct);
  EXPECT_LE(direct.scripts_per_acquisition(), announce.scripts_per_acquisition() - kDirectHandoffSaving);
  EXPECT_LT(direct.elapsed, kNoLeaseSleptOut);
}

// A fair lock's waiter listens on a channel of its own owner id
// (Redisson's): subscribed after its first try, it must try again, unless
// the channel is still subscribed from the owner's last wait (it lingers
// 1 s). A LockHold has an owner id of its own; the ids of released holds
// are reused (LockCore::idle_hold_owners), so that a process looping
// acquire -> release over holds costs what it costs with threads: the try
// that queues it and the release (2.00 with direct handoff; 3.00 while
// every hold had a new id, issue #49).
TEST(ScriptCostTest, FairHoldsLoopingInOneProcessReuseTheirWaitChannels) {
  CostWorld world(1);
  const FairLockOptions options{.waiter_timeout = seconds(5)};
  const Figures figures = contend(world, 16, 20, [&options](Client& client, sim::SimClient& process, int) {
    FairLock lock = client.fair_lock("fair-holds", options);
    LockHold hold = lock.try_acquire_hold({.wait = kWaitForever});
    ASSERT_TRUE(hold.held());
    process.runtime().sleep_for(milliseconds(1));
    hold.release();
  });
  print("fair, holds, 1 process x 16 tasks", figures);
  EXPECT_LE(figures.scripts_per_acquisition(), kFairLoopScripts);
  EXPECT_LT(figures.elapsed, kNoLeaseSleptOut);
}

}  // namespace
}  // namespace turnstile::testing
