// sim/scheduler.h
//
// The deterministic scheduler of a simulated world. Simulated tasks are
// ordinary blocking code running on fibers (Boost.Context); exactly one runs
// at a time, on the thread that calls run_until()/run_until_idle(). A task
// runs until it blocks (sleep, Event wait, or a zero wait, which yields); the
// scheduler then takes the next entry of one ordered queue keyed by
// (virtual time, sequence number), advances the VirtualClock to its time and
// dispatches it. Nothing is ever ordered by pointer, hash or real time, so
// the same inputs give the same order of events, byte for byte.
//
// Queue entries are: the start of a task, the wake-up of a parked task (a
// timeout or an Event notify), and timers. A timer either runs its callback
// as a new task of its client (RunAs::task: the callback may block) or
// inline on the scheduler's own stack (RunAs::inline_action: the callback
// must not block; used for pub/sub delivery and fault injection).
//
// Clients. Every task and timer belongs to a client (ClientId). Client
// kWorldClient (0) is the world itself. Per client, the scheduler supports:
//
//   * pause_client / resume_client: while paused, every entry of the client
//     that comes due (task starts, wake-ups, timers) is set aside in due
//     order; resume re-queues them at the resume instant in that order. A
//     paused client's running task (only possible when it paused itself)
//     is frozen at its next blocking call. This is a long GC pause: nothing
//     of the client runs, then everything that came due runs at once.
//
//   * kill_client (a crash): the client's pending timers are dropped and its
//     tasks never run user code again. Their fiber stacks are released by
//     unwinding: each parked task is resumed once with a TaskKilled
//     exception thrown from its blocking call, caught at the fiber's top.
//     Destructors on the stack do run. A crashed client must send nothing,
//     so the caller (World) marks the client's backends dead *before*
//     killing: an unlock attempted by a destructor then throws
//     ConnectionError without reaching a server. While a killed task unwinds,
//     blocking calls return at once (sleep returns, Event waits return
//     false, spawn and schedule_at do nothing); a blocking call of a killed
//     task that is not unwinding (it swallowed TaskKilled with catch (...))
//     throws TaskKilled again. Called outside any task, kill_client unwinds
//     the tasks before it returns; called from a task, it queues their
//     unwinding at the current instant, and if the calling task belongs to
//     the killed client, kill_client throws TaskKilled itself.
//
// Tasks must not swallow TaskKilled; it deliberately does not derive from
// std::exception, so `catch (const std::exception&)` lets it through.
// An exception other than TaskKilled escaping a task's body ends that task
// and is rethrown from the run call that dispatched it.
//
// Bounds: the queue and live tasks are bounded (named constants), and so is
// every run (Options): the virtual time it may reach and the events it may
// dispatch. Going past either budget throws SimulationBudgetError
// (turnstile/sim/world.h) naming the seed, before the entry that would
// exceed it is dispatched: a run that never idles (a watchdog renewing for
// ever) or an endless loop of tasks yielding at one instant fails instead
// of hanging.
//
// Thread safety: none. Every method must be called on the thread that
// created the scheduler (asserted in debug builds).

#ifndef TURNSTILE_SIM_SCHEDULER_H_
#define TURNSTILE_SIM_SCHEDULER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fake_redis/virtual_clock.h"
#include "turnstile/runtime.h"
#include "turnstile/sim/world.h"

namespace turnstile::sim {

using TaskId = std::uint64_t;    // 1, 2, 3, ... never reused; 0 means "no task"
using ClientId = std::uint32_t;  // 1, 2, 3, ... from add_client()
inline constexpr ClientId kWorldClient = 0;

// Thrown inside a killed task to unwind its stack. Not a std::exception.
struct TaskKilled {};

// A misuse of the simulation (blocking outside a task) or an exceeded bound.
class SimulationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class FiberStackPool;

namespace detail {
// The C++ runtime's per-thread exception-handling state (libstdc++'s
// __cxa_eh_globals: caught-exception stack, uncaught count). Each fiber has
// its own, swapped at every switch, so a task that yields inside a catch
// block does not corrupt another task's.
struct EhGlobals {
  void* caught_exceptions = nullptr;
  unsigned int uncaught_exceptions = 0;
};
}  // namespace detail

class Scheduler {
 public:
  using Callback = std::function<void()>;
  using TimerId = Runtime::TimerId;  // 1, 2, 3, ... never reused; 0 = none

