// locks/engine/lock_engine.h
//
// The machinery behind every lock handle of lock.h, fair_lock.h and
// read_write_lock.h (the public Lock is a thin handle on a LockEngine).
// LockEngine does what every flavor shares: validating durations, waiting,
// the local record of holdings, watchdog registration, unlock semantics,
// queries and the asynchronous forms. Each flavor is a subclass that
// supplies the hooks below (lock_flavors.h): which script call an attempt,
// a release, a status query or a renewal makes, and what its reply means.
// The engine sends the calls; a composite lock (multi_lock.cpp) sends every
// node's call before it waits for any reply, through NodeAccess.

#ifndef TURNSTILE_LOCKS_ENGINE_LOCK_ENGINE_H_
#define TURNSTILE_LOCKS_ENGINE_LOCK_ENGINE_H_

#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "locks/engine/task.h"
#include "locks/engine/wakeup_hub.h"
#include "turnstile/backend.h"
#include "turnstile/flavor.h"
#include "turnstile/future.h"
#include "turnstile/hold.h"
#include "turnstile/key_layout.h"
#include "turnstile/reply.h"
#include "turnstile/runtime.h"
#include "turnstile/script.h"

namespace turnstile::detail {

struct ClientCore;
struct LockCore;
struct Holding;
struct NodeAccess;
class EngineHold;
struct PreparedAcquire;
struct PreparedRelease;
struct AttemptSettlement;

// What a flavor's call reserves for its keys and arguments (the most any
// uncontended call carries, a fair lock's acquire with its grant offer:
// 7 keys, 13 arguments), so that adding the optional ones after the first
// never reallocates.
inline constexpr std::size_t kCallKeysReserved = 8;
inline constexpr std::size_t kCallArgsReserved = 16;

// A call's keys or arguments: reserved to `capacity`, each part moved in
// when it is a temporary (an initializer list copies every string, so a
// temporary was made and then copied).
template <typename... Parts>
std::vector<std::string> call_strings(std::size_t capacity, Parts&&... parts) {
  std::vector<std::string> strings;
  strings.reserve(std::max(capacity, sizeof...(Parts)));
  (strings.emplace_back(std::forward<Parts>(parts)), ...);
  return strings;
}

// One script call, described rather than made: the flavor hooks build them,
// and the engine sends them (one at a time, or a composite lock's attempt
// to all its nodes at once).
struct ScriptCall {
  // Made from its script, keys and arguments (a constructor, not an
  // aggregate: every call site names those three and leaves the rest to
  // their defaults, which clang's -Wmissing-field-initializers would flag).
  ScriptCall() = default;
  ScriptCall(const Script* script_to_run, std::vector<std::string> call_keys, std::vector<std::string> call_args)
      : script(script_to_run), keys(std::move(call_keys)), args(std::move(call_args)) {}

  const Script* script = nullptr;
  std::vector<std::string> keys;
  std::vector<std::string> args;
  // A latched unlock's: the index in `args` of its latch lifetime, which
  // a resend passes unlike the first send (latched_unlock.h).
  std::optional<std::size_t> latch_lifetime_arg;
};

// What one unlock script call did.
enum class ReleaseResult { released, still_held, not_owner };

class LockEngine : public std::enable_shared_from_this<LockEngine> {
 public:
  // What one acquisition attempt found.
  struct Attempt {
    bool acquired = false;
    // When not acquired: ms until the holder's lease runs out (a hint for
    // how long to sleep); negative if unknown.
    std::int64_t retry_after_ms = -1;
    // When acquired on a fenced lock: the fencing token.
    std::optional<std::int64_t> fencing_token;
    // When not acquired: whether the holder may be foreign (not marked as a
    // turnstile holder that wakes the registry), so its release may publish on the
    // shared channel only (locks/engine/wakeup_hub.h, fleet-wide wake-ups).
    bool holder_may_be_foreign = true;
    // When not acquired: the holder's remaining lease in ms if the retry
    // hint is not it (a fair waiter retries sooner); negative if unknown.
    std::optional<std::int64_t> holder_lease_left_ms;
    // When not acquired: the retry interval once told to keep the near pace
    // (kNearMessage: a far fair waiter that moved up); nullopt: never told.
    std::optional<std::int64_t> near_retry_after_ms;
  };
  // What a status query found.
  struct Status {
    bool locked = false;
    std::int64_t hold_count = 0;  // of the queried owner
    std::int64_t pttl_ms = -2;
  };

