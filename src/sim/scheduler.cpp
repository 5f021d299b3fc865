// Under AddressSanitizer, use Boost.Context's ucontext implementation: only
// it tells ASan about stack switches (BOOST_USE_ASAN). It must be chosen
// before any Boost.Context header is included.
#if defined(BOOST_USE_ASAN) && !defined(BOOST_USE_UCONTEXT)
#define BOOST_USE_UCONTEXT
#endif

#include "sim/scheduler.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <utility>

#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>

#if defined(BOOST_USE_ASAN)
#include <sanitizer/asan_interface.h>
#endif

#if defined(__GLIBCXX__)
#include <cxxabi.h>

#include "core/check.h"
#endif

namespace ctx = boost::context;

#if defined(BOOST_USE_UCONTEXT)
// Debian's libboost_context is built for fcontext and lacks the per-thread
// record of the ucontext implementation; these mirror Boost's own
// definitions (libs/context/src/fiber.cpp).
namespace boost::context::detail {
namespace {
thread_local fiber_activation_record* current_fiber_record = nullptr;
thread_local std::size_t fiber_record_users = 0;
}  // namespace

fiber_activation_record_initializer::fiber_activation_record_initializer() noexcept {
  if (fiber_record_users++ == 0) current_fiber_record = new fiber_activation_record();
}

fiber_activation_record_initializer::~fiber_activation_record_initializer() {
  if (--fiber_record_users == 0) {
    TURNSTILE_CHECK(current_fiber_record->is_main_context());
    delete current_fiber_record;
  }
}

fiber_activation_record*& fiber_activation_record::current() noexcept {
  thread_local fiber_activation_record_initializer initializer;
  return current_fiber_record;
}
}  // namespace boost::context::detail
#endif

namespace turnstile::sim {
namespace {

// FNV-1a over 64-bit words.
constexpr std::uint64_t kHashPrime = 0x100000001b3ULL;
std::uint64_t mix(std::uint64_t hash, std::uint64_t word) { return (hash ^ word) * kHashPrime; }

}  // namespace

// Fiber stacks, with a bounded cache of released ones: spawning a task then
// costs no system call once the cache is warm.
class FiberStackPool {
 public:
  FiberStackPool() : allocator_(Scheduler::kFiberStackBytes) {}
  ~FiberStackPool() {
    for (ctx::stack_context& stack : free_) allocator_.deallocate(stack);
  }
  FiberStackPool(const FiberStackPool&) = delete;
  FiberStackPool& operator=(const FiberStackPool&) = delete;

  ctx::stack_context allocate() {
    if (free_.empty()) return allocator_.allocate();
    const ctx::stack_context stack = free_.back();
    free_.pop_back();
#if defined(BOOST_USE_ASAN)
    // The stack grows down from sp: its usable bytes are [sp - size, sp).
    __asan_unpoison_memory_region(static_cast<char*>(stack.sp) - stack.size, stack.size);
#endif
    return stack;
  }
  void deallocate(ctx::stack_context& stack) noexcept {
    if (free_.size() < Scheduler::kMaxCachedStacks) {
      free_.push_back(stack);
    } else {
      allocator_.deallocate(stack);
    }
  }

 private:
  ctx::protected_fixedsize_stack allocator_;
  std::vector<ctx::stack_context> free_;
};

namespace {

// The StackAllocator concept Boost.Context wants, over a pool.
class PooledStack {
 public:
  explicit PooledStack(FiberStackPool* pool) : pool_(pool) {}
  ctx::stack_context allocate() { return pool_->allocate(); }
  void deallocate(ctx::stack_context& stack) noexcept { pool_->deallocate(stack); }

 private:
  FiberStackPool* pool_;
};

// The calling thread's exception-handling state.
detail::EhGlobals* thread_eh_globals() {
#if defined(__GLIBCXX__)
  return reinterpret_cast<detail::EhGlobals*>(abi::__cxa_get_globals());
#else
  return nullptr;
#endif
}

}  // namespace

struct Scheduler::Task {
  TaskId id = 0;
  ClientId client = 0;
  Callback body;
  ctx::fiber fiber;   // the task's context while it is parked
  ctx::fiber caller;  // the scheduler's context while the task runs
  // Bumped at every park; a wake entry of an older generation is stale.
  std::uint64_t generation = 0;
  bool started = false;
  bool finished = false;
  bool killed = false;
  std::uint64_t blocking_calls_while_killed = 0;
  std::exception_ptr failure;
  detail::EhGlobals eh;
};

struct Scheduler::ClientState {
  bool paused = false;
  bool killed = false;
  std::set<TaskId> tasks;
  // Entries that came due while paused, in due order.
  std::vector<Entry> deferred;
};

class Scheduler::SimEvent final : public Event {
 public:
  explicit SimEvent(Scheduler& scheduler) : scheduler_(scheduler) {}

