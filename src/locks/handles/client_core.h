// locks/handles/client_core.h
//
// State shared by a Client and every lock it made: the backend, the runtime,
// the options, the client's UUID and its watchdog; and each lock's local
// record of which of this client's tasks hold it.

#ifndef TURNSTILE_LOCKS_HANDLES_CLIENT_CORE_H_
#define TURNSTILE_LOCKS_HANDLES_CLIENT_CORE_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <stop_token>
#include <string_view>

#include "locks/engine/acquire_wait.h"
#include "locks/engine/event_log.h"
#include "locks/engine/hold_record.h"
#include "locks/engine/metrics_recorder.h"
#include "locks/engine/wakeup_hub.h"
#include "locks/engine/watchdog.h"
#include "locks/handles/identity_writer.h"
#include "turnstile/backend.h"
#include "turnstile/client.h"
#include "locks/engine/lock_engine.h"
#include "turnstile/lock.h"
#include "turnstile/mutex.h"
#include "turnstile/runtime.h"

namespace turnstile::detail {

struct ClientCore {
  ClientCore(std::shared_ptr<Backend> backend_in, std::shared_ptr<Runtime> runtime_in, ClientOptions options_in);

  std::string owner_of_current_task() const;
  // A new owner id for one hold as a value (turnstile/hold.h):
  // "<uuid>:<n>", n unique per call, never a task's id.
  std::string next_hold_owner();
  void report_background_error(std::exception_ptr error) const noexcept;
  // A hold taken after the wait `timing` tells: counted and told.
  void acquired(std::string_view name, Flavor flavor, const AcquisitionTiming& timing) const;
  // Who waits at `name`, for acquire_with_wait (the waiter gauge, events).
  WaitSubject wait_subject(std::string_view name, Flavor flavor) const {
    return WaitSubject{.events = events.get(), .metrics = metrics.get(), .name = name, .flavor = flavor};
  }

  // The value of the holder identity side key for `owner`'s acquisition
  // now, armed with `lock_delay` (key_layout.h, holder_identity_value).
  std::string holder_identity(const std::string& owner, Duration lock_delay) const;
  // The lease argument (ms) of a script that arms `lease` for a holder
  // with `lock_delay` (watchdog.h, server_lease()). `lease` is at least a
  // millisecond.
  static std::string server_lease_ms_arg(Duration lease, Duration lock_delay);
  // The lock-delay of a handle made with `options` (LockOptions): its own,
  // else the client's. InvalidArgumentError out of [0, kMaxLockDelay].
  Duration lock_delay_of(const LockOptions& options) const;

  // What the client records (turnstile/metrics.h).
  std::shared_ptr<MetricsRecorder> metrics = std::make_shared<MetricsRecorder>();
  // What it tells (turnstile/events.h): made before anything that emits.
  std::shared_ptr<const EventLog> events;
  // The backend the user gave, and the one every lock calls: the same,
  // with each script call timed (locks/engine/measured_backend.h) and, with
  // ClientOptions::server_check, the server checked before the first
  // (locks/engine/server_checking_backend.h).
  std::shared_ptr<Backend> user_backend;
  std::shared_ptr<Backend> backend;
  std::shared_ptr<Runtime> runtime;
  ClientOptions options;
  std::string id;  // UUID
  // This process as holder identities name it: host, pid, command, label.
  HolderIdentity holder;
  // Writes its identities (holder_identity()): made from `holder` once.
  std::optional<IdentityWriter> identity_writer;
  std::shared_ptr<Watchdog> watchdog;
  // A server restart the backend finds loses every watched holding
  // (Watchdog::server_restarted); dropped by ~Client.
  RestartWatch restart_watch;
  // Server restarts the backend has found so far (restart_watch): a
  // restart that lost writes may have brought back holds this process had
  // released (LockEngine::settle_before_attempt).
  std::shared_ptr<std::atomic<std::uint64_t>> server_restarts = std::make_shared<std::atomic<std::uint64_t>>(0);
  // A plain reconnection is told to the event sink (`reconnected`, not
  // restarted); only while a sink listens at warning level. Dropped by
  // ~Client.
  RestartWatch reconnect_watch;
  // Who of this client's waiting tasks a release message wakes.
  std::unique_ptr<WakeupHub> wakeups;

  // The local state of the lock at `name` in primitive family `family`
  // ("lock"; semaphores will have their own), shared by every lock object of
  // this client for that name, so
  // that locking through one object and unlocking through another keeps the
  // watchdog right (ownership is per owner id, as in Redis).
  std::shared_ptr<struct LockCore> lock_core(std::shared_ptr<ClientCore> self, const std::string& name,
                                             const std::string& channel, std::string_view family);

