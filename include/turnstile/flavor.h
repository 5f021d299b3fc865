// turnstile/flavor.h
//
// The one seam every kind of lock and semaphore plugs into, for code that
// picks a flavor at run time: the `turnstile` CLI (by its policy file or
// flags), the simulator (`turnstile sim --lock`) and the benchmarks.
//
//   std::unique_ptr<turnstile::Holdable> held =
//       client.holdable(turnstile::Flavor::fair, "deploy", {.fenced = true});
//   if (turnstile::LockHold hold = held->try_acquire_hold({.wait = 5s})) {
//     use(hold.fencing_token());
//     hold.release_or_throw();   // or let it go out of scope: released quietly
//   }
//
// Flavors, each with one spelling (flavor_name / parse_flavor), the same in
// the C++ API, the policy file, `turnstile run`, `turnstile sim` and the
// benchmarks:
//
//   reentrant           ReentrantLock   Redisson RLock (fenced: RFencedLock)
//   token               TokenLock       SET NX PX, turnstile's own
//   fair                FairLock        Redisson RFairLock, first come first served
//   semaphore           PermitSemaphore the crash-safe semaphore (Redisson
//                                       RPermitExpirableSemaphore): permits with
//                                       ids and leases, renewed by the watchdog
//   counting-semaphore  CountingSemaphore Redisson RSemaphore: a bare count, no
//                                       owner, no lease (a crashed holder's
//                                       permit is gone for good)
//   redlock             RedLock         a majority of independent masters
//   multilock           MultiLock       every node, all or none
//   read-write          ReadLock /      Redisson RReadWriteLock: many readers
//                       WriteLock       or one writer (HoldableOptions::shared
//                                       takes the read half)
//
// A Holdable is one client's handle on one name in one flavor. Every lock
// class, both semaphores and both composite locks implement it, beside
// their own richer API (the std Lockable forms for threads). Its contract,
// for every flavor:
//   * try_acquire_hold() waits up to options.wait (kWaitForever: as long
//     as it takes) unless options.stop is requested first, with
//     options.lease or (unset) the watchdog keeping the hold; it returns
//     the hold as a value (turnstile/hold.h), empty if nothing was taken in
//     time (nothing is left behind). Errors are those of the flavor's own
//     acquire calls. The hold has an owner id of its own, and is released
//     through it, from any thread: quietly (release(), the destructor) or
//     strictly (release_or_throw(): NotOwnerError, PermitNotHeldError for a
//     permit, if it was lost meanwhile).
//   * The lost handler is told once per hold the holder still believed it
//     had (lock.h, "The local deadline"); flavors without a lease (the
//     counting semaphore) never call it.

#ifndef TURNSTILE_FLAVOR_H_
#define TURNSTILE_FLAVOR_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <stop_token>

#include "turnstile/export.h"
#include "turnstile/future.h"
#include "turnstile/hold.h"
#include "turnstile/runtime.h"