  void notify() override {
    scheduler_.assert_owner_thread();
    signaled_ = true;
    if (waiter_ != 0) {
      scheduler_.push(scheduler_.now(), EntryKind::wake, waiter_client_, waiter_, waiter_generation_);
      waiter_ = 0;
    }
  }

  bool wait_until(Instant deadline) override {
    Task& task = scheduler_.require_current_task("Event::wait_until");
    if (task.killed) {
      scheduler_.on_blocking_call_while_killed(task);
      return std::exchange(signaled_, false);
    }
    if (std::exchange(signaled_, false)) return true;
    TURNSTILE_CHECK_MSG(waiter_ == 0, "an Event has at most one waiter");
    ++task.generation;
    waiter_ = task.id;
    waiter_client_ = task.client;
    waiter_generation_ = task.generation;
    if (deadline < kNoDeadline) {
      scheduler_.push(deadline, EntryKind::wake, task.client, task.id, task.generation);
    }
    scheduler_.park(task);
    waiter_ = 0;
    if (task.killed) scheduler_.on_blocking_call_while_killed(task);
    return std::exchange(signaled_, false);
  }

 private:
  Scheduler& scheduler_;
  bool signaled_ = false;
  TaskId waiter_ = 0;
  ClientId waiter_client_ = 0;
  std::uint64_t waiter_generation_ = 0;
};

Scheduler::Scheduler(VirtualClock& clock, Options options)
    : clock_(clock),
      options_(options),
      owner_thread_(std::this_thread::get_id()),
      stacks_(std::make_unique<FiberStackPool>()) {
  clients_.push_back(std::make_unique<ClientState>());  // kWorldClient
}

Scheduler::~Scheduler() {
  TURNSTILE_CHECK(!in_task());
  observer_ = nullptr;
  for (ClientId client = 0; client < clients_.size(); ++client) {
    ClientState& state = *clients_[client];
    mark_killed(state);
    unwind_killed_tasks(client);
  }
  TURNSTILE_CHECK(tasks_.empty());
}

void Scheduler::assert_owner_thread() const {
  TURNSTILE_CHECK_MSG(std::this_thread::get_id() == owner_thread_, "a Scheduler is used from one thread");
}

Scheduler::ClientState& Scheduler::client_state(ClientId client) {
  TURNSTILE_CHECK(client < clients_.size());
  return *clients_[client];
}

const Scheduler::ClientState& Scheduler::client_state(ClientId client) const {
  TURNSTILE_CHECK(client < clients_.size());
  return *clients_[client];
}

ClientId Scheduler::add_client() {
  assert_owner_thread();
  TURNSTILE_CHECK(clients_.size() < kMaxClients);
  clients_.push_back(std::make_unique<ClientState>());
  return static_cast<ClientId>(clients_.size() - 1);
}

bool Scheduler::client_paused(ClientId client) const { return client_state(client).paused; }
bool Scheduler::client_killed(ClientId client) const { return client_state(client).killed; }

void Scheduler::pause_client(ClientId client) {
  assert_owner_thread();
  TURNSTILE_CHECK(client != kWorldClient);
  ClientState& state = client_state(client);
  if (state.paused || state.killed) return;
  state.paused = true;
  notify(Happening::client_paused, client, 0);
}

void Scheduler::resume_client(ClientId client) {
  assert_owner_thread();
  ClientState& state = client_state(client);
  if (!state.paused) return;
  state.paused = false;
  notify(Happening::client_resumed, client, 0);
  std::vector<Entry> deferred = std::move(state.deferred);
  state.deferred.clear();
  for (const Entry& entry : deferred) push(now(), entry.kind, entry.client, entry.id, entry.generation);
}

void Scheduler::kill_client(ClientId client) {
  assert_owner_thread();
  TURNSTILE_CHECK(client != kWorldClient);
  ClientState& state = client_state(client);
  if (state.killed) return;
  mark_killed(state);
  notify(Happening::client_killed, client, 0);
  for (auto timer = timers_.begin(); timer != timers_.end();) {
    timer = timer->second.client == client ? timers_.erase(timer) : std::next(timer);
  }
  if (!in_task()) {
    unwind_killed_tasks(client);
    return;
  }
  // Fibers are switched only from the scheduler's stack: queue the unwinding.
  for (const TaskId id : state.tasks) {
    const Task& task = *tasks_.at(id);
    if (&task != current_) push(now(), EntryKind::wake, client, id, task.generation);
  }
  if (current_->client == client) throw TaskKilled{};
}

void Scheduler::mark_killed(ClientState& state) {
  state.killed = true;
  state.paused = false;
  state.deferred.clear();
  // Tasks that never started have no stack to unwind: they just go.
  for (const TaskId id : std::vector<TaskId>(state.tasks.begin(), state.tasks.end())) {
    Task& task = *tasks_.at(id);
    task.killed = true;
    if (!task.started) {
      state.tasks.erase(id);
      tasks_.erase(id);
    }
  }
}

void Scheduler::unwind_killed_tasks(ClientId client) {
  TURNSTILE_CHECK(!in_task());
  ClientState& state = client_state(client);
  // Each switch ends with the task finished: its blocking calls return at
  // once while it unwinds.
  for (const TaskId id : std::vector<TaskId>(state.tasks.begin(), state.tasks.end())) {
    const auto found = tasks_.find(id);
    if (found != tasks_.end()) switch_to(*found->second);
  }
  TURNSTILE_CHECK(state.tasks.empty());
}

void Scheduler::on_blocking_call_while_killed(Task& task) {
  if (++task.blocking_calls_while_killed > kMaxBlockingCallsWhileUnwinding) {
    std::fprintf(stderr,
                 "turnstile sim: killed task %llu made more than %llu blocking calls while "
                 "unwinding (a destructor loops?)\n",
                 static_cast<unsigned long long>(task.id),
                 static_cast<unsigned long long>(kMaxBlockingCallsWhileUnwinding));
    std::abort();
  }
  if (std::uncaught_exceptions() == 0) throw TaskKilled{};
}

void Scheduler::push(Instant when, EntryKind kind, ClientId client, std::uint64_t id, std::uint64_t generation) {
  if (queue_.size() >= kMaxQueuedEntries) {
    throw SimulationError("the simulation's queue reached its bound of " + std::to_string(kMaxQueuedEntries) +
                          " entries (timers or messages scheduled without end?)");
  }
  queue_.push(Entry{std::max(when, now()), next_sequence_++, kind, client, id, generation});
}

TaskId Scheduler::create_task(ClientId client, Callback body) {
  TURNSTILE_CHECK(body);
  if (tasks_.size() >= kMaxLiveTasks) throw SimulationError("too many live simulated tasks");
  auto task = std::make_unique<Task>();
  task->id = next_task_id_++;
  task->client = client;
  task->body = std::move(body);
  const TaskId id = task->id;
  tasks_.emplace(id, std::move(task));
  client_state(client).tasks.insert(id);
  return id;
}

TaskId Scheduler::spawn(ClientId client, Callback body) {
  assert_owner_thread();
  if (client_state(client).killed) return 0;
  const TaskId id = create_task(client, std::move(body));
  push(now(), EntryKind::start, client, id, 0);
  return id;
}

Scheduler::TimerId Scheduler::schedule_at(ClientId client, Instant when, Callback callback, RunAs run_as) {
  assert_owner_thread();
  TURNSTILE_CHECK(callback);
  if (client_state(client).killed) return 0;
  const TimerId id = next_timer_id_++;
  timers_.emplace(id, Timer{client, std::move(callback), run_as});
  push(when, EntryKind::timer, client, id, 0);
  return id;
}

bool Scheduler::cancel(TimerId id) {
  assert_owner_thread();
  return timers_.erase(id) > 0;
}

Scheduler::Task& Scheduler::require_current_task(const char* operation) {
  assert_owner_thread();
  if (current_ == nullptr) {
    throw SimulationError(std::string(operation) + " called outside a simulated task (spawn the code as a task)");
  }
  return *current_;
}

TaskId Scheduler::current_task() const { return current_ != nullptr ? current_->id : 0; }
ClientId Scheduler::current_client() const { return current_ != nullptr ? current_->client : kWorldClient; }

void Scheduler::sleep_until(Instant deadline) {
  Task& task = require_current_task("sleep_until");
  if (task.killed) {
    on_blocking_call_while_killed(task);
    return;
  }
  ++task.generation;
  // A sleep without end parks until the task is killed.
  if (deadline < kNoDeadline) push(deadline, EntryKind::wake, task.client, task.id, task.generation);
  park(task);
  if (task.killed) on_blocking_call_while_killed(task);
}

std::unique_ptr<Event> Scheduler::make_event() { return std::make_unique<SimEvent>(*this); }

void Scheduler::park(Task& task) {
  TURNSTILE_CHECK(current_ == &task);
  task.caller = std::move(task.caller).resume();
  TURNSTILE_CHECK(current_ == &task);
}

void Scheduler::switch_to(Task& task) {
  TURNSTILE_CHECK(current_ == nullptr);
  TURNSTILE_CHECK(!task.finished);
  if (!task.started) {
    task.started = true;
    task.fiber = ctx::fiber(std::allocator_arg, PooledStack(stacks_.get()), [this, &task](ctx::fiber&& caller) {
      task.caller = std::move(caller);
      try {
        task.body();
      } catch (const TaskKilled&) {
        TURNSTILE_CHECK(task.killed);
      } catch (const ctx::detail::forced_unwind&) {
        throw;
      } catch (...) {
        task.failure = std::current_exception();
      }
      task.body = nullptr;  // its captures die on this stack
      task.finished = true;
      return std::move(task.caller);
    });
  }
  detail::EhGlobals* const globals = thread_eh_globals();
  if (globals != nullptr) {
    scheduler_eh_ = *globals;
    *globals = task.eh;
  }
  current_ = &task;
  ++context_switches_;
  task.fiber = std::move(task.fiber).resume();
  current_ = nullptr;
  if (globals != nullptr) {
    task.eh = *globals;
    *globals = scheduler_eh_;
  }
  if (!task.finished) return;

  const TaskId id = task.id;
  const ClientId client = task.client;
  const bool killed = task.killed;
  std::exception_ptr failure = killed ? nullptr : task.failure;
  client_state(client).tasks.erase(id);
  tasks_.erase(id);  // destroys `task`
  notify(killed ? Happening::task_unwound : (failure ? Happening::task_failed : Happening::task_finished), client, id);
  if (failure) std::rethrow_exception(failure);
}

void Scheduler::notify(Happening happening, ClientId client, std::uint64_t id) {
  if (observer_) observer_(Record{now(), happening, client, id});
}

bool Scheduler::dispatch(const Entry& entry) {
  ClientState& state = client_state(entry.client);
  Task* task = nullptr;
  switch (entry.kind) {
    case EntryKind::start:
    case EntryKind::wake: {
      const auto found = tasks_.find(entry.id);
      if (found == tasks_.end()) return false;
      task = found->second.get();
      if (entry.kind == EntryKind::wake && task->generation != entry.generation) return false;
      break;
    }
    case EntryKind::timer:
      if (!timers_.contains(entry.id)) return false;
      break;
  }
  if (state.paused && !state.killed) {
    state.deferred.push_back(entry);
    return false;
  }
  if (entry.when > now()) clock_.advance_to(entry.when);
  schedule_hash_ = mix(mix(mix(mix(schedule_hash_, static_cast<std::uint64_t>(now().time_since_epoch().count())),
                               static_cast<std::uint64_t>(entry.kind)),
                           entry.client),
                       entry.id);

  switch (entry.kind) {
    case EntryKind::start:
      notify(Happening::task_started, entry.client, entry.id);
      switch_to(*task);
      break;
    case EntryKind::wake:
      notify(Happening::task_woken, entry.client, entry.id);
      switch_to(*task);
      break;
    case EntryKind::timer: {
      const auto found = timers_.find(entry.id);
      Timer timer = std::move(found->second);
      timers_.erase(found);
      notify(Happening::timer_fired, entry.client, entry.id);
      if (timer.run_as == RunAs::inline_action) {
        timer.callback();
      } else {
        const TaskId id = create_task(entry.client, std::move(timer.callback));
        notify(Happening::task_started, entry.client, id);
        switch_to(*tasks_.at(id));
      }
      break;
    }
  }
  return true;
}

Scheduler::RunResult Scheduler::run(Instant limit, bool until_idle) {
  assert_owner_thread();
  if (in_task()) throw SimulationError("run_until called from inside a simulated task");
  RunResult result;
  const Instant horizon = Instant{} + options_.virtual_time_budget;
  while (!stop_requested_) {
    if (queue_.empty()) {
      result.idle = true;
      result.stuck_tasks = tasks_.size();
      break;
    }
    if (!until_idle && queue_.top().when > limit) break;
    if (queue_.top().when > horizon) throw budget_exceeded(SimulationBudgetError::Budget::virtual_time);
    if (events_dispatched_ >= options_.event_budget) throw budget_exceeded(SimulationBudgetError::Budget::events);
    const Entry entry = queue_.top();
    queue_.pop();
    if (!dispatch(entry)) continue;
    ++result.events;
    ++events_dispatched_;
  }
  if (!until_idle && !stop_requested_ && limit > now()) clock_.advance_to(limit);
  return result;
}

SimulationBudgetError Scheduler::budget_exceeded(SimulationBudgetError::Budget budget) const {
  SimulationBudgetError::Details details;
  details.budget = budget;
  details.seed = options_.seed;
  details.virtual_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now() - Instant{}).count();
  details.events = events_dispatched_;
  details.virtual_time_budget = options_.virtual_time_budget;
  details.event_budget = options_.event_budget;
  return SimulationBudgetError(std::move(details));
}

Scheduler::RunResult Scheduler::run_until(Instant limit) { return run(limit, false); }
Scheduler::RunResult Scheduler::run_until_idle() { return run(kNoDeadline, true); }

}  // namespace turnstile::sim
