// locks/engine/wakeup_hub.h
//
// Per-client, per-channel wake-up accounting: a release wakes one local
// waiter, not all of them (Redisson's RedissonLockEntry and its latch, made
// loss-free). Without it every waiting task of a process subscribes its own
// handler, every release message wakes all of them, and Redis runs one
// acquire script per waiter per handoff (issue #21: a thundering herd).
//
// One ChannelQueue per channel that has waiters, holding one subscription
// for all of them. Each message adds wake-ups ("credits"): one for a lock's
// unlock message "0", every waiter for Redisson's "1" (read unlock) and for
// a resubscription (messages may have been lost), and for a semaphore's
// message (the available count after the change) up to that count; on a
// read-write lock's channel one per message, and a reader that gets in
// wakes the other sleeping readers (WakeRule::read_write). A credit goes
// to the longest-registered sleeping waiter, which then tries.
//
// The rules that make it loss-free. Every credit carries the epoch of the
// message it came from (messages are numbered per channel); a waiter
// records the epoch at the start of each try. A try that started after a
// message was received ran after that release on the server, so it has seen
// it: a credit is only ever handed to a waiter whose latest try started
// before the credit's epoch ("eligible"), and is dropped when no registered
// waiter is eligible any more. In between it is kept for an eligible waiter
// that is trying right now: if its try fails, it finds the credit when it
// goes back to sleep and tries again at once (the message raced its try).
//
//   * A woken waiter that leaves without a definitive try (its deadline
//     passed, it was stopped, its try threw) passes its credit on.
//   * A woken waiter whose try fails keeps nothing: the lock is held, and
//     its holder's release publishes the next message. Passing the credit
//     on would wake every waiter in turn, the herd again, one by one.
//     Except with `pass_on_failure` (a semaphore waiter for n > 1 permits:
//     fewer than n may be there, enough for a waiter wanting fewer): its
//     credit goes on, with the epoch of its own try, so each waiter gets it
//     at most once and the chain ends.
//   * A waiter holding a credit it has not used yet takes no second one.
//   * Nothing here replaces a waiter's own timer: it still sleeps at most
//     until the retry hint of its last try (the holder's remaining lease),
//     so a lost message or a crashed holder strands nobody.
//
// Fleet-wide wake-ups (a name with turnstile's wake registry: reentrant,
// fenced, token, both semaphores, read-write; lua/lib/wake_registry.lua). The queue
// also listens on its process's own channel, where a release wakes one
// registered process of the whole fleet (a semaphore's: one per permit;
// the message is how many of its waiters to wake). Every release still
// publishes on the shared channel (Redisson's waiters listen there), so a
// lock's shared-channel message wakes nobody here unless the latest
// finished try of the process found a holder that may be foreign (not
// marked as a turnstile holder that wakes the registry: its release
// publishes on the shared channel only; before any try finished, a holder
// is unknown), and a semaphore's count only if no registry-waking change
// wrote it (WakeRule::permit_count, unsigned: a release by Redisson or by a
// turnstile client without the registry), from the first try on. Own-channel
// messages always wake. The shared channel is subscribed only while the
// latest try heeds it, always for a semaphore (a try that finds it
// needed, unsubscribed, is followed by another once it is:
// acquire_with_wait), and never by a flavor whose tries never
// heed it (the token lock: WakeOptions::subscribe_shared), so a fleet of
// turnstile holders gets no release's "0" delivered there.
//
// Works the same on every backend and runtime: only the backend's
// subscriptions and the runtime's Events and timers are used (through
// AsyncSignal, so a sleep may block its caller or suspend a coroutine).
// Lock order: hub, then a queue; a handler (called under the backend's
// pub/sub lock) takes only its queue. The backend is never called with
// either held.

#ifndef TURNSTILE_LOCKS_ENGINE_WAKEUP_HUB_H_
#define TURNSTILE_LOCKS_ENGINE_WAKEUP_HUB_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "locks/engine/async_signal.h"
#include "locks/engine/task.h"
#include "turnstile/backend.h"
#include "turnstile/mutex.h"
#include "turnstile/runtime.h"