  // The same registry for other primitives' local state (a semaphore's held
  // permits): the State of `family` at `name`, made by `make` when no live
  // handle has one. Each family has one State type.
  template <typename State>
  std::shared_ptr<State> shared_state(std::string_view family, const std::string& name,
                                      const std::function<std::shared_ptr<State>()>& make) {
    std::string registry_key(family);
    registry_key += ':';
    registry_key += name;
    MutexLock guard(locks_mutex_);
    if (auto existing = states_[registry_key].lock()) return std::static_pointer_cast<State>(existing);
    prune_expired(states_, states_pruned_size_);
    std::shared_ptr<State> state = make();
    states_[registry_key] = state;
    return state;
  }

 private:
  // Forgets the entries of `registry` whose objects are all gone, once it
  // has doubled since it was last pruned (`pruned_size`): it stays within
  // twice the live objects plus 64, and a new name costs amortized
  // O(log n), not a walk over every live lock (100k held locks).
  template <typename Registry>
  static void prune_expired(Registry& registry, std::size_t& pruned_size) {
    if (registry.size() < std::max<std::size_t>(kMinRegistryPrune, 2 * pruned_size)) return;
    std::erase_if(registry, [](const auto& entry) { return entry.second.expired(); });
    pruned_size = registry.size();
  }
  static constexpr std::size_t kMinRegistryPrune = 64;

  std::atomic<std::uint64_t> next_hold_id_{kFirstHoldId};
  Mutex locks_mutex_;
  // By "<family>:<name>".
  std::map<std::string, std::weak_ptr<LockCore>, std::less<>> locks_ TURNSTILE_GUARDED_BY(locks_mutex_);
  std::map<std::string, std::weak_ptr<void>, std::less<>> states_ TURNSTILE_GUARDED_BY(locks_mutex_);
  // The size of locks_ and states_ after their last pruning.
  std::size_t locks_pruned_size_ TURNSTILE_GUARDED_BY(locks_mutex_) = 0;
  std::size_t states_pruned_size_ TURNSTILE_GUARDED_BY(locks_mutex_) = 0;
};

// What this process knows about one task's hold on one lock.
struct Holding {
  // Requested at the instant the holding is lost (Lock::loss_token()): its
  // local deadline, a renewal or an unlock finding it gone, extend() finding
  // it gone, a force-unlock through this client. Made with the first hold;
  // copies share it.
  std::stop_source loss{std::nostopstate};
  Duration lease{};                       // re-armed on partial unlock
  Duration lock_delay{};                  // of the handle that took it last (LockOptions)
  std::optional<std::uint64_t> watch_id;  // the watchdog keeps its deadline (and renews it if `renewed`)
  bool renewed = false;                   // taken without a fixed lease at least once
  Instant sent_at{};                      // when the latest acquisition attempt was sent
  std::int64_t count = 0;                 // holds taken through this client (reentrant: > 1)
  // Of `count`, the holds the owner let go of whose release failed in
  // transit (0..count): no longer wanted, not renewed, they stay until a
  // retried unlock or the deadline ends them, or the owner's next
  // acquisition gives them back first (LockEngine::settle_before_attempt).
  std::int64_t unconfirmed_releases = 0;
  std::optional<std::int64_t> fencing_token;
  std::string token;  // token lock: the random value stored at the key
  // Set on the scratch record of an acquisition that may wait (a fair lock
  // queues its owner only then).
  bool may_wait = false;
  // Set on the scratch record once a failed attempt of this acquisition
  // found a well-formed lock at the key: its later tries (a herd's
  // retries) do not read the whole shape again (lib/lock_shape.lua,
  // shape_check_arg()).
  bool shape_seen = false;
  // Set on the scratch record before each attempt of a waiting
  // acquisition: other tasks of this client wait for the same lock, so a
  // success keeps the process in the wake registry (lua/lib/wake_registry.lua).
  bool others_waiting = false;
  ReplicaAck replica_ack;  // of the latest acquisition attempt
  // Direct handoff (fair lock, Handoff::direct): set on the scratch record
  // by the acquisition's first waiting attempt, its id (a grant names it)
  // and that attempt's send instant (a grant follows one of its tries, so
  // it never names an earlier instant).
  // A grant naming an instant before grant_floor is stale: raised to the
  // offer of every try answered "not acquired" (grant_offered), and to now
  // after a try that failed in transit was settled (its hold given back).
  std::string grant_acquisition;
  Instant grant_floor{};
  Instant grant_offered{};
  // Whether a grant taken would be renewed by the watchdog (no fixed
  // lease): it then needs two renewal periods left (grant_sent_at).
  bool grant_renewed = false;
};

// The acquisition scripts' shape argument: '1' reads the key's whole
// shape, '0' (a later try of an acquisition whose earlier one found a
// lock there) skips it where it cannot be wrong.
inline std::string shape_check_arg(const Holding& holding) { return holding.shape_seen ? "0" : "1"; }

// What one owner's attempts on one lock carry from one to the next, kept
// by whoever retries: a single-node acquisition's wait, or a composite
// lock's acquisition for each of its nodes. Every attempt is preceded by
// LockEngine::settle_before_attempt, the one place that gives back what
// earlier failures in transit may have left on the server.
struct AttemptSettlement {
  std::int64_t held_before = 0;  // the owner's holds before the next attempt
  // The previous attempt failed in transit: it may have run on the server
  // and taken a hold nobody records.
  bool uncertain = false;
};

// The first half of an acquisition a composite lock sends to all its nodes
// before it waits for any reply (Lock::prepare_acquire / finish_acquire).
struct PreparedAcquire {
  std::string owner;
  std::optional<Duration> requested_lease;
  Duration lease{};  // the requested one, or the watchdog's
  Holding scratch;   // what the attempt learns
  ScriptCall call;
};

// Likewise for a release (Lock::prepare_release / finish_release).
struct PreparedRelease {
  std::string owner;
  bool lost = false;               // the owner's holding was lost: NotOwnerError whatever Redis says
  Holding holding;                 // the local record, or a stand-in with the watchdog lease
  std::optional<ScriptCall> call;  // nullopt: nothing to send, not the owner
  // Set by finish_release(): the unlock script released the owner's only
  // hold, so Redis keeps nothing under the owner id (no stale hold given
  // back, no loss, no failure).
  bool left_nothing = false;
};

// Owners whose holding was lost while they believed it held, and how many
// unlocks they still owe it (a reentrant hold lost at depth n: n), so that
// each of those unlocks knows the hold was lost even if Redis still has a
// trace of it (the local deadline passes a margin before the server's):
// unlock() returns quietly, release_or_throw() throws NotOwnerError. Bounded:
// past kMaxLostOwners the oldest are forgotten (Redis decides for those).
class LostOwners {
 public:
  static constexpr std::size_t kMaxLostOwners = 1024;
  // `token`: what the holding's release needs besides the owner id (a token
  // lock's token; empty otherwise). `holds`: the unlocks owed (>= 1).
  void add(const std::string& owner, std::string token = {}, std::int64_t holds = 1);
  // If `owner` was lost: its token; one owed unlock is counted off (the
  // owner is forgotten with the last).
  std::optional<std::string> take(const std::string& owner);
  // Forgets `owner` whatever it still owes (it acquired again).
  void forget(const std::string& owner) { owners_.erase(owner); }
  bool contains(const std::string& owner) const { return owners_.contains(owner); }

