// turnstile/key_layout.h
//
// Where each flavor keeps its state in Redis: the one owner of every key,
// side key, channel and suffix rule. The lock classes, `turnstile status` /
// `unlock`, the simulator's checkers and the scenarios all read names from
// here, so a Redisson process and a turnstile process name the same keys.
//
// Redisson's hash-tag rule (Redis Cluster: every key of one lock in one
// slot). A side key with a prefix is "<prefix>:{<name>}", and one with a
// suffix is "{<name>}:<suffix>"; when the name already contains '{' (its
// own hash tag) it is used as it is: "<prefix>:<name>", "<name>:<suffix>".
//
// Per flavor (<name> includes the client's key prefix):
//   reentrant  <name>                              hash owner id -> hold count
//              redisson_lock__channel:{<name>}     releases ("0")
//              redisson_lock_token:{<name>}        fencing counter (fenced)
//              redisson_unlock_latch:{<name>}:<n>  one unlock's result
//              turnstile_holder:{<name>}           the holder's identity
//              turnstile_lock_wake:{<name>}        zset: turnstile's waiting
//                                                  processes and its holder
//                                                  (lua/lib/wake_registry.lua)
//              turnstile_lock_wake:{<name>}:<uuid> one process's wake-ups
//   fair       the reentrant keys, and
//              redisson_lock_queue:{<name>}        list of waiting owner ids
//              redisson_lock_timeout:{<name>}      zset owner id -> chained deadline
//              turnstile_lock_waiters:{<name>}     zset owner id -> liveness deadline
//              <channel>:<owner id>                one waiter's wake-up
//   token      <name>                              string "<uuid>:<32 hex>"
//              turnstile_lock__channel:{<name>}    releases
//              turnstile_holder:{<name>}           the holder's identity
//              turnstile_lock_wake:{<name>}(:<uuid>)  as the reentrant lock's
//   semaphore  <name>                              string: permits available
//              {<name>}:timeout                    zset permit id -> expiry
//              redisson_sc:{<name>}                releases (the new count)
//              turnstile_lock_wake:{<name>}(:<uuid>)  zset: turnstile's waiting
//                                                  processes and the count its
//                                                  latest change left
//   counting-semaphore  <name>, redisson_sc:{<name>}, turnstile_lock_wake:{<name>}
//              as the semaphore's
//   read-write <name>                              hash 'mode' = read | write,
//                                                  owner id = read holds,
//                                                  '<owner id>:write' = write holds
//              {<name>}:<owner id>:rwlock_timeout:<k>  one read hold's lease
//              redisson_rwlock:{<name>}            releases ("0" one, "1" all)
//              redisson_unlock_latch:{<name>}:<n>  one unlock's result
//              turnstile_holder:{<name>}           the writer's identity
//   redlock, multilock  the reentrant keys, on every node
// and fenced_set() (fencing.h) keeps turnstile_fence:{<resource>}; an
// election (election.h) is a fenced fair lock with its leader record,
// turnstile_leader:{<name>}, and channel turnstile_leader__channel:{<name>};
// release requests (revocation.h) go to turnstile_revoke__channel:{<name>}.
// Per Client (any flavor): turnstile_presence:{<tag>}:<client uuid>, a
// string with an expiry, one per cluster slot it holds keys in (<tag> is
// "0" on one server, else the smallest number whose tag hashes to that
// slot): how a holder finds that its server lost its keys
// (ClientOptions::wipe_check_period).
//
// The holder's identity (turnstile's own, never a field of the lock hash
// Redisson reads): a string beside a lock that has one holder (reentrant,
// fenced, fair, token, the write half; a composite's every node), written
// by the acquiring script with the lease as its expiry, re-armed by the
// same renewals, deleted by the release that ends the holding: it never
// outlives the holding by more than one renewal. A reader's is the value
// of its holds' timeout keys (where Redisson writes 1); a crash-safe
// semaphore's permit has one of its own (permit_identity_key()), and so
// has a fair lock's waiter while it waits (fair_waiter_identity_key()); a
// counting semaphore's permits have none (no holder). Its value
// (holder_identity_value) names the owner it describes, so a reader shows
// it only beside that owner: a holder without one (Redisson, an older
// turnstile) has "no identity".
//
// Value shapes, checked by readers outside a script the way the scripts
// check them (lua/lib/lock_shape.lua): a key of another shape is someone
// else's data, never waited on, deleted or reported as a lock.
//   owner id    "<uuid>:<n>": a client UUID (8-4-4-4-12 hex digits) and a
//               thread or task id in decimal (turnstile's and Redisson's)
//   client-owned field  "<uuid>:<anything>": an owner of any client of
//               Redisson's layout (node-redisson writes "<uuid>:<uuid>",
//               Redisson's transactions "<uuid>:<thread>:<32 hex>")
//   hold count  a decimal integer >= 1, no sign, no leading zero
//   token       "<uuid>:<32 hex digits>": turnstile's token lock, followed
//               by kTokenWaitersMark once somebody may wait for it
// Redisson's scripts take any field of a lock hash for an owner, so a hash
// whose every value is a hold count, with an expiry, is a held lock to
// wait on and to show (is_held_lock_hash); only one whose every owner is
// client-owned may be force-unlocked (is_lock_hash): any other hash is
// someone's data, never deleted.

