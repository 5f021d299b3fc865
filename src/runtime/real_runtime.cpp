#include "runtime/real_runtime.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/check.h"
#include "turnstile/errors.h"
#include "turnstile/mutex.h"

namespace turnstile {
namespace {

using SteadyClock = std::chrono::steady_clock;

class RealEvent final : public Event {
 public:
  void notify() override {
    {
      const MutexLock lock(mutex_);
      signaled_ = true;
    }
    ready_.notify_one();
  }

  bool wait_until(Instant deadline) override {
    MutexLock lock(mutex_);
    const auto consume = [this]() TURNSTILE_REQUIRES(mutex_) { return std::exchange(signaled_, false); };
    const auto signaled = [this]() TURNSTILE_REQUIRES(mutex_) { return signaled_; };
    if (deadline >= kNoDeadline) {
      lock.wait(ready_, signaled);
      return consume();
    }
    lock.wait_until(ready_, RealRuntime::to_steady(deadline), signaled);
    return consume();
  }

 private:
  Mutex mutex_;
  std::condition_variable ready_;
  bool signaled_ TURNSTILE_GUARDED_BY(mutex_) = false;
};

std::atomic<std::uint64_t> next_thread_task_id{1};

}  // namespace

struct RealRuntime::State {
  // ---- timers ----
  Mutex timer_mutex;
  std::condition_variable timer_changed;   // timer thread waits on it
  std::condition_variable callback_ready;  // workers wait on it
  bool stopping TURNSTILE_GUARDED_BY(timer_mutex) = false;
  TimerId next_timer_id TURNSTILE_GUARDED_BY(timer_mutex) = 1;
  std::uint64_t next_timer_sequence TURNSTILE_GUARDED_BY(timer_mutex) = 0;
  using TimerKey = std::pair<Instant, std::uint64_t>;  // (deadline, sequence)
  std::map<TimerKey, TimerId> timer_queue TURNSTILE_GUARDED_BY(timer_mutex);
  struct PendingTimer {
    TimerKey key;
    std::function<void()> callback;
  };
  std::map<TimerId, PendingTimer> pending_timers TURNSTILE_GUARDED_BY(timer_mutex);
  std::deque<std::function<void()>> due_callbacks TURNSTILE_GUARDED_BY(timer_mutex);
  // Started by the constructor, joined by the destructor: no lock.
  std::thread timer_thread;
  std::vector<std::thread> workers;

  // ---- posted tasks ----
  Mutex post_mutex;
  std::condition_variable post_ready;  // engine threads wait on it
  bool posts_stopping TURNSTILE_GUARDED_BY(post_mutex) = false;
  std::deque<std::function<void()>> posted TURNSTILE_GUARDED_BY(post_mutex);
  std::vector<std::thread> engine_threads TURNSTILE_GUARDED_BY(post_mutex);

  // ---- spawned tasks ----
  Mutex spawn_mutex;
  std::uint64_t next_spawn_id TURNSTILE_GUARDED_BY(spawn_mutex) = 1;
  std::map<std::uint64_t, std::thread> spawned TURNSTILE_GUARDED_BY(spawn_mutex);
  std::vector<std::uint64_t> finished_spawns TURNSTILE_GUARDED_BY(spawn_mutex);

  // ---- randomness ----
  Mutex random_mutex;
  std::mt19937_64 random TURNSTILE_GUARDED_BY(random_mutex);

  void run_timer_thread() {
    MutexLock lock(timer_mutex);
    while (!stopping) {
      if (timer_queue.empty()) {
        lock.wait(timer_changed);
        continue;
      }
      const auto first = timer_queue.begin();
      if (first->first.first > Instant(SteadyClock::now().time_since_epoch())) {
        lock.wait_until(timer_changed, to_steady(first->first.first));
        continue;
      }
      const auto pending = pending_timers.find(first->second);
      TURNSTILE_CHECK(pending != pending_timers.end());
      due_callbacks.push_back(std::move(pending->second.callback));
      pending_timers.erase(pending);
      timer_queue.erase(first);
      callback_ready.notify_one();
    }
  }