namespace turnstile {

enum class Flavor : std::uint8_t {
  reentrant,
  token,
  fair,
  semaphore,
  counting_semaphore,
  redlock,
  multilock,
  read_write,
};

// Where a flavor keeps its state: the Redis type of its main key
// (key_layout.h).
enum class KeyType : std::uint8_t { hash, string };

// How `turnstile status` and inspect() (inspection.h) read a flavor's main
// key.
enum class StatusKind : std::uint8_t {
  lock_hash,        // hash: owner -> hold count (+ a fair lock's queue)
  read_write_hash,  // hash: 'mode', owner -> read holds, owner:write -> write holds
  token,            // string: the holder's token
  permit_count,     // string: permits available (+ a crash-safe semaphore's held permits)
};

// How many of a lock's nodes must hold it for it to be held: one server's
// flavors have one node; RedLock a majority of its servers; MultiLock all.
enum class Quorum : std::uint8_t { one, majority, all };

// One flavor's row of kFlavorTable: everything code outside the flavor's
// own files asks about it.
struct TURNSTILE_EXPORT FlavorTraits {
  Flavor flavor;
  // Its one spelling: the API, the policy file, the CLI, `status`.
  std::string_view name;
  // What prose calls it: the docs, error texts, the benchmarks' report
  // (benchmarks/report.py reads it from this table).
  std::string_view title;
  // Takes HoldableOptions::fenced (fencing tokens).
  bool can_be_fenced;
  // Counts permits rather than having one holder.
  bool is_semaphore;
  // Nodes on several clients (HoldableOptions::nodes).
  bool is_composite;
  // Its holds have a lease (and so can be lost).
  bool has_lease;
  // Takes HoldableOptions::shared (a read half beside a write half).
  bool has_shared_holds;
  // Its waiters queue, first come first served (FairLockOptions).
  bool queues_waiters;
  // A release can hand it straight to a waiting process's offer
  // (ClientOptions::fleet_handoff, permit_handoff).
  bool fleet_handoff;
  // A policy file (lock_policy.h) may name it: one name on one Redis,
  // surviving a crashed holder.
  bool in_policy;
  KeyType key_type;
  StatusKind status_kind;
  Quorum quorum = Quorum::one;
};

// Every flavor, in the enum's order (a new flavor: one enumerator, one
// row; flavor.cpp checks at compile time that no enumerator lacks a row).
inline constexpr std::array<FlavorTraits, 8> kFlavorTable = {{
    {.flavor = Flavor::reentrant,
     .name = "reentrant",
     .title = "reentrant lock",
     .can_be_fenced = true,
     .is_semaphore = false,
     .is_composite = false,
     .has_lease = true,
     .has_shared_holds = false,
     .queues_waiters = false,
     .fleet_handoff = true,
     .in_policy = true,
     .key_type = KeyType::hash,
     .status_kind = StatusKind::lock_hash},
    {.flavor = Flavor::token,
     .name = "token",
     .title = "token lock",
     .can_be_fenced = false,
     .is_semaphore = false,
     .is_composite = false,
     .has_lease = true,
     .has_shared_holds = false,
     .queues_waiters = false,
     .fleet_handoff = false,
     .in_policy = true,
     .key_type = KeyType::string,
     .status_kind = StatusKind::token},
    {.flavor = Flavor::fair,
     .name = "fair",
     .title = "fair lock",
     .can_be_fenced = true,
     .is_semaphore = false,
     .is_composite = false,
     .has_lease = true,
     .has_shared_holds = false,
     .queues_waiters = true,
     .fleet_handoff = false,
     .in_policy = true,
     .key_type = KeyType::hash,
     .status_kind = StatusKind::lock_hash},
    {.flavor = Flavor::semaphore,
     .name = "semaphore",
     .title = "crash-safe semaphore",
     .can_be_fenced = false,
     .is_semaphore = true,
     .is_composite = false,
     .has_lease = true,
     .has_shared_holds = false,
     .queues_waiters = false,
     .fleet_handoff = true,
     .in_policy = true,
     .key_type = KeyType::string,
     .status_kind = StatusKind::permit_count},
    {.flavor = Flavor::counting_semaphore,
     .name = "counting-semaphore",
     .title = "counting semaphore",
     .can_be_fenced = false,
     .is_semaphore = true,
     .is_composite = false,
     .has_lease = false,
     .has_shared_holds = false,
     .queues_waiters = false,
     .fleet_handoff = false,
     .in_policy = false,
     .key_type = KeyType::string,
     .status_kind = StatusKind::permit_count},
    {.flavor = Flavor::redlock,
     .name = "redlock",
     .title = "RedLock",
     .can_be_fenced = false,
     .is_semaphore = false,
     .is_composite = true,
     .has_lease = true,
     .has_shared_holds = false,
     .queues_waiters = false,
     .fleet_handoff = false,
     .in_policy = false,
     .key_type = KeyType::hash,
     .status_kind = StatusKind::lock_hash,
     .quorum = Quorum::majority},
    {.flavor = Flavor::multilock,
     .name = "multilock",
     .title = "MultiLock",
     .can_be_fenced = false,
     .is_semaphore = false,
     .is_composite = true,
     .has_lease = true,
     .has_shared_holds = false,
     .queues_waiters = false,
     .fleet_handoff = false,
     .in_policy = false,
     .key_type = KeyType::hash,
     .status_kind = StatusKind::lock_hash,
     .quorum = Quorum::all},
    {.flavor = Flavor::read_write,
     .name = "read-write",
     .title = "read-write lock",
     .can_be_fenced = false,
     .is_semaphore = false,
     .is_composite = false,
     .has_lease = true,
     .has_shared_holds = true,
     .queues_waiters = false,
     .fleet_handoff = false,
     .in_policy = true,
     .key_type = KeyType::hash,
     .status_kind = StatusKind::read_write_hash},
}};

static_assert(
    [] {
      for (std::size_t i = 0; i < kFlavorTable.size(); ++i) {
        if (static_cast<std::size_t>(kFlavorTable[i].flavor) != i) return false;
      }
      return true;
    }(),
    "kFlavorTable lists every flavor in the enum's order");

// `flavor`'s row of kFlavorTable.
constexpr const FlavorTraits& flavor_traits(Flavor flavor) { return kFlavorTable[static_cast<std::size_t>(flavor)]; }

// Every flavor, in the enum's order.
inline constexpr std::array<Flavor, kFlavorTable.size()> kAllFlavors = [] {
  std::array<Flavor, kFlavorTable.size()> flavors{};
  for (std::size_t i = 0; i < kFlavorTable.size(); ++i) flavors[i] = kFlavorTable[i].flavor;
  return flavors;
}();

// "reentrant", "token", "fair", "semaphore", "counting-semaphore",
// "redlock", "multilock", "read-write".
constexpr std::string_view flavor_name(Flavor flavor) { return flavor_traits(flavor).name; }
// The inverse of flavor_name(); nullopt for anything else.
TURNSTILE_EXPORT std::optional<Flavor> parse_flavor(std::string_view name);
// Every flavor name, comma-separated, for usage messages.
TURNSTILE_EXPORT std::string flavor_names();

// The semaphores (counts of permits rather than one holder).
constexpr bool is_semaphore(Flavor flavor) { return flavor_traits(flavor).is_semaphore; }
// The composite locks (nodes on several clients).
constexpr bool is_composite(Flavor flavor) { return flavor_traits(flavor).is_composite; }
// The flavors whose holds have a lease (and so can be lost).
constexpr bool has_lease(Flavor flavor) { return flavor_traits(flavor).has_lease; }
// The flavors that take fencing tokens (HoldableOptions::fenced).
constexpr bool can_be_fenced(Flavor flavor) { return flavor_traits(flavor).can_be_fenced; }
// The flavors with a read half beside the write half.
constexpr bool has_shared_holds(Flavor flavor) { return flavor_traits(flavor).has_shared_holds; }
// The flavors whose waiters queue, first come first served.
constexpr bool queues_waiters(Flavor flavor) { return flavor_traits(flavor).queues_waiters; }
// The semaphores whose permits each have an id and a lease (the
// crash-safe kind); the others are a bare count.
constexpr bool has_leased_permits(Flavor flavor) { return is_semaphore(flavor) && has_lease(flavor); }
// How many of `nodes` nodes must hold a lock of `quorum` (at least 1).
constexpr std::size_t required_nodes(Quorum quorum, std::size_t nodes) {
  switch (quorum) {
    case Quorum::majority:
      return nodes / 2 + 1;
    case Quorum::all:
      return nodes;
    case Quorum::one:
      break;
  }
  return 1;
}
// required_nodes() of `flavor`'s quorum.
constexpr std::size_t required_nodes(Flavor flavor, std::size_t nodes) {
  return required_nodes(flavor_traits(flavor).quorum, nodes);
}

// Waits as long as it takes (AcquireOptions::wait).
inline constexpr Duration kWaitForever = Duration::max();

// How to acquire: how long to wait, and for how long to hold.
struct TURNSTILE_EXPORT AcquireOptions {
  // How long to wait for the lock. Zero (the default): try once.
  Duration wait = Duration::zero();
  // A fixed lease, not renewed, after which the lock frees itself. Unset
  // (the default): the watchdog renews ClientOptions::lease while it is
  // held. (A lease is always how long the server keeps a hold without
  // hearing from its holder; only whether it is renewed differs.)
  std::optional<Duration> lease = {};
  // Cancels the wait: once a stop is requested (from any thread), the
  // acquisition returns false within one wake-up, leaving nothing behind
  // (a fair-lock queue entry is withdrawn). Default: not cancellable.
  std::stop_token stop = {};
};

// What one lock handle sets for itself rather than take from its client
// (ClientOptions): Client::lock(name, options) and the other factories.
struct TURNSTILE_EXPORT LockOptions {
  // This lock's lock-delay (ClientOptions::lock_delay has the contract):
  // every lease its holds arm on the server is this much longer than the
  // one the holder believes in. Unset (the default): the client's. Zero:
  // none, whatever the client's. At most kMaxLockDelay
  // (InvalidArgumentError). A hold keeps the delay of the handle that took
  // it; a reentrant hold taken again through a handle with another delay
  // takes that one (the latest acquisition's is on the server).
  std::optional<Duration> lock_delay = {};
};

enum class LockLostReason {
  // A renewal found the lock gone: its lease ran out (a pause longer than
  // the lease, a lost renewal) or it was force-unlocked or deleted.
  gone,
  // The holding's local deadline passed without a confirmed renewal (Redis
  // unreachable or too slow, a fixed lease running out, a pause): the lease
  // may have lapsed on the server, so it is no longer believed held.
  lease_expired,
  // The hold reached ClientOptions::max_hold: the watchdog renews it no
  // more and it is no longer believed held; the lease lapses by itself.
  max_hold_reached,
  // The server restarted (or another master took over) since the hold was
  // taken: the backend found another process behind the same endpoint at
  // its first contact since (Backend::watch_restarts). Without persistence
  // the lock is gone; with it the key may survive, but the hold is given
  // up all the same (the safe side).
  server_restarted,
};

struct TURNSTILE_EXPORT LockLost {
  std::string_view lock_name;
  std::string_view owner;  // the owner id that held it
  LockLostReason reason;
};

// Told when a lock its holder still believed held is lost, once per lost
// hold, on the task that found the loss (the watchdog's for a renewal or a
// deadline; the caller's for unlock(), extend() or a force-unlock through
// the same client); must not block for long.
using LockLostHandler = std::function<void(const LockLost&)>;

class TURNSTILE_EXPORT Holdable {
 public:
  virtual ~Holdable() = default;

