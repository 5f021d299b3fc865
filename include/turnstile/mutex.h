// turnstile/mutex.h
//
// turnstile::Mutex, a std::mutex that Clang's thread-safety analysis knows
// as a capability, and turnstile::MutexLock, its scoped lock. Every mutex
// of the library is one, so that the members it guards can be declared
// TURNSTILE_GUARDED_BY it (turnstile/thread_annotations.h) and the
// analysis checks each access at compile time:
//
//   turnstile::Mutex mutex_;
//   std::vector<Waiter> waiters_ TURNSTILE_GUARDED_BY(mutex_);
//
//   void add(Waiter waiter) {
//     const turnstile::MutexLock lock(mutex_);
//     waiters_.push_back(std::move(waiter));
//   }
//
// Both types cost what std::mutex and std::unique_lock cost: they hold one
// and forward to it. Under a compiler other than Clang the annotations
// vanish and the types behave the same.
//
// Waiting on a condition goes through the MutexLock (wait, wait_until,
// wait_for), which waits on a std::condition_variable with its underlying
// std::unique_lock; a predicate passed to it reads guarded members, so it
// is written `[this]() TURNSTILE_REQUIRES(mutex_) { ... }`: the analysis
// checks a lambda's body on its own and must be told the lock is held.

#ifndef TURNSTILE_MUTEX_H_
#define TURNSTILE_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>

#include "turnstile/thread_annotations.h"

namespace turnstile {

// A non-recursive mutex. Not copyable or movable. Locking it twice from one
// thread, or unlocking it from a thread that does not hold it, is undefined
// behaviour (as for std::mutex). Prefer MutexLock to lock()/unlock().
class TURNSTILE_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  // Blocks until the calling thread holds the mutex.
  void lock() TURNSTILE_ACQUIRE() { mutex_.lock(); }

  // Releases the mutex, which the calling thread holds.
  void unlock() TURNSTILE_RELEASE() { mutex_.unlock(); }

  // Tells the analysis that the calling thread holds the mutex where it
  // cannot see it (a caller up the stack took it, as a flag of the thread
  // shows). Checks nothing at run time: each use says how it is known.
  void assert_held() const TURNSTILE_ASSERT_CAPABILITY(this) {}

 private:
  friend class MutexLock;
  std::mutex mutex_;
};

// Holds a Mutex from its construction to its destruction, like
// std::unique_lock: it may be released early (unlock) and taken again
// (lock), and the destructor releases it only if held then. The analysis
// follows these within the function that declares the MutexLock; a
// function handed one by reference cannot unlock it visibly to the
// analysis (see TURNSTILE_NO_THREAD_SAFETY_ANALYSIS).
class TURNSTILE_SCOPED_CAPABILITY MutexLock {
 public:
  // Blocks until `mutex` is held. `mutex` must outlive this lock.
  explicit MutexLock(Mutex& mutex) TURNSTILE_ACQUIRE(mutex) : lock_(mutex.mutex_) {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // Releases the mutex if this lock holds it.
  ~MutexLock() TURNSTILE_RELEASE() = default;

  // Releases the mutex, which this lock holds.
  void unlock() TURNSTILE_RELEASE() { lock_.unlock(); }

  // Takes the mutex again after unlock(); blocks until it is held.
  void lock() TURNSTILE_ACQUIRE() { lock_.lock(); }

  // Whether this lock holds the mutex now (for run-time checks).
  bool owns_lock() const { return lock_.owns_lock(); }

  // The waits below hold the mutex when called and when they return; in
  // between, `condition` releases it while the thread sleeps, exactly as
  // std::condition_variable's members of the same names do (spurious
  // wake-ups included for the forms without a predicate).

  // Sleeps until `condition` is notified (or wakes spuriously).
  void wait(std::condition_variable& condition) { condition.wait(lock_); }

  // Sleeps until `done()` is true, re-checked on every wake-up.
  template <typename Predicate>
  void wait(std::condition_variable& condition, Predicate done) {
    condition.wait(lock_, std::move(done));
  }

  // Sleeps until `condition` is notified or `deadline` passes;
  // std::cv_status::timeout in the latter case.
  template <typename Clock, typename Duration>
  std::cv_status wait_until(std::condition_variable& condition,
                            const std::chrono::time_point<Clock, Duration>& deadline) {
    return condition.wait_until(lock_, deadline);
  }

  // Sleeps until `done()` is true or `deadline` passes; returns `done()`.
  template <typename Clock, typename Duration, typename Predicate>
  bool wait_until(std::condition_variable& condition, const std::chrono::time_point<Clock, Duration>& deadline,
                  Predicate done) {
    return condition.wait_until(lock_, deadline, std::move(done));
  }

  // Sleeps until `done()` is true or `timeout` has passed; returns `done()`.
  template <typename Rep, typename Period, typename Predicate>
  bool wait_for(std::condition_variable& condition, const std::chrono::duration<Rep, Period>& timeout, Predicate done) {
    return condition.wait_for(lock_, timeout, std::move(done));
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace turnstile

#endif  // TURNSTILE_MUTEX_H_