  // Usable stack of every fiber. Lock code, the fake server and its Lua
  // engine run on it; sanitizers need more. Stacks have a guard page.
#if defined(BOOST_USE_ASAN)
  static constexpr std::size_t kFiberStackBytes = 1024 * 1024;
#else
  static constexpr std::size_t kFiberStackBytes = 256 * 1024;
#endif
  // Released stacks kept for reuse. Under ASan a reused stack is
  // unpoisoned whole first: a fiber destroyed without unwinding (a killed
  // client's) leaves its frames' redzones poisoned. Without the cache each
  // fiber cost ASan an mmap, an mprotect, a munmap and the madvise calls
  // of the stack's shadow: 45 % of the ASan sim suite's CPU was the
  // kernel's.
#if defined(BOOST_USE_ASAN)
  static constexpr std::size_t kMaxCachedStacks = 256;
#else
  static constexpr std::size_t kMaxCachedStacks = 1024;
#endif
  static constexpr std::size_t kMaxQueuedEntries = 50'000'000;
  static constexpr std::size_t kMaxLiveTasks = 1'000'000;
  static constexpr std::uint32_t kMaxClients = 1'000'000;
  // Budgets by default: two virtual days; 50 million events (a 10 minute
  // contention run of 9 clients on 3 nodes takes 160 thousand; a loop at
  // one instant reaches it in a few minutes of wall time at most).
  static constexpr Duration kDefaultVirtualTimeBudget = std::chrono::hours(48);
  static constexpr std::uint64_t kDefaultEventBudget = 50'000'000;
  // Blocking calls a killed task may make while unwinding before the
  // process is aborted (its destructors loop).
  static constexpr std::uint64_t kMaxBlockingCallsWhileUnwinding = 10'000;

  struct Options {
    // No entry is dispatched later than virtual zero + this.
    Duration virtual_time_budget = kDefaultVirtualTimeBudget;
    // Entries dispatched over the scheduler's life, at most.
    std::uint64_t event_budget = kDefaultEventBudget;
    // Named by the budget errors (the run's replay seed).
    std::uint64_t seed = 0;
  };

  enum class RunAs : std::uint8_t { task, inline_action };

  // What the observer is told, once per dispatched entry and per client
  // state change; the world turns these into its trace.
  enum class Happening : std::uint8_t {
    task_started,
    task_finished,
    task_failed,   // an exception other than TaskKilled escaped the body
    task_unwound,  // a killed task finished unwinding
    task_woken,
    timer_fired,
    client_paused,
    client_resumed,
    client_killed,
  };
  struct Record {
    Instant when;
    Happening happening;
    ClientId client;
    std::uint64_t id;  // task id, timer id, or 0 for client changes
  };
  using Observer = std::function<void(const Record&)>;

  struct RunResult {
    // Entries dispatched by this call.
    std::uint64_t events = 0;
    // True if the queue ran dry (run_until_idle always; run_until if it
    // emptied before the limit).
    bool idle = false;
    // Live tasks left parked with nothing queued to wake them (waiting on an
    // Event without deadline nobody will notify, or frozen by a pause with
    // no resume scheduled), when idle.
    std::size_t stuck_tasks = 0;
  };

  explicit Scheduler(VirtualClock& clock) : Scheduler(clock, Options()) {}
  Scheduler(VirtualClock& clock, Options options);
  // Unwinds every remaining task (as kill_client). Must not be called from
  // a task.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // ---- clients ----
  ClientId add_client();
  void pause_client(ClientId client);
  void resume_client(ClientId client);
  void kill_client(ClientId client);
  bool client_paused(ClientId client) const;
  bool client_killed(ClientId client) const;

  // ---- tasks and timers (from anywhere on the scheduler's thread) ----
  // A new task of `client`, started after already queued entries of this
  // instant. Returns 0 (and does nothing) if the client was killed.
  TaskId spawn(ClientId client, Callback body);
  // Runs `callback` at `when` (now if it passed). Returns 0 (and does
  // nothing) if the client was killed.
  TimerId schedule_at(ClientId client, Instant when, Callback callback, RunAs run_as);
  // True if the timer had not fired yet (also while deferred by a pause).
  bool cancel(TimerId id);