 private:
  struct Lost {
    std::uint64_t order = 0;
    std::string token;
    std::int64_t holds = 1;
  };
  std::map<std::string, Lost, std::less<>> owners_;
  std::uint64_t next_ = 0;
};

inline constexpr std::size_t kMaxRestartsSettled = 1'024;

// Hold owner ids a LockCore keeps for reuse (LockCore::idle_hold_owners):
// as many as a pub/sub connection keeps channels lingering.
inline constexpr std::size_t kMaxIdleHoldOwners = kMaxLingeringChannels;

struct LockCore {
  std::shared_ptr<ClientCore> client;
  std::string name;                                                     // the lock's key
  std::string channel;                                                  // its wake-up channel
  Mutex mutex;                                                          // never held across a call
  std::map<std::string, Holding> holdings TURNSTILE_GUARDED_BY(mutex);  // by owner id
  // By owner id, ClientCore::server_restarts when its last attempt was
  // settled (LockEngine::settle_before_attempt); cleared beyond
  // kMaxRestartsSettled owners (each then checks once more).
  std::map<std::string, std::uint64_t> restarts_settled TURNSTILE_GUARDED_BY(mutex);
  LostOwners lost TURNSTILE_GUARDED_BY(mutex);
  LockLostHandler lost_handler TURNSTILE_GUARDED_BY(mutex);
  // Hold owner ids (ClientCore::next_hold_owner) whose hold was released
  // leaving nothing under them on the server, most recent last: a new hold
  // on this lock takes the latest, so the fair lock's wait channel (one
  // per owner, Redisson's) is the one its last waiter subscribed, still
  // lingering (kChannelLingerMs, backend.h), and a waiting acquisition
  // needs no second try to cover a subscription made after its first
  // (acquire_with_wait). At most kMaxIdleHoldOwners; the oldest go.
  std::deque<std::string> idle_hold_owners TURNSTILE_GUARDED_BY(mutex);
};

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_HANDLES_CLIENT_CORE_H_
