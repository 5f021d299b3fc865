// cli/holder_thread.h
//
// The thread that holds and later releases a Holdable (turnstile/flavor.h)
// for `turnstile run`.
// A lock's owner id names the acquiring thread, so acquire and release must
// happen on the same thread; running them off the main thread also keeps
// the main thread free to wait on signals while the acquisition waits.
//
//   HolderThread holder(held, wait, done);     // starts acquiring
//   ... poll(done.fd()) ...                    // signalled when acquire returned
//   std::optional<Hold> hold = holder.acquired();   // rethrows its error
//   holder.release();                          // rethrows the release's error
//
// If the process must leave while the acquisition still waits (a signal),
// stop() cancels it: acquire() then returns without the lock, having left
// nothing behind (a fair-lock queue entry is withdrawn), and `done` is
// notified as usual. An attempt in flight finishes first (bounded by the
// command timeout).

#ifndef TURNSTILE_CLI_HOLDER_THREAD_H_
#define TURNSTILE_CLI_HOLDER_THREAD_H_

#include <future>
#include <optional>
#include <stop_token>
#include <thread>

#include "cli/signals.h"
#include "turnstile/flavor.h"

namespace turnstile::cli {

class HolderThread {
 public:
  // Starts holding `held` (waiting up to `wait`; nullopt: forever; the
  // watchdog keeps the hold) and notifies `done` when try_hold() returned
  // or threw.
  HolderThread(Holdable& held, std::optional<Duration> wait, WakeFd& done);
  // Releases nothing: a holding not released by release() is skipped (it
  // was lost). Joins the thread; the acquisition must have finished.
  ~HolderThread();
  HolderThread(const HolderThread&) = delete;
  HolderThread& operator=(const HolderThread&) = delete;

  // After `done` was notified: what try_hold() returned; rethrows its error.
  std::optional<Hold> acquired();
  // Cancels a waiting acquisition (see the file comment). Any thread.
  void stop() { stop_.request_stop(); }
  // Releases on the holder thread and waits; rethrows the release's error.
  // Only after acquired() returned a holding; at most once.
  void release();

 private:
  void finish(bool do_release);

  std::promise<std::optional<Hold>> acquire_result_;
  std::future<std::optional<Hold>> acquire_future_;
  std::promise<bool> release_request_;  // true: release; false: skip
  std::promise<void> release_result_;
  std::future<void> release_future_;
  bool finished_ = false;
  std::stop_source stop_;
  std::thread thread_;
};

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_HOLDER_THREAD_H_