#ifndef TURNSTILE_KEY_LAYOUT_H_
#define TURNSTILE_KEY_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/export.h"
#include "turnstile/flavor.h"

namespace turnstile {

// "<prefix>:{<name>}", or "<prefix>:<name>" when the name contains '{'.
TURNSTILE_EXPORT std::string side_key(std::string_view prefix, std::string_view name);
// "{<name>}:<suffix>", or "<name>:<suffix>" when the name contains '{'.
TURNSTILE_EXPORT std::string suffixed_key(std::string_view name, std::string_view suffix);

// Every key and channel of one flavor at one name. Names a flavor does
// not use are empty.
struct TURNSTILE_EXPORT KeyLayout {
  Flavor flavor = Flavor::reentrant;
  // The main key: the lock hash, the token string, the permit count.
  std::string name;
  // Where releases are announced.
  std::string channel;
  // Reentrant and fair (and composite nodes): where a fenced lock draws
  // its tokens, and the prefix of its unlock latches.
  std::string fencing_counter;
  std::string unlock_latch_prefix;
  // Reentrant (and composite nodes), token and both semaphores:
  // turnstile's fleet-wide wake-ups, the registry of waiting processes
  // (docs/locks.md).
  std::string wake_registry;
  // Fair: the queue, its chained deadlines, turnstile's liveness deadlines,
  // turnstile's direct handoff offers and grants; the grants also for the
  // reentrant lock (and composite nodes) and the crash-safe semaphore,
  // "turnstile_lock_grants:{<name>}": their offers by process
  // (lua/lib/wake_registry.lua).
  std::string fair_queue;
  std::string fair_timeouts;
  std::string fair_waiters;
  std::string fair_grants;
  // Crash-safe semaphore: the held permits.
  std::string permit_timeouts;
  // Read-write lock: the name's hash tag, "{N}" (or N with its own '{'),
  // the prefix of every reader's timeout keys.
  std::string hash_tag;
  // Flavors with a single holder (and the read-write lock, for its
  // writer): the holder's identity, "turnstile_holder:{<name>}".
  std::string holder_identity;