namespace turnstile::detail {

// How a channel's messages turn into wake-ups.
enum class WakeRule : std::uint8_t {
  // Lock channels (Redisson's LockPubSub): "1" wakes every waiter, any
  // other message one.
  lock,
  // Semaphore channels (Redisson's SemaphorePubSub): the message is the
  // available count after the change; it wakes up to that many waiters
  // (none for a count <= 0, every one for an unreadable message).
  // turnstile's own scripts with the registry write a positive count as
  // "+N" (kTurnstileCountSign; Redisson reads it as N). Any client may
  // release permits it never took (Redisson's RSemaphore.release(),
  // addPermits), and only the shared channel tells: with an own channel,
  // the shared channel stays subscribed, and a count without the sign (a
  // release that woke no registry) wakes whatever the latest try found.
  permit_count,
  // A read-write lock's channel (Redisson's "0" from a read release, "1"
  // from a write release, meaning "readers come in together"): every
  // message wakes one waiter, and a reader whose try succeeds wakes every
  // other sleeping reader (the lock is in read mode: they all get in). A
  // write release wakes one writer or all readers, not everyone: the
  // herd of writers that "1" woke is gone, while the message on the wire
  // stays Redisson's. On the process's own channel (fleet-wide wake-ups,
  // lua/lib/read_write_wake.lua) "w" wakes one writer and "r" every
  // reader (anyone when none of that kind waits), "s" every reader only:
  // one reader first, whose success wakes the others.
  read_write,
};

struct WakeOptions {
  WakeRule rule = WakeRule::lock;
  // The process's own wake channel (fleet-wide wake-ups), or empty. Every
  // waiter of a channel names the same one.
  std::string own_channel;
  // With an own channel: whether the shared channel is subscribed at all.
  // False where no try ever heeds it (the token lock: every holder's
  // release wakes a registered process), so that each release's "0" there
  // is not delivered to every process with a waiter, only to ignore it.
  // Every waiter of a channel says the same.
  bool subscribe_shared = true;
  // A failed try after a wake-up passes it on (see the overview).
  bool pass_on_failure = false;
  // A reader of a read-write lock (WakeRule::read_write): readers share.
  bool shared = false;
  // Direct handoff to a registered process (reentrant lock,
  // lua/lib/wake_registry.lua): this waiter's acquisition id, or empty. A
  // grant message naming it wakes this waiter alone and is kept for it
  // (take_grant_for); one naming no waiter of a queue whose waiters have
  // ids wakes nobody (its acquisition has ended: its give-up gives the
  // grant back). Per waiter: waiters of a channel may differ.
  std::string grant_id;
};

// Direct handoff (fair lock, lua/lib/fair_handoff.lua): a message on a
// waiter's own channel that starts so carries a grant, "<acquisition id>:
// <send instant>" after it; it wakes as any message does, and the woken
// waiter takes it (take_grant) instead of trying.
inline constexpr std::string_view kGrantMessagePrefix = "turnstile:grant:";

// Near and far fair waiters (lua/lib/fair_queue.lua): the message on a
// waiter's own channel that tells it it moved into the first places of the
// queue, so it must keep alive at the near pace from now on. It wakes no
// try: a sleeping waiter returns Woken::by_pace and sleeps again, no later
// than its near retry interval.
inline constexpr std::string_view kNearMessage = "turnstile:near";

// A semaphore count published by turnstile's own scripts with the
// registry starts so ("+3"; lua/lib/wake_registry.lua, tell_count):
// Redisson's waiters read it as the count (Java's Long.valueOf takes the
// sign), turnstile's know it for a release that woke registered processes
// on their own channels.
inline constexpr char kTurnstileCountSign = '+';

class WakeupHub {
 public:
  // `max_waiters`: the most waiters registered at once, all channels
  // together (ClientOptions::max_waiting); join() refuses one more.
  WakeupHub(Backend& backend, Runtime& runtime, std::size_t max_waiters)
      : backend_(backend), runtime_(runtime), max_waiters_(max_waiters) {}
  WakeupHub(const WakeupHub&) = delete;
  WakeupHub& operator=(const WakeupHub&) = delete;
  // Every Waiter must be gone.
  ~WakeupHub();