  // `layout`: the flavor's keys at the prefixed name (key_layout()).
  // `family` keeps the local records of locks sharing a name apart (the
  // two halves of a read-write lock).
  // `options`: what the handle sets for itself (its lock-delay; checked).
  LockEngine(std::shared_ptr<ClientCore> client, KeyLayout layout, const LockOptions& options,
             std::string_view family = "lock");
  LockEngine(const LockEngine&) = delete;
  LockEngine& operator=(const LockEngine&) = delete;
  virtual ~LockEngine();

  virtual Flavor flavor() const = 0;
  const std::string& name() const;
  const KeyLayout& layout() const { return layout_; }
  // This handle's lock-delay (LockOptions::lock_delay, else the client's).
  Duration lock_delay() const { return lock_delay_; }

  // The operations of the public Lock (lock.h has their contracts), for the
  // calling task.
  void lock(std::optional<Duration> lease);
  bool try_lock(std::optional<Duration> lease, Instant deadline, std::stop_token stop);
  // Lock::unlock(): never throws for a hold that was lost or cannot be
  // released now (lock.h, "Releasing").
  void unlock();
  void extend(Duration lease);
  bool force_unlock();
  bool is_locked();
  bool is_held_by_current_thread();
  std::int64_t hold_count();
  std::optional<std::chrono::milliseconds> remaining_lease();
  Future<void> lock_async(std::optional<Duration> lease);
  Future<bool> try_lock_async(const AcquireOptions& options);
  Future<void> unlock_async();
  std::optional<std::int64_t> fencing_token();
  std::stop_token loss_token();
  // Holdable's holds as values (flavor.h, turnstile/hold.h).
  LockHold try_acquire_hold(const AcquireOptions& options);
  Future<LockHold> try_acquire_hold_async(const AcquireOptions& options);
  void set_lost_handler(LockLostHandler handler);
  std::string current_owner() const;
  void report_background_error(std::exception_ptr error) const noexcept;

  ClientCore& client() const;
  LockCore& core() const { return *core_; }

 protected:
  // An acquisition script's lease argument for `lease`, with this handle's
  // lock-delay (a release or an extension re-arms with the holding's).
  std::string server_lease_ms_arg(Duration lease) const;
  // The holder identity value for `owner`, naming this handle's lock-delay.
  std::string holder_identity(const std::string& owner) const;

  // Flavor hooks. `holding` is the caller's local record (created empty
  // before the first attempt of an acquisition).
  // The acquisition script for `owner`; may record in `holding` what the
  // attempt needs later (a token lock's random token).
  virtual ScriptCall attempt_call(const std::string& owner, Duration lease, Holding& holding) = 0;
  // What the acquisition script's reply means.
  virtual Attempt attempt_result(const Reply& reply, const Holding& holding) = 0;
  // The unlock script for `owner`, or nullopt if `holding` shows there is
  // nothing of `owner`'s to release (not_owner without a call).
  virtual std::optional<ScriptCall> release_call(const std::string& owner, const Holding& holding) = 0;
  // What the unlock script's reply means.
  virtual ReleaseResult release_result(const Reply& reply) = 0;
  // Whether the unlock script may be sent again after a lost reply without
  // releasing twice (it remembers its first result in a latch key).
  virtual bool release_retriable() const = 0;
  virtual Status status(const std::string& owner, const Holding* holding) = 0;
  // Type of the lock's key ('hash', 'string') for force unlock.
  virtual std::string_view key_type() const = 0;
  // The watchdog script and the value it checks (owner id or token).
  virtual const Script& renew_script() const = 0;
  virtual std::string renew_holder(const std::string& owner, const Holding& holding) const = 0;
  virtual bool reentrant() const = 0;
  // The channel a waiting `owner` listens on. Default: the lock's channel
  // (every waiter hears every release); a fair lock gives each waiter its own.
  virtual std::string wait_channel(const std::string& owner) const;
  // How the client's WakeupHub turns that channel's messages into wake-ups
  // for a waiting `owner`. Default: a lock's ("0" wakes one), with the
  // process's own wake channel where the layout has a wake registry.
  virtual WakeOptions wake_options() const;
  // Whether releases wake one waiter of the fleet (ClientOptions::wake_scope
  // fleet, and a layout with a wake registry).
  bool fleet_wakeups() const;
  // Appends the wake registry (when fleet_wakeups()) to an acquisition script's call (keys: the
  // registry last; args: the process's wake channel, the wall clock in ms,
  // whether the caller waits after a failure, whether others of this
  // client still wait after a success): lua/lib/wake_registry.lua.
  void add_wake_registry(ScriptCall& call, const Holding& holding) const;
  // Appends the wake registry's key to a release script's call.
  void add_wake_registry_key(ScriptCall& call) const;
  // Called when an acquisition that could wait ends without the lock (its
  // wait ran out, or an attempt threw): a flavor with a wait queue removes
  // `owner` from it (and gives back a grant to `scratch`'s acquisition it
  // never took). Default: with a wake registry, the process's last waiter
  // forgets the process's registration; else nothing. Errors go to the
  // background handler.
  virtual void abandon(const std::string& owner, const Holding& scratch);
  // Direct handoff: before each try of a waiting acquisition, whether a
  // release granted the lock to it by a message its waiter received; the
  // acquired Attempt then (`scratch.sent_at` set to the instant its lease
  // is timed from), and no try is made. Default: never.
  virtual std::optional<Attempt> take_grant(const std::string& owner, Duration lease, Holding& scratch);
  // Direct handoff by process (the reentrant lock's, fleet-wide wake-ups):
  // whether a waiting acquisition gets an id before its first try (its
  // grant id in the WakeupHub, its offers name it). Default: no.
  virtual bool takes_process_grants() const { return false; }
  // take_grant()'s common part: whether `grant`, a grant message's
  // "<acquisition id>:<send instant>", is one for `scratch`'s acquisition
  // its waiter may take without a try; the acquired Attempt then, with
  // `scratch.sent_at` set to that send instant (the lease is timed from
  // it). A stale, foreign or unreadable grant, one with less than a
  // renewal period of lease left, or any grant with replica sync is left to
  // the try, which takes a grant of its acquisition from the server.
  std::optional<Attempt> accept_grant(const std::optional<std::string>& grant, Duration lease, Holding& scratch) const;
  // For the `waiting` event only (asked only while the client's event
  // sink listens at info level): how many waiters are ahead of `owner` in
  // the flavor's wait queue, after an attempt that did not acquire.
  // Default: nullopt (no queue).
  virtual std::optional<std::int64_t> queue_position_for_event(const std::string& owner);
  // force_unlock's one script call; returns whether a lock was deleted.
  // Default: the generic delete-and-publish script.
  virtual bool force_delete();