  // ---- blocking calls: only from inside a task ----
  // Parks the calling task until `deadline` (yields once if it passed).
  void sleep_until(Instant deadline);
  // An Event whose waits park the calling task. notify() may be called from
  // a task or an inline action; never from another thread. Events must not
  // be used after the scheduler is destroyed.
  std::unique_ptr<Event> make_event();

  // ---- running ----
  // Dispatches entries due at or before `limit`, then advances the clock to
  // `limit` (if it is later than now).
  RunResult run_until(Instant limit);
  // Dispatches until the queue is empty.
  RunResult run_until_idle();
  // Makes the current run_*() call return after the entry being dispatched,
  // and later calls return at once (a checker found a violation). The clock
  // stays where the stop happened.
  void request_stop() { stop_requested_ = true; }
  bool stop_requested() const { return stop_requested_; }

  // ---- introspection ----
  Instant now() const { return clock_.now(); }
  VirtualClock& clock() { return clock_; }
  bool in_task() const { return current_ != nullptr; }
  TaskId current_task() const;
  ClientId current_client() const;
  std::size_t live_tasks() const { return tasks_.size(); }
  std::size_t queued_entries() const { return queue_.size(); }
  std::uint64_t events_dispatched() const { return events_dispatched_; }
  std::uint64_t context_switches() const { return context_switches_; }
  // A hash of every dispatched entry (time, kind, client, id) in order:
  // equal hashes mean (with overwhelming likelihood) equal schedules.
  std::uint64_t schedule_hash() const { return schedule_hash_; }
  void set_observer(Observer observer) { observer_ = std::move(observer); }

 private:
  struct Task;
  struct ClientState;
  struct Timer {
    ClientId client;
    Callback callback;
    RunAs run_as;
  };
  class SimEvent;
  friend class SimEvent;

  enum class EntryKind : std::uint8_t { start, wake, timer };
  struct Entry {
    Instant when;
    std::uint64_t sequence;
    EntryKind kind;
    ClientId client;
    std::uint64_t id;          // task id or timer id
    std::uint64_t generation;  // for wake: the park it ends
    // std::priority_queue is a max-heap: "greater" comes out last.
    bool operator>(const Entry& other) const {
      return when != other.when ? when > other.when : sequence > other.sequence;
    }
  };

  void push(Instant when, EntryKind kind, ClientId client, std::uint64_t id, std::uint64_t generation);
  ClientState& client_state(ClientId client);
  const ClientState& client_state(ClientId client) const;
  Task& require_current_task(const char* operation);
  TaskId create_task(ClientId client, Callback body);
  // Runs a task until it parks or finishes; rethrows a failure.
  void switch_to(Task& task);
  // Parks the calling task until a wake entry of its current generation.
  void park(Task& task);
  // For a blocking call of a killed task: throws TaskKilled unless the task
  // is already unwinding (then the call returns at once).
  void on_blocking_call_while_killed(Task& task);
  // Marks the client and its tasks killed; drops the tasks not yet started.
  void mark_killed(ClientState& state);
  void unwind_killed_tasks(ClientId client);
  bool dispatch(const Entry& entry);
  RunResult run(Instant limit, bool until_idle);
  // The error for a budget the run would exceed with its next entry.
  SimulationBudgetError budget_exceeded(SimulationBudgetError::Budget budget) const;
  void notify(Happening happening, ClientId client, std::uint64_t id);
  void assert_owner_thread() const;

  VirtualClock& clock_;
  Options options_;
  std::thread::id owner_thread_;
  std::unique_ptr<FiberStackPool> stacks_;  // outlives every task (declared first)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue_;
  std::uint64_t next_sequence_ = 0;
  // Ordered maps: iteration order (kill, destruction) is by id.
  std::map<TaskId, std::unique_ptr<Task>> tasks_;
  std::map<TimerId, Timer> timers_;
  std::vector<std::unique_ptr<ClientState>> clients_;  // index = ClientId
  TaskId next_task_id_ = 1;
  TimerId next_timer_id_ = 1;
  Task* current_ = nullptr;
  std::uint64_t events_dispatched_ = 0;
  std::uint64_t context_switches_ = 0;
  std::uint64_t schedule_hash_ = 0xcbf29ce484222325ULL;
  Observer observer_;
  bool stop_requested_ = false;
  // The scheduler stack's exception-handling state while a task runs.
  detail::EhGlobals scheduler_eh_;
};

}  // namespace turnstile::sim

#endif  // TURNSTILE_SIM_SCHEDULER_H_