  class Waiter;

  // Whether join() applies the bound on waiters: a try that cannot wait
  // (its deadline passed) is never refused.
  enum class Admission : std::uint8_t { bounded, unbounded };

  // Registers a waiter on `channel`; it subscribes nothing yet. Every
  // waiter of a channel must use the same rule. Throws TooManyWaitersError
  // when bounded and max_waiters are registered already.
  Waiter join(std::string_view channel, WakeOptions options, Admission admission = Admission::bounded);

  // How a sleep ended. by_pace: kNearMessage came, which is no wake-up
  // (no credit): the caller sleeps on, to a nearer time.
  enum class Woken : std::uint8_t { by_message, by_timer, by_stop, by_pace };

  // Whether the shared channel's messages wake anyone (a queue with an own
  // channel): what a finished try found.
  enum class SharedChannel : std::uint8_t {
    heeded,   // the holder may be foreign (or is unknown): its release
              // publishes on the shared channel only
    ignored,  // a turnstile holder (or this process): its release wakes a
              // registered process on its own channel
  };

  // Counters, for tests: credits handed to sleepers, credits passed on.
  struct Stats {
    std::uint64_t messages = 0;
    std::uint64_t credits_given = 0;
    std::uint64_t credits_passed_on = 0;
    std::uint64_t credits_dropped = 0;
  };
  Stats stats() const;
  // Channels with registered waiters now.
  std::size_t channel_count() const;
  // Waiters on `channel` now that may wait (0 if none). A try that joined
  // with its deadline passed (Admission::unbounded) is not counted: it
  // never registers its process in the wake registry, so it neither keeps
  // a registration for others nor leaves one (wake-up property, seed 1430).
  std::size_t waiting_on(std::string_view channel) const;

  // A leave of the wake registry (lua/wake_registry_leave.lua) under way
  // for `channel`'s process, its last waiter gone: while a ticket lives, a
  // waiter joining the channel holds its first try back (acquire_with_wait),
  // since the leave, run after that try, would remove the registration the
  // try made and no release would pick the process.
  class LeaveTicket {
   public:
    LeaveTicket(LeaveTicket&& other) noexcept
        : hub_(std::exchange(other.hub_, nullptr)), channel_(std::move(other.channel_)) {}
    LeaveTicket& operator=(LeaveTicket&&) = delete;
    LeaveTicket(const LeaveTicket&) = delete;
    LeaveTicket& operator=(const LeaveTicket&) = delete;
    ~LeaveTicket();

   private:
    friend class WakeupHub;
    LeaveTicket(WakeupHub& hub, std::string channel) : hub_(&hub), channel_(std::move(channel)) {}
    WakeupHub* hub_;
    std::string channel_;
  };
  // A ticket if `channel` has no waiter that may wait now (atomically with
  // join()), else nullopt: a waiter that came meanwhile keeps the
  // registration (and leaves it in turn). A try that cannot wait would
  // never leave it: it does not count (waiting_on()).
  std::optional<LeaveTicket> begin_leave_if_last(std::string_view channel);
  // Whether a LeaveTicket of `channel` lives.
  bool leave_in_flight(std::string_view channel) const;

  // A waiter of `channel` that had registered its process gave up without
  // leaving the wake registry, since others of the process still waited
  // (leave_wake_registry). They settle it: the last one to give up leaves;
  // one that succeeds leaves if none is left (take_skipped_leave()). Its
  // success may have forgotten the process before the one that gave up
  // registered it (the token lock, seed 3179). Cleared by
  // begin_leave_if_last() when it gives a ticket.
  void note_skipped_leave(std::string_view channel);
  // Whether a leave of `channel` was skipped since the last ticket; clears it.
  bool take_skipped_leave(std::string_view channel);

