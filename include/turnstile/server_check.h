// turnstile/server_check.h
//
// Whether the Redis the locks live on may evict them. A Redis with a
// memory limit and an evicting `maxmemory-policy` (a cache reused for
// locks) deletes keys when it runs out of memory: a held lock's key goes,
// the next acquirer gets in while the first still believes it holds it,
// and under allkeys-* the fencing counter goes too, so both get the same
// fencing token. No lease, renewal or fencing token protects against that:
// the server itself must not evict.
//
//   turnstile::ServerSafety safety = turnstile::check_server(client.backend());
//   if (safety.evicts_locks()) throw turnstile::UnsafeServerError(turnstile::unsafe_server_message(safety));
//
// check_server() reads `INFO memory` (maxmemory, maxmemory_policy) on every
// master (Backend::command_each_master: the server, Sentinel's current
// master, every master of a cluster), since managed services often refuse
// CONFIG but answer INFO. Each master is
//   safe           maxmemory-policy noeviction, or maxmemory 0 (no limit)
//   evicts_locks   allkeys-* (any key) or volatile-* (keys with an expiry,
//                  which every held lock key has), with a memory limit
//   unknown        INFO refused (an ACL user without +info), unreachable,
//                  a policy this version does not know, or a backend that
//                  reaches no Redis (the fake: no master to ask)
// and the server as a whole is its worst master (evicts_locks, then
// unknown, then safe; unknown when no master was asked).
//
// A Client runs it by itself before its first script call
// (ClientOptions::server_check, turnstile/client.h) and reports an
// evicting server through on_background_error as an UnsafeServerError;
// `turnstile run` refuses such a server (exit 78) unless told
// --allow-evicting, and `turnstile status` shows the policy.
//
// A check reads the configuration of the moment: CONFIG SET may change it
// later. A holder still learns of an evicted lock, at its next renewal at
// the latest (lock.h, "The safety model").

#ifndef TURNSTILE_SERVER_CHECK_H_
#define TURNSTILE_SERVER_CHECK_H_

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/backend.h"
#include "turnstile/export.h"

namespace turnstile {

enum class EvictionRisk : std::uint8_t { safe, evicts_locks, unknown };

// "safe", "evicts-locks", "unknown".
TURNSTILE_EXPORT std::string_view eviction_risk_name(EvictionRisk risk);

// The risk of a master with this `maxmemory-policy` and `maxmemory`
// (bytes; 0: no limit), as the file comment classifies it. A policy name
// this version does not know is unknown.
TURNSTILE_EXPORT EvictionRisk eviction_risk(std::string_view maxmemory_policy, std::int64_t maxmemory);

// What one master answered.
struct TURNSTILE_EXPORT MasterSafety {
  std::string node;  // "host:port" or a socket path
  EvictionRisk risk = EvictionRisk::unknown;
  // As INFO says ("allkeys-lru"); empty when not read.
  std::string maxmemory_policy;
  // Bytes; 0: no limit; nullopt when not read.
  std::optional<std::int64_t> maxmemory;
  // Why the risk is unknown (the error reply or the failure); empty else.
  std::string reason;
  // What asking it failed with (ConnectionError, TimeoutError, ...), when
  // it could not be asked at all; null else (an error reply included).
  std::exception_ptr failure;
};

struct TURNSTILE_EXPORT ServerSafety {
  // The worst of `masters` (the file comment); unknown when empty.
  EvictionRisk risk = EvictionRisk::unknown;
  std::vector<MasterSafety> masters;

  bool evicts_locks() const { return risk == EvictionRisk::evicts_locks; }
};

// Reads every master's memory policy (the file comment). Never throws for
// a master that refuses or cannot be reached (that master is unknown); may
// throw what finding the masters throws (Backend::command_each_master).
TURNSTILE_EXPORT ServerSafety check_server(Backend& backend);

// The policies in one phrase, for status lines: "allkeys-lru (maxmemory
// 1048576) on 127.0.0.1:6379", masters joined by "; ", "unknown (<reason>)"
// for a master not read, "no master to ask" when there is none.
TURNSTILE_EXPORT std::string describe_policy(const ServerSafety& safety);

// The warning for a server that evicts lock keys: what evicts, what that
// does to a lock, and the fix (`maxmemory-policy noeviction`, or a Redis of
// its own for locks). The text of every UnsafeServerError. Never names a
// password (nodes are host:port).
TURNSTILE_EXPORT std::string unsafe_server_message(const ServerSafety& safety);

}  // namespace turnstile

#endif  // TURNSTILE_SERVER_CHECK_H_
