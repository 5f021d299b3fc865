// cli/lock_inspection.h
//
// What is at a name, read with plain commands (TYPE, HGETALL, LRANGE, ...)
// for `turnstile status` and `turnstile unlock`. Not atomic: a snapshot
// good enough for a human or a script to look at, never used to decide
// who holds a lock.
//
// Flavors, by Redisson's layout (keys and shapes: turnstile/key_layout.h):
//   lock hash at NAME                reentrant lock (fields: owner id → count)
//     with a 'mode' field            read-write lock (owner id → read holds,
//                                    "<owner id>:write" → write holds)
//     + non-empty redisson_lock_queue:{NAME}       fair lock
//   string integer at NAME           semaphore (the value: permits available)
//     + zset {NAME}:timeout          crash-safe semaphore (permit id → expiry)
//   token string at NAME             token lock (the value: the token)
//   nothing at NAME                  free (a fair lock may still have a queue)
// Any other type or shape (a hash of other fields, a string that is not a
// token, a lock without an expiry) is not ours: WrongTypeError, nothing is
// touched.
//
// Lists are bounded: at most kMaxListed holders, waiters or permits are
// read; the counts are always exact.

#ifndef TURNSTILE_CLI_LOCK_INSPECTION_H_
#define TURNSTILE_CLI_LOCK_INSPECTION_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/backend.h"
#include "turnstile/flavor.h"

namespace turnstile::cli {

inline constexpr std::int64_t kMaxListed = 1000;

// What `status` prints as the kind of what it found (nullopt: free):
// "free", "reentrant_lock", "fair_lock", "token_lock", "semaphore" (the
// counting one), "crash_safe_semaphore", "read_write_lock". The documented output of `status`
// (text and JSON), kept as it was when flavors got one spelling
// (flavor_name()).
std::string_view status_kind_name(std::optional<Flavor> flavor);

struct Holder {
  std::string owner;  // owner id, or the token of a token lock
  std::int64_t hold_count = 0;
  bool writes = false;  // read-write lock: a write hold (else a read hold)
};

struct Waiter {
  std::int64_t position = 0;                      // 1 = next
  std::string owner;                              // printable: other bytes as \xNN
  std::optional<std::int64_t> deadline_epoch_ms;  // when it is evicted if still waiting
};

struct Permit {
  std::string id;                               // 32 hex digits (stored as 16 bytes or as hex);
                                                // a member of another shape, printable (\xNN)
  std::optional<std::int64_t> expiry_epoch_ms;  // nullopt: never
};

struct Inspection {
  std::string name;
  std::optional<Flavor> flavor;         // nullopt: free
  std::optional<std::int64_t> pttl_ms;  // nullopt: no key or no expiry
  std::vector<Holder> holders;
  std::int64_t holder_count = 0;
  std::vector<Waiter> queue;
  std::int64_t queue_length = 0;
  std::optional<std::int64_t> permits_available;  // semaphores
  std::vector<Permit> permits;                    // crash-safe: held permit ids
  std::int64_t permits_held = 0;
  std::optional<std::int64_t> last_fencing_token;  // reentrant/fair: the counter
  std::optional<std::string> mode;                 // read-write lock: "read" or "write"
};

// Reads what is at `name`. Throws WrongTypeError for a key that is not a
// turnstile lock or semaphore, transport errors as the backend does.
Inspection inspect(Backend& backend, const std::string& name);

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_LOCK_INSPECTION_H_