  virtual Flavor flavor() const = 0;
  // The key (the client's key prefix included; a composite lock: its first
  // node's).
  virtual const std::string& name() const = 0;

  // Holds as values (turnstile/hold.h; see the file comment): what was
  // taken belongs to the returned LockHold, not to the calling task.
  // acquire_hold() waits as long as it takes; the async form waits on no
  // thread of its own (future.h) and keeps what it needs alive.
  [[nodiscard]] virtual LockHold try_acquire_hold(const AcquireOptions& options) = 0;
  [[nodiscard]] virtual Future<LockHold> try_acquire_hold_async(const AcquireOptions& options) = 0;
  [[nodiscard]] LockHold acquire_hold(std::optional<Duration> lease = std::nullopt);
  // Who to tell when a hold is lost; LockLost::owner is LockHold::owner().
  // One per (Client, name): the last set serves every handle. Runs on the
  // task that found the loss; must not block for long.
  virtual void set_lost_handler(LockLostHandler handler) = 0;

 protected:
  // Copied and moved only as part of a flavor's own object (no slicing).
  Holdable() = default;
  Holdable(const Holdable&) = default;
  Holdable(Holdable&&) = default;
  Holdable& operator=(const Holdable&) = default;
  Holdable& operator=(Holdable&&) = default;
};

}  // namespace turnstile

#endif  // TURNSTILE_FLAVOR_H_
