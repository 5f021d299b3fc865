// locks/engine/acquire_wait.h
//
// The waiting loop every blocking acquire shares (locks and semaphores):
// try; if that fails and time is left, subscribe to the wake-up channel,
// then alternate "try again" and "sleep until a wake-up or the retry hint",
// until success or the deadline. A try that found every pooled connection
// busy (PoolExhaustedError) is made again within the deadline, without
// backoff and without counting toward the unreachable limit; the deadline
// passing then ends the wait as a timeout (false), never as that error. Subscribing before the second try is what
// makes it race-free: a release between a failed try and the sleep leaves
// its wake-up in the client's WakeupHub, so the sleep returns at once. A
// release wakes one waiter of the process, not all (locks/engine/wakeup_hub.h).
// When the channel is subscribed without a round trip (another local waiter
// has it, or it lingers from a recent wait, Backend::subscribe_if_confirmed),
// the waiter skips the unsubscribed try: a contended re-acquisition then
// costs one script call before it sleeps instead of two and a SUBSCRIBE.
// The SUBSCRIBE's confirmation is waited for until the deadline at most
// (Backend::subscribe_within): one not in by then is the wait's timeout.

#ifndef TURNSTILE_LOCKS_ENGINE_ACQUIRE_WAIT_H_
#define TURNSTILE_LOCKS_ENGINE_ACQUIRE_WAIT_H_

#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "locks/engine/event_log.h"
#include "locks/engine/metrics_recorder.h"
#include "locks/engine/task.h"
#include "locks/engine/wakeup_hub.h"
#include "turnstile/backend.h"
#include "turnstile/flavor.h"
#include "turnstile/runtime.h"

namespace turnstile::detail {

// The shortest sleep between two tries, so a retry hint of 0 ms (a lease in
// its last millisecond) cannot spin without letting time pass.
inline constexpr Duration kMinRetryDelay = std::chrono::milliseconds(1);
// After a transient failure (Redis unreachable, restarting, paused, failing
// over), tries are spaced by a delay that starts here and doubles up to
// kMaxTransientRetryDelay, with up to half of it drawn at random so that
// the waiters of a restarted server do not all come back at once.
inline constexpr Duration kMinTransientRetryDelay = std::chrono::milliseconds(10);
inline constexpr Duration kMaxTransientRetryDelay = std::chrono::milliseconds(1000);
// A bound on the rounds (try, then sleep) of one wait, far above any real
// one: every round sleeps at least kMinRetryDelay or ends the wait, so
// this is decades of them.
inline constexpr std::uint64_t kMaxWaitRounds = 1ULL << 40;

// What one try found: retry_after_ms nullopt if it succeeded, else how
// many ms the caller may sleep before trying again if no message comes
// (negative: until a message); and whether the shared channel's messages
// may announce the next release (locks/engine/wakeup_hub.h, fleet-wide wake-ups).
struct TryOutcome {
  // A try that says nothing of the shared channel (every flavor without
  // the wake registry): heeded.
  TryOutcome(std::optional<std::int64_t> retry_after_ms_in)  // NOLINT(google-explicit-constructor)
      : retry_after_ms(retry_after_ms_in) {}
  TryOutcome(std::optional<std::int64_t> retry_after_ms_in, WakeupHub::SharedChannel shared_in)
      : retry_after_ms(retry_after_ms_in), shared(shared_in) {}

  std::optional<std::int64_t> retry_after_ms;
  WakeupHub::SharedChannel shared = WakeupHub::SharedChannel::heeded;
  // For the `waiting` event: the holder's remaining lease in ms when the
  // retry hint is not it (negative: unknown), and the waiters ahead in a
  // fair queue.
  std::optional<std::int64_t> holder_lease_left_ms;
  std::optional<std::int64_t> queue_position;
  // The most the wait sleeps once the waiter is told to keep the near pace
  // (WakeupHub::Woken::by_pace), in ms; nullopt: such a message is ignored.
  std::optional<std::int64_t> near_retry_after_ms;
};
using TryOnce = std::function<TryOutcome()>;

// How a wait ends besides success.
struct WaitLimits {
  Instant deadline = kNoDeadline;
  // Cancellation: a stop requested ends the wait (as if its deadline had
  // passed) within one wake-up, from any thread.
  std::stop_token stop;
  // Transient failures of a try or of the subscription (is_transient) are
  // ridden out with backoff until the deadline, or until Redis stayed
  // unreachable this long without a single successful call; then the
  // failure is thrown. Zero: thrown at once.
  Duration unreachable_limit{};
};

// Who waits, for the client's waiter gauge and events
// (ClientCore::wait_subject). Null pointers: nothing counted or told.
struct WaitSubject {
  const EventLog* events = nullptr;
  MetricsRecorder* metrics = nullptr;
  std::string_view name;
  Flavor flavor = Flavor::reentrant;
};

// Whether `error` is a failure that may pass by itself: the connection
// (reset, refused, timed out), or a server that is loading, busy with a
// script, paused for a failover, or a replica not yet promoted.
bool is_transient(const std::exception_ptr& error);

// Whether `error` says the call never left this process (every pooled
// connection stayed busy: PoolExhaustedError), so it cannot have run.
bool never_sent(const std::exception_ptr& error);

// Throws InvalidArgumentError for a lease under 1 ms (a lock that expires
// as it is granted) or over kMaxLease.
void check_lease(const std::optional<Duration>& lease);

// Sleeps until `until` or a stop requested on `stop` (from any thread);
// false if it was stopped.
bool sleep_unless_stopped(Runtime& runtime, Instant until, const std::stop_token& stop);

// Returns true if `try_once` succeeded before the deadline, false if the
// deadline passed or a stop was requested first. Rethrows a non-transient
// failure of `try_once` at once, and a transient one when limits say so.
// `wake` says how `channel`'s messages wake waiters (locks/engine/wakeup_hub.h).
// `timing` (if given, outliving the wait) learns when the wait started and
// when the last release message woke it, for the client's metrics.
// `subject` is counted as a waiter from its first sleep to the end, and
// told each sleep after a failed try (`waiting`, with the try's
// holder_lease_left_ms, else its retry hint, as the holder's remaining
// lease, and its queue position) and each wake-up by a message (`woken`).
// Its sleeps block the caller or suspend the coroutine as `style` says
// (locks/engine/task.h); everything else is taken by value, so the task may
// outlive the caller's arguments.
Task<bool> acquire_with_wait(WaitStyle style, WakeupHub& hub, Runtime& runtime, std::string channel, WakeOptions wake,
                             WaitLimits limits, TryOnce try_once, AcquisitionTiming* timing = nullptr,
                             WaitSubject subject = {});

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_ENGINE_ACQUIRE_WAIT_H_
