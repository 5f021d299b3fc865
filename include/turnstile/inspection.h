// turnstile/inspection.h
//
// What is at a name, for people and tools (`turnstile status`, `turnstile
// unlock --force`): the flavor, its holders with their hold counts, a fair
// lock's queue, a semaphore's permits, the remaining lease.
//
//   turnstile::Inspection seen = turnstile::inspect(client.backend(), "deploy");
//   if (seen.flavor && seen.could_be.size() > 1) { /* Redis alone cannot tell */ }
//   turnstile::force_unlock(client, "deploy", {.flavor = turnstile::Flavor::fair});
//
// Read with plain commands (TYPE, HGETALL, LRANGE, ...): not atomic, a
// snapshot good enough for a human or a script to look at, never used to
// decide who holds a lock. Keys and value shapes: key_layout.h.
//
// The flavor. Told (InspectOptions::flavor: the caller knows it from its
// policy file or flags), it is the flavor reported whatever the name holds
// now, free included, and only its keys are read. Not told, it is read from
// what Redis holds, and Redis alone cannot always tell:
//   lock hash (any owner -> hold count)   reentrant, fair, redlock or
//                                         multilock (a node): fair for sure
//                                         only while its queue keys exist
//   hash with a 'mode' field              read-write
//   string integer                        semaphore (crash-safe) or
//                                         counting-semaphore: the crash-safe
//                                         one for sure only while it has
//                                         permits held ({NAME}:timeout)
//   token string                          token
//   nothing                               free (fair if a queue is left)
// Inspection::could_be lists every flavor the keys fit (the table's order,
// flavor.h); Inspection::flavor is its first. Anything else at the name
// (another type, a hash with a value that is not a hold count, a string
// that is neither a count nor a token, a lock without an expiry) is not a
// lock: WrongTypeError, nothing is touched.
//
// Foreign holders. Redisson's scripts take any field of a lock hash for an
// owner: a hash whose every value is a hold count (an integer >= 1), with
// an expiry, is a held lock whoever wrote it (turnstile and Redisson write
// "<uuid>:<thread>", the node-redisson port "<uuid>:<uuid>", Redisson's
// transactions "<uuid>:<thread>:<32 hex>"). Such holders are listed with
// LockHolder::foreign set when the owner is not "<uuid>:<n>".
//
// force_unlock() deletes a lock as Redisson's forceUnlock does, but only a
// lock hash whose every owner is "<uuid>:..." (a client of Redisson's
// layout); a hash of counts with other fields may be someone's data and is
// never deleted (WrongTypeError), nor is anything that is not a lock.
//
// Holder identity. A lock with one holder (reentrant, fenced, fair, token,
// a read-write lock's writer) taken by turnstile has its holder's identity
// beside it (key_layout.h, "The holder's identity": host, pid, command,
// start, label), read into LockHolder::identity when it names that
// holder. Redisson, other clients of its layout and older turnstiles write
// none: identity stays nullopt ("no identity: foreign or older client").
// Readers and semaphore permits have none.
//
// Lists are bounded: at most kMaxListed holders, waiters or permits are
// read; the counts are always exact.

#ifndef TURNSTILE_INSPECTION_H_
#define TURNSTILE_INSPECTION_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/backend.h"
#include "turnstile/export.h"
#include "turnstile/flavor.h"
#include "turnstile/key_layout.h"