 private:
  // Composite locks (multi_lock.h) act on their node locks for a given owner.
  friend struct NodeAccess;
  // A hold as a value acts for its own owner id.
  friend class EngineHold;

  // Whether `owner`'s holding is recorded and its local deadline has not
  // passed (no call to Redis).
  bool believed_held(const std::string& owner);
  void extend_for(const std::string& owner, Duration lease);

  bool acquire(const std::string& owner, std::optional<Duration> lease, Instant deadline, std::stop_token stop);
  // acquire() as a task whose waits are `style`'s (locks/engine/task.h): the
  // asynchronous forms start it suspending, on the engine threads, and
  // keep the engine alive until it ends.
  Task<bool> acquire_task(WaitStyle style, std::string owner, std::optional<Duration> lease, Instant deadline,
                          std::stop_token stop);
  // Before every acquisition attempt of `owner`, on every path (acquire()'s
  // tries, a composite lock's attempts on this node): gives back the holds
  // the owner let go of whose release failed in transit (those Redis still
  // has: settle_unconfirmed_releases), then a hold beyond
  // `settlement.held_before` that the previous attempt, failed in transit,
  // may have taken (undo_phantom_hold); sets `settlement.held_before` to the
  // holds the owner still has. Without it an acquisition would stack on
  // those stale holds as a reentrant hold, re-arm their renewal and keep
  // the lock one unlock short for as long as the process lives. Throws what
  // a release or a status query throws (the caller counts it as a failed
  // attempt; the settlement is kept for the next one).
  void settle_before_attempt(const std::string& owner, Duration lease, AttemptSettlement& settlement);
  // After an attempt that threw `error`: whether it may have run on the
  // server is remembered for the next settle_before_attempt().
  static void note_failed_attempt(AttemptSettlement& settlement, const std::exception_ptr& error);
  // After an attempt that failed in transit: gives back a hold of `owner`
  // beyond `held_before` that the attempt may have taken on the server.
  // Also the holds a server restart brought back (restart_since_settled).
  // At most kMaxStaleHolds releases.
  void undo_phantom_hold(const std::string& owner, std::int64_t held_before, Duration lease);
  static constexpr std::int64_t kMaxStaleHolds = 64;
  // Releases holds of `owner` the client does not believe it has, one call
  // each, at most `at_most` (and kMaxStaleHolds), until the owner has none
  // left. Returns the last release's result. Throws what a release throws.
  ReleaseResult release_stale_holds(const std::string& owner, Duration lease, std::int64_t at_most);
  // An unlock of the last hold the owner believed answered "still held":
  // release_stale_holds(), a transient failure reported as a background
  // error (the lease ends those holds).
  void give_back_stale_holds(const std::string& owner, Duration lease);
  // Whether the backend found a server restart since `owner`'s last
  // attempt on this lock was settled; records that it is now.
  bool restart_since_settled(const std::string& owner);
  // Gives back the holds `owner` let go of whose release failed in transit
  // (see settle_before_attempt). Returns the holds `owner` still has (0 if
  // none); throws what a release throws.
  std::int64_t settle_unconfirmed_releases(const std::string& owner);
  void release_or_throw(const std::string& owner);
  // unlock()'s release: a loss goes to the lost handler, a failure to the
  // background error handler; throws only when `owner` holds nothing here.
  void release_quietly(const std::string& owner);
  // Both: a loss found by the release is told (lost handler, loss token)
  // the one way every loss is; then quietly returns, strictly throws
  // NotOwnerError (and any failure).
  // Returns whether the release left nothing under `owner` on the server
  // (PreparedRelease::left_nothing).
  enum class ReleaseMode { quietly, strictly };
  [[nodiscard]] bool release_owner(const std::string& owner, ReleaseMode mode);
  // A LockHold's owner id: one a released hold of this lock left idle
  // (LockCore::idle_hold_owners), else a new one.
  std::string take_hold_owner();
  // A LockHold's release: release_owner(), and its owner id kept for reuse
  // when the release left nothing under it.
  void release_hold(const std::string& owner, ReleaseMode mode);
  // acquire() with a past deadline, in two halves, for a composite lock that
  // sends every node's call before it waits for any reply. prepare_acquire()
  // throws what acquire() throws before its first call; finish_acquire()
  // takes the call's outcome and returns whether the lock is now held
  // (recorded, watched), throwing what acquire() would.
  PreparedAcquire prepare_acquire(const std::string& owner, std::optional<Duration> lease);
  bool finish_acquire(PreparedAcquire& prepared, PendingReply& sent);
  // release_or_throw() in two halves, likewise; finish_release() returns
  // false where release_or_throw() throws NotOwnerError. `sent` is
  // prepared.call already sent, or null to send it now (always null when
  // there is no call).
  PreparedRelease prepare_release(const std::string& owner);
  bool finish_release(PreparedRelease& prepared, std::unique_ptr<PendingReply> sent);