  // Every waiter of `channel` tries again, as after a resubscription: a
  // semaphore's success sent with "others" '0' forgot the process in the
  // wake registry (lua/lib/wake_registry.lua, after_success), and a
  // sibling that joined meanwhile may have registered before that ran
  // (wanting more permits, it failed where this one got in). Its retry
  // registers it again. Nothing if the channel has no waiter.
  void wake_all(std::string_view channel);
  // One more waiter of `channel` tries, as after an own-channel "1",
  // unless one is woken already (a credit pending, handed or being used):
  // a semaphore's success that left permits free while others of this
  // process wait. The release that woke it forgot the process in the wake
  // registry until this success registered it again; a release in between
  // told only the shared channel, which the process may ignore. A woken
  // sibling's own success passes it on in turn.
  void wake_one_unless_waking(std::string_view channel);
  // The latest grant received on `channel` (what follows
  // kGrantMessagePrefix) since it was last taken, while it has waiters;
  // nullopt if none.
  std::optional<std::string> take_grant(std::string_view channel);
  // The grant received on `channel` for the waiter whose grant_id is
  // `grant_id` (what follows kGrantMessagePrefix), taken; nullopt if none.
  std::optional<std::string> take_grant_for(std::string_view channel, std::string_view grant_id);

 private:
  struct Queue;
  struct WaiterState;

  void leave(const std::shared_ptr<Queue>& queue, WaiterState& state);
  // The queue of `channel`, or null.
  std::shared_ptr<Queue> find_queue(std::string_view channel) const;

  Backend& backend_;
  Runtime& runtime_;
  const std::size_t max_waiters_;
  mutable Mutex mutex_;
  std::map<std::string, std::shared_ptr<Queue>, std::less<>> queues_ TURNSTILE_GUARDED_BY(mutex_);
  std::map<std::string, int, std::less<>> leaving_ TURNSTILE_GUARDED_BY(mutex_);  // LeaveTickets alive, by channel
  // Channels with a skipped leave (note_skipped_leave); at most one entry
  // per channel, cleared by the channel's next leave or success.
  std::set<std::string, std::less<>> skipped_leaves_ TURNSTILE_GUARDED_BY(mutex_);
  std::size_t waiters_ TURNSTILE_GUARDED_BY(mutex_) = 0;  // registered, all queues together
};

// One waiting acquisition's membership of its channel's queue. Used by one
// task at a time; leaving (destruction) passes on a credit it holds unused.
class WakeupHub::Waiter {
 public:
  Waiter(Waiter&&) noexcept;
  Waiter& operator=(Waiter&&) = delete;
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;
  ~Waiter();

  // Whether the channel's subscription (and its own channel's, if any) is
  // confirmed (by this waiter or another), so a try starting now cannot
  // miss a release after it.
  bool subscribed() const;
  // Subscribes if that needs no round trip (Backend::subscribe_if_confirmed);
  // returns subscribed().
  bool subscribe_if_confirmed();
  // Subscribes (a round trip unless already subscribed), each channel's
  // confirmation waited for until `deadline` at most
  // (Backend::subscribe_within). Throws what Backend::subscribe throws.
  void subscribe(Instant deadline = kNoDeadline);

  // Around each try: begin_try() before sending it; finish_try() once its
  // answer is in (not after a failure in transit: the credit stays owed).
  // A shared waiter's success (WakeRule::read_write) wakes every sleeping
  // shared waiter of its channel. `shared`: whether the shared channel's
  // messages wake this queue from now on (only with an own channel).
  void begin_try();
  void finish_try(bool acquired, SharedChannel shared = SharedChannel::heeded);

  // Sleeps until a credit, `until`, or a stop requested on `stop`, as
  // `style` says (locks/engine/task.h: blocking the caller, or suspended with no
  // thread). Returns at once with a credit already waiting.
  Task<Woken> sleep(WaitStyle style, Instant until, std::stop_token stop);

 private:
  friend class WakeupHub;
  // How the sleep ends if it ends now (under the queue's lock), or nullopt.
  std::optional<Woken> woken_now(Instant until, const std::stop_token& stop);
  Waiter(WakeupHub& hub, std::shared_ptr<Queue> queue, std::unique_ptr<WaiterState> state);

  WakeupHub* hub_;
  std::shared_ptr<Queue> queue_;
  std::unique_ptr<WaiterState> state_;
};

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_ENGINE_WAKEUP_HUB_H_