  void run_worker() {
    MutexLock lock(timer_mutex);
    while (true) {
      lock.wait(callback_ready,
                [this]() TURNSTILE_REQUIRES(timer_mutex) { return stopping || !due_callbacks.empty(); });
      if (stopping) return;  // callbacks not yet started are dropped
      std::function<void()> callback = std::move(due_callbacks.front());
      due_callbacks.pop_front();
      lock.unlock();
      callback();
      lock.lock();
    }
  }

  void run_engine_thread() {
    MutexLock lock(post_mutex);
    while (true) {
      lock.wait(post_ready, [this]() TURNSTILE_REQUIRES(post_mutex) { return posts_stopping || !posted.empty(); });
      if (posts_stopping) return;  // tasks not yet started are dropped
      std::function<void()> task = std::move(posted.front());
      posted.pop_front();
      lock.unlock();
      task();
      task = nullptr;  // its captures go before the lock is taken again
      lock.lock();
    }
  }

  // Joins `thread` unless it is the calling thread, which is detached.
  static void join_or_detach(std::thread& thread) {
    if (!thread.joinable()) return;
    if (thread.get_id() == std::this_thread::get_id()) {
      thread.detach();
    } else {
      thread.join();
    }
  }
};

RealRuntime::RealRuntime() : state_(std::make_shared<State>()) {
  std::random_device device;
  std::seed_seq seed{device(), device(), device(), device()};
  {
    const MutexLock lock(state_->random_mutex);  // no other thread yet: for the analysis
    state_->random.seed(seed);
  }
  // The threads hold the state by shared_ptr, so a thread that outlives the
  // destructor (detached because it ran the destructor) keeps it alive.
  state_->timer_thread = std::thread([state = state_] { state->run_timer_thread(); });
  state_->workers.reserve(kTimerWorkerThreads);
  for (std::size_t i = 0; i < kTimerWorkerThreads; ++i) {
    state_->workers.emplace_back([state = state_] { state->run_worker(); });
  }
}

RealRuntime::~RealRuntime() {
  {
    const MutexLock lock(state_->timer_mutex);
    state_->stopping = true;
  }
  state_->timer_changed.notify_all();
  state_->callback_ready.notify_all();
  State::join_or_detach(state_->timer_thread);
  for (std::thread& worker : state_->workers) State::join_or_detach(worker);
  std::deque<std::function<void()>> dropped;  // destroyed with no lock held
  std::vector<std::thread> engines;
  {
    const MutexLock lock(state_->post_mutex);
    state_->posts_stopping = true;
    dropped.swap(state_->posted);
    engines.swap(state_->engine_threads);
  }
  state_->post_ready.notify_all();
  for (std::thread& engine : engines) State::join_or_detach(engine);

  // Spawned tasks finish on their own; wait for them. A task may spawn more
  // while we wait, hence the loop, bounded by the live-thread bound.
  for (std::size_t round = 0; round <= kMaxLiveSpawnedThreads; ++round) {
    std::map<std::uint64_t, std::thread> running;
    {
      const MutexLock lock(state_->spawn_mutex);
      running.swap(state_->spawned);
      state_->finished_spawns.clear();
    }
    if (running.empty()) break;
    for (auto& [id, thread] : running) State::join_or_detach(thread);
  }
}

std::chrono::steady_clock::time_point RealRuntime::to_steady(Instant instant) {
  return SteadyClock::time_point(std::chrono::duration_cast<SteadyClock::duration>(instant.time_since_epoch()));
}

Instant RealRuntime::now() {
  return Instant(std::chrono::duration_cast<Duration>(SteadyClock::now().time_since_epoch()));
}

std::int64_t RealRuntime::wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void RealRuntime::sleep_until(Instant deadline) { std::this_thread::sleep_until(to_steady(deadline)); }

std::unique_ptr<Event> RealRuntime::make_event() { return std::make_unique<RealEvent>(); }

Runtime::TimerId RealRuntime::schedule_at(Instant when, std::function<void()> callback) {
  TURNSTILE_CHECK(callback);
  TimerId id = 0;
  bool earliest = false;
  {
    const MutexLock lock(state_->timer_mutex);
    TURNSTILE_CHECK_MSG(state_->pending_timers.size() < kMaxPendingTimers, "pending timers leak in the caller");
    id = state_->next_timer_id++;
    const State::TimerKey key{when, state_->next_timer_sequence++};
    const auto inserted = state_->timer_queue.emplace(key, id).first;
    earliest = inserted == state_->timer_queue.begin();
    state_->pending_timers.emplace(id, State::PendingTimer{key, std::move(callback)});
  }
  // The timer thread sleeps until the earliest deadline: only a new
  // earliest one changes that (a wake-up per lock() would cost a context
  // switch on the uncontended path).
  if (earliest) state_->timer_changed.notify_one();
  return id;
}

bool RealRuntime::cancel(TimerId id) {
  const MutexLock lock(state_->timer_mutex);
  const auto pending = state_->pending_timers.find(id);
  if (pending == state_->pending_timers.end()) return false;
  state_->timer_queue.erase(pending->second.key);
  state_->pending_timers.erase(pending);
  // The timer thread may be waiting for this deadline; waking it early is
  // harmless (it re-reads the queue).
  return true;
}

void RealRuntime::spawn(std::function<void()> task) {
  TURNSTILE_CHECK(task);
  std::vector<std::thread> reaped;
  {
    const MutexLock lock(state_->spawn_mutex);
    for (const std::uint64_t finished : state_->finished_spawns) {
      const auto found = state_->spawned.find(finished);
      if (found == state_->spawned.end()) continue;
      reaped.push_back(std::move(found->second));
      state_->spawned.erase(found);
    }
    state_->finished_spawns.clear();
    if (state_->spawned.size() >= kMaxLiveSpawnedThreads) {
      throw Error("refused to spawn a task: " + std::to_string(kMaxLiveSpawnedThreads) +
                  " spawned tasks run already (RealRuntime::kMaxLiveSpawnedThreads)");
    }
    const std::uint64_t id = state_->next_spawn_id++;
    // An exception escaping `task` terminates the process, as with std::thread.
    state_->spawned.emplace(id, std::thread([state = state_, id, task = std::move(task)] {
                              task();
                              const MutexLock done(state->spawn_mutex);
                              state->finished_spawns.push_back(id);
                            }));
  }
  // Reaped threads have returned from task() and recorded themselves; they
  // are only unwinding their last lines, so these joins are quick.
  for (std::thread& thread : reaped) thread.join();
}

void RealRuntime::post(std::function<void()> task) {
  TURNSTILE_CHECK(task != nullptr);
  {
    const MutexLock lock(state_->post_mutex);
    if (state_->posts_stopping) return;  // the runtime is going: dropped, as queued ones are
    // Started at the first post: a process that only blocks pays nothing.
    if (state_->engine_threads.empty()) {
      state_->engine_threads.reserve(kEngineThreads);
      for (std::size_t i = 0; i < kEngineThreads; ++i) {
        state_->engine_threads.emplace_back([state = state_] { state->run_engine_thread(); });
      }
    }
    state_->posted.push_back(std::move(task));
  }
  state_->post_ready.notify_one();
}

std::uint64_t RealRuntime::current_task_id() {
  thread_local const std::uint64_t id = next_thread_task_id.fetch_add(1, std::memory_order_relaxed);
  return id;
}

std::uint64_t RealRuntime::random_u64() {
  const MutexLock lock(state_->random_mutex);
  return state_->random();
}

std::shared_ptr<Runtime> make_real_runtime() { return std::make_shared<RealRuntime>(); }

}  // namespace turnstile