namespace turnstile {

class Client;

inline constexpr std::int64_t kMaxListed = 1000;

struct TURNSTILE_EXPORT InspectOptions {
  // The flavor the name is used as (a policy file's rule, a command's
  // flags). Unset: read from what Redis holds (the file comment).
  std::optional<Flavor> flavor = {};
};

struct TURNSTILE_EXPORT LockHolder {
  std::string owner;  // the hash field's owner, or the token of a token lock
  std::int64_t hold_count = 0;
  bool writes = false;   // read-write lock: a write hold (else a read hold)
  bool foreign = false;  // a lock hash's owner that is not "<uuid>:<n>"
  // Who holds it (the file comment, "Holder identity"); nullopt: none.
  std::optional<HolderIdentity> identity;
};

struct TURNSTILE_EXPORT QueuedWaiter {
  std::int64_t position = 0;                      // 1 = next
  std::string owner;                              // printable: other bytes as \xNN
  std::optional<std::int64_t> deadline_epoch_ms;  // when it is evicted if still waiting
  // Who waits (fair_waiter_identity_key(), key_layout.h); nullopt: none
  // (Redisson, an older turnstile).
  std::optional<HolderIdentity> identity;
};

struct TURNSTILE_EXPORT PermitSeen {
  std::string id;                               // 32 hex digits (stored as 16 bytes or as hex);
                                                // a member of another shape, printable (\xNN)
  std::optional<std::int64_t> expiry_epoch_ms;  // nullopt: never
  // Who holds it (permit_identity_key(), key_layout.h); nullopt: none
  // (Redisson, an older turnstile).
  std::optional<HolderIdentity> identity;
};

struct TURNSTILE_EXPORT Inspection {
  std::string name;
  // The flavor told, else could_be's first; nullopt: nothing at the name
  // (and no flavor told).
  std::optional<Flavor> flavor;
  // Every flavor the keys fit: one when told or unambiguous, more when
  // Redis alone cannot tell (the file comment); empty when free.
  std::vector<Flavor> could_be;
  // Time left on the lease (the key's PTTL); nullopt: free, or released
  // while it was read.
  std::optional<std::chrono::milliseconds> remaining_lease;
  std::vector<LockHolder> holders;
  std::int64_t holder_count = 0;
  std::vector<QueuedWaiter> queue;
  std::int64_t queue_length = 0;
  std::optional<std::int64_t> permits_available;  // semaphores
  std::vector<PermitSeen> permits;                // crash-safe: held permit ids
  std::int64_t permits_held = 0;
  std::optional<std::int64_t> last_fencing_token;  // reentrant/fair: the counter
  std::optional<std::string> mode;                 // read-write lock: "read" or "write"
  // Side keys of another type than the flavor writes (a hash where the
  // holder's identity or the fencing counter would be: someone's data, or
  // a name clash), ignored and named here for people; never fatal.
  std::vector<std::string> notes;
};

// Reads what is at `key` (the name as stored: with any client key prefix).
// Throws WrongTypeError for a key that is not a lock or semaphore (of the
// told flavor, if told), transport errors as the backend does.
TURNSTILE_EXPORT Inspection inspect(Backend& backend, const std::string& key, const InspectOptions& options = {});

struct TURNSTILE_EXPORT ListOptions {
  // A glob over names (with any client key prefix), Redis's glob syntax.
  std::string pattern = "*";
  // At most this many locks are listed (1..kMaxListedNames); one more
  // makes the listing incomplete. Other keys at matching names do not
  // count (every matching key is scanned, up to kMaxScanKeys).
  std::size_t max_names = 1000;
  // SCAN's COUNT per call (backend.h ScanOptions), bounding each call's
  // work on the server.
  std::int64_t count_per_call = 100;
};

inline constexpr std::size_t kMaxListedNames = 100'000;

struct TURNSTILE_EXPORT LockListing {
  // What inspect() sees at each name holding a lock, semaphore or fair
  // queue, sorted by name. Side keys (fencing counters, queues, permit
  // sets, read timeouts, latches: key_layout.h) are never names of their
  // own; anyone's data at a matching name is left out.
  std::vector<Inspection> locks;
  // False when more locks match than max_names, or the scan stopped at
  // kMaxScanKeys keys.
  bool complete = true;
};

// Every lock, semaphore and fair queue whose name matches
// options.pattern, on every master (Backend::scan_each_master: SCAN with
// a bounded COUNT, never KEYS, so Redis is never blocked). Two scans: the
// names themselves, and fair queues (redisson_lock_queue:{<pattern>}) whose
// lock is free. Each name is then inspect()ed, not atomically: a snapshot
// for people and tools, as inspect(). Throws InvalidArgumentError for
// options out of range, transport errors as the backend does.
TURNSTILE_EXPORT LockListing list_locks(Backend& backend, const ListOptions& options = {});

// Deletes the lock at `name` (`client`'s key prefix added) whoever holds
// it and wakes its waiters, as the flavor's force_unlock() does (a fair
// lock wakes its queue's head, a read-write lock every waiter); returns
// whether one was deleted (false: nothing was held). The flavor is the
// told one, else inspect()'s; the flavor's script checks the shape again,
// atomically. Throws WrongTypeError for a semaphore (no single holder), for
// a lock hash with an owner that is not "<uuid>:..." and for anything that
// is not a lock: none of them is deleted.
TURNSTILE_EXPORT bool force_unlock(Client& client, std::string_view name, const InspectOptions& options = {});

}  // namespace turnstile

#endif  // TURNSTILE_INSPECTION_H_