  // One unlock's latch: "<unlock_latch_prefix>:<nonce>".
  std::string unlock_latch(std::string_view nonce) const;
  // Where the process of client `client_id` is woken: "<wake_registry>:<client_id>".
  std::string wake_channel(std::string_view client_id) const;
  // Fair: the channel `owner` waits on, "<channel>:<owner>".
  std::string waiter_channel(std::string_view owner) const;
  // Read-write lock: the prefix of `owner`'s read-hold timeout keys,
  // "<hash_tag>:<owner>:rwlock_timeout" (":<k>" per hold k), and the hash
  // field of `owner`'s write holds, "<owner>:write".
  std::string read_timeouts(std::string_view owner) const;
  std::string write_field(std::string_view owner) const;
  // A lock hash's field read back: its owner, and whether it counts write
  // holds ("<owner>:write", read-write lock only) or is the read-write
  // lock's 'mode' (then owner is empty).
  struct Field {
    std::string_view owner;
    bool writes = false;
    bool mode = false;
  };
  Field parse_field(std::string_view field) const;
  // The side keys that hold state (not channels, not latches), in the
  // order above.
  std::vector<std::string> side_keys() const;
};

// The layout of `flavor` at `key` (the name with the client's key prefix).
TURNSTILE_EXPORT KeyLayout key_layout(Flavor flavor, std::string_view key);

// The key holding the highest token fenced_set() (fencing.h) accepted for
// `resource`: "turnstile_fence:{<resource>}".
TURNSTILE_EXPORT std::string fence_key(std::string_view resource);

// An election at `key` (turnstile/election.h) is the fair lock there, and
// its leader record, "turnstile_leader:{<key>}" (a hash: owner, term,
// value, since_ms), whose changes are told on "turnstile_leader__channel:{<key>}".
TURNSTILE_EXPORT std::string leader_record_key(std::string_view key);
TURNSTILE_EXPORT std::string leader_channel(std::string_view key);

// Where release requests for the lock at `key` go (revocation.h):
// "turnstile_revoke__channel:{<key>}", any flavor.
TURNSTILE_EXPORT std::string revocation_channel(std::string_view key);

// The presence key a Client with UUID `client_id` keeps with hash tag
// `tag`: "turnstile_presence:{<tag>}:<client_id>".
TURNSTILE_EXPORT std::string presence_key(std::string_view tag, std::string_view client_id);

// The identity of a crash-safe semaphore's permit (the file comment,
// "The holder's identity"): "turnstile_holder:{<name>}:<id>", `id` its 32
// hex digits, with the permit's lease (lua/lib/holder_identity.lua).
TURNSTILE_EXPORT std::string permit_identity_key(std::string_view name, std::string_view id_hex);
// The identity of a fair lock's waiter `owner` while it waits:
// "turnstile_holder:{<name>}:<owner>", expiring with its liveness
// (lua/fair_lock_acquire.lua).
TURNSTILE_EXPORT std::string fair_waiter_identity_key(std::string_view name, std::string_view owner);

// The name whose side key `key` is, by the rules above: a prefixed side
// key of any flavor (fencing counter, unlock latch, fair queue keys,
// turnstile_fence:{...}, a presence key) or a suffixed one ({N}:timeout,
// {N}:<owner>:rwlock_timeout:<k>); nullopt for a key that is none of
// them (a lock's own key, anyone's data). For listings (list_locks()).
TURNSTILE_EXPORT std::optional<std::string> side_key_owner(std::string_view key);

// Who holds a lock (the file comment, "The holder's identity"). Every
// text is printable ASCII (other bytes as '?'), cut to its limit.
inline constexpr std::size_t kMaxHolderHostBytes = 255;
inline constexpr std::size_t kMaxHolderCommandBytes = 256;
inline constexpr std::size_t kMaxHolderLabelBytes = 128;
struct TURNSTILE_EXPORT HolderIdentity {
  std::string owner;  // the owner id (a token lock: its token) it describes
  std::string host;
  std::int64_t pid = 0;
  std::string command;  // the process name, or what the holder set (ClientOptions::holder_command)
  std::int64_t started_at_epoch_ms = 0;
  std::string label;  // ClientOptions::holder_label, `turnstile run --label`
  // The holder's lock-delay (ClientOptions::lock_delay), part of the key's
  // expiry: 0 for none.
  std::int64_t lock_delay_ms = 0;
};
// The stored value: "turnstile-holder 1" then one "<field>=<text>" line
// each (owner, host, pid, started_at_ms, command, label, and lock_delay_ms
// when not 0), texts cleaned and cut as above; and back (nullopt: not an
// identity of this shape; a field it does not know is skipped).
TURNSTILE_EXPORT std::string holder_identity_value(const HolderIdentity& identity);
TURNSTILE_EXPORT std::optional<HolderIdentity> parse_holder_identity(std::string_view value);
// `text` as printable ASCII (other bytes '?'), at most `max_bytes`, a cut
// one ending in "...".
TURNSTILE_EXPORT std::string holder_text(std::string_view text, std::size_t max_bytes);

// Lock wake-up messages (Redisson's): a release, and a read lock's release.
inline constexpr std::string_view kUnlockMessage = "0";
inline constexpr std::string_view kReadUnlockMessage = "1";

// Value shapes (the file comment).
TURNSTILE_EXPORT bool is_owner_id(std::string_view text);
TURNSTILE_EXPORT bool is_client_owned(std::string_view text);
TURNSTILE_EXPORT bool is_hold_count(std::string_view text);
TURNSTILE_EXPORT bool is_lock_token(std::string_view text);
// A token lock's value ends with this mark once somebody may wait for it
// (lua/lib/lock_shape.lua, WAITERS_MARK): its release then wakes them.
inline constexpr std::string_view kTokenWaitersMark = "+w";
// The token of a token lock's value, its mark taken off.
TURNSTILE_EXPORT std::string_view token_of(std::string_view value);

// A lock hash's shape (the file comment), from its fields and values as
// HGETALL lists them (field, value, field, value...), `layout`'s flavor
// telling a read-write lock's: every value a hold count ('mode' read or
// write); with is_lock_hash, every owner client-owned as well. An empty
// hash is neither. The expiry is the caller's to check.
TURNSTILE_EXPORT bool is_held_lock_hash(const KeyLayout& layout, const std::vector<std::string>& flat);
TURNSTILE_EXPORT bool is_lock_hash(const KeyLayout& layout, const std::vector<std::string>& flat);

}  // namespace turnstile

#endif  // TURNSTILE_KEY_LAYOUT_H_
