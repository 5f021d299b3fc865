// turnstile/lock_policy.h
//
// Per-key lock flavors from configuration: a LockPolicy maps key patterns
// (globs, first match wins) to a flavor and its options, so application code
// asks for "the lock for lock:order:42" and gets whatever the configuration
// says, and `turnstile run --config FILE NAME -- ...` uses the same file.
//
//   turnstile::LockPolicy policy = turnstile::LockPolicy::load("locks.toml");
//   std::unique_ptr<turnstile::Lock> lock = policy.lock_for(client, "lock:order:42");
//   const turnstile::LockRule& rule = policy.rule_for("lock:order:42");
//   if (lock->try_lock({.wait = rule.wait.value_or(turnstile::Duration::max())})) { ... }
//
//   turnstile::PermitSemaphore slots = policy.semaphore_for(client, "deploy:web");
//   const std::int64_t permits = policy.rule_for("deploy:web").permits;
//   if (slots.try_set_permits_or_get(permits).total != permits) { ... }   // users disagree
//
// The file is TOML (parsed with toml++):
//
//   [default]                  # optional: keys no rule matches
//   flavor = "reentrant"
//
//   [[rule]]
//   match = "lock:order:*"     # fnmatch(3) glob: * ? [a-z]; '*' also matches ':'
//   flavor = "fair"            # reentrant | fair | token | semaphore | read-write
//   lease_ms = 10000           # the lease, renewed every lease/3 while held
//   wait_ms = 2000             # how long to wait; absent: forever
//   allow_evicting = false     # true: `turnstile run` holds even on a Redis
//                              # that may evict lock keys (server_check.h),
//                              # with a warning, as --allow-evicting
//   lock_delay_ms = 15000      # these names' lock-delay (LockOptions::lock_delay)
//
//   [[rule]]
//   match = "deploy:*"
//   flavor = "semaphore"       # the crash-safe semaphore
//   permits = 3                # required for (and only for) semaphores
//
// Edge cases: an unknown key, a wrong value type (`permits = 1e17` is a
// float), an unknown flavor, a value out of range (lease_ms in [1, kMaxLease],
// wait_ms in [0, kMaxLease], lock_delay_ms in [0, kMaxLockDelay], permits in
// [1, kMaxPermits]: the limits of the
// library's calls and of the command line's flags) or permits on a lock are
// all refused with InvalidArgumentError naming the file, line and column.
// More than kMaxRules rules are refused. A key no rule matches gets the
// default rule (reentrant, the client's lease, wait forever, unless
// [default] says otherwise).
//
// `ttl_ms`, the old name of `lease_ms`, is still read, silently, as a
// deprecated alias (to be dropped in a later release); a table that gives
// both is refused.
//
// A LockPolicy is immutable after loading and may be shared between threads.

#ifndef TURNSTILE_LOCK_POLICY_H_
#define TURNSTILE_LOCK_POLICY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/export.h"
#include "turnstile/client.h"
#include "turnstile/flavor.h"
#include "turnstile/lock.h"
#include "turnstile/runtime.h"
#include "turnstile/semaphore.h"

namespace turnstile {

// The flavors a policy may name (flavor.h): those that hold one name on
// one Redis and survive a crashed holder. The counting semaphore (no
// lease) and the composite locks (several servers) are refused.
constexpr bool is_policy_flavor(Flavor flavor) { return flavor_traits(flavor).in_policy; }

struct TURNSTILE_EXPORT LockRule {
  // The glob the key must match (empty for the default rule).
  std::string pattern = {};
  Flavor flavor = Flavor::reentrant;
  // The number of permits of a semaphore (≥ 1); 0 for the lock flavors.
  std::int64_t permits = 0;
  // The lease: how long a crashed holder's lock outlives it. Unset: the
  // client's watchdog timeout. (`lease_ms` in the file; it was `ttl`.)
  std::optional<Duration> lease = {};
  // How long to wait for the lock. Unset: as long as it takes.
  std::optional<Duration> wait = {};
  // Hold even on a Redis whose memory policy may evict lock keys
  // (turnstile/server_check.h): what `turnstile run` does with this rule
  // (--allow-evicting); the library reads it for no decision of its own.
  // Default false.
  bool allow_evicting = false;
  // The lock-delay of the names it matches (LockOptions::lock_delay): the
  // locks lock_for() and semaphore_for() make arm it, and so does
  // `turnstile run` (as --lock-delay). Unset: the client's.
  // (`lock_delay_ms` in the file.)
  std::optional<Duration> lock_delay = {};
  // The line of the file that defined the rule; 0 for the built-in default.
  int line = 0;
};

class TURNSTILE_EXPORT LockPolicy {
 public:
  // Rules beyond this many are refused (a policy is a short list, matched
  // in order on every lookup).
  static constexpr std::size_t kMaxRules = 1000;

  // No rules: every key gets the built-in default (reentrant).
  LockPolicy() = default;

  // Parses TOML text. `source_name` names it in error messages (a path).
  // Throws InvalidArgumentError "<source>:<line>:<column>: <what is wrong>".
  static LockPolicy parse(std::string_view toml_text, std::string_view source_name);
  // Reads and parses the file at `path`. Throws InvalidArgumentError if it
  // cannot be read or is not a valid policy.
  static LockPolicy load(const std::string& path);

  const std::vector<LockRule>& rules() const { return rules_; }
  const LockRule& default_rule() const { return default_rule_; }

  // The first rule whose pattern matches `key`, or the default rule.
  const LockRule& rule_for(std::string_view key) const;

  // The configured lock for `key` (reentrant, fair or token; for a
  // read-write rule, its write half: client.read_write_lock() has both). Throws
  // InvalidArgumentError if the key's rule is a semaphore (which is not a
  // Lock).
  std::unique_ptr<Lock> lock_for(Client& client, std::string_view key) const;

  // The crash-safe semaphore for `key`, whose rule must be a semaphore
  // (else InvalidArgumentError). Makes the handle only: the caller agrees on
  // the total with try_set_permits_or_get(rule_for(key).permits).
  PermitSemaphore semaphore_for(Client& client, std::string_view key) const;

 private:
  std::vector<LockRule> rules_;
  LockRule default_rule_;
};

}  // namespace turnstile

#endif  // TURNSTILE_LOCK_POLICY_H_
