// redis/sentinel_backend.h
//
// The Backend for a master managed by Redis Sentinel (RedisMode::sentinel;
// see turnstile/redis_backend.h).
//
//   * resolve_master() asks the sentinels in order (SENTINEL
//     GET-MASTER-ADDR-BY-NAME) and returns the first address given; the
//     sentinels' own credentials are sentinel_user / sentinel_password.
//     A call with the caller's deadline (EvalOptions::send_within,
//     SubscribeOptions::confirm_within) that has to find the master ends
//     the lookup by that deadline, and so do its READONLY retries.
//   * The backend talks to that master through one Node. It resolves again
//     when a call fails with a transport error (in the background; the call's
//     error goes to the caller, since the command may have run), when a call
//     is refused with READONLY or NOREPLICAS (at once, and the call is
//     retried on the master found up to kMaxSentinelAttempts times in all: a
//     refused write did not run; NOREPLICAS is a failover's old master with
//     min-replicas-to-write, its replica promoted away), and when any sentinel announces +switch-master (each sentinel
//     is watched by a subscriber of its own). Subscriptions then move to
//     the new master and their handlers get PubSubEvent::Kind::resubscribed.

#ifndef TURNSTILE_REDIS_SENTINEL_BACKEND_H_
#define TURNSTILE_REDIS_SENTINEL_BACKEND_H_

#include <chrono>
#include <memory>
#include <optional>

#include "turnstile/backend.h"
#include "turnstile/redis_backend.h"

namespace turnstile::redis {

inline constexpr int kMaxSentinelAttempts = 4;

// The current master's address. Throws ConnectionError naming the sentinels
// if none answers, or none knows the master. `callers_deadline`, when given,
// bounds each sentinel's handshake and answer, and the lookup as a whole:
// cut short, it throws PoolExhaustedError (nothing of the caller's was sent).
RedisEndpoint resolve_master(const RedisOptions& options,
                             const std::optional<std::chrono::steady_clock::time_point>& callers_deadline = {});

std::unique_ptr<Backend> make_sentinel_backend(const RedisOptions& options);

}  // namespace turnstile::redis

#endif  // TURNSTILE_REDIS_SENTINEL_BACKEND_H_