  // One acquisition attempt, sent through Backend::eval_synced_within() (an
  // acquisition no replica acknowledged, or whose AOF fsync was not
  // confirmed, is undone by acquire(): see
  // undo_unreplicated) and answered. A wait with a deadline (`deadline`
  // after now, not kNoDeadline) bounds the call's wait for a pooled
  // connection by what is left of it (EvalOptions::send_within); a single
  // try, or a wait without one, leaves the backend's own bound.
  Attempt attempt(const std::string& owner, Duration lease, Holding& holding, Instant deadline);
  // One unlock of `owner`'s hold.
  ReleaseResult release(const std::string& owner, Holding& holding);
  // Runs the unlock `call`, sent again after a lost reply as often as
  // release_retriable() allows; `first_try`, if not null, is the call
  // already sent once.
  enum class ReleaseRetries { allowed, none };
  ReleaseResult send_release(const ScriptCall& call, std::unique_ptr<PendingReply> first_try,
                             ReleaseRetries retries = ReleaseRetries::allowed);
  // Writes down a won acquisition: the holding, and the watchdog when
  // there is no requested lease.
  void record_acquired(const std::string& owner, std::optional<Duration> requested_lease, Duration lease,
                       const Attempt& attempt, const Holding& scratch);
  // Releases an acquisition no replica acknowledged and throws ReplicaSyncError.
  [[noreturn]] void undo_unreplicated(const std::string& owner, Duration lease, Holding& scratch);
  // What a query needs: the owner's own holds (answered here, without a
  // call, once its holding is lost: is_held_by_current_thread(),
  // hold_count()) or the lock's state (is_locked(), remaining_lease()).
  enum class StatusQuery { own_holds, lock };
  // The flavor's status for `owner`, judged by its local deadline first: a
  // holding lost here holds nothing, whatever a (late) reply says.
  Status status_of(const std::string& owner, StatusQuery query);
  // abandon(), with its std::exception errors sent to the background handler
  // (the caller is already returning false or propagating another error).
  void abandon_reporting_errors(const std::string& owner, const Holding& scratch);

  KeyLayout layout_;
  Duration lock_delay_{};  // set once by the constructor
  // This client's wake channel at this lock (KeyLayout::wake_channel), made
  // once; empty for a flavor without a wake registry.
  std::string own_wake_channel_;
  std::shared_ptr<LockCore> core_;
};

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_ENGINE_LOCK_ENGINE_H_
