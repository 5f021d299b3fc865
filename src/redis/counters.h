// redis/counters.h
//
// What a Redis backend counts for BackendCounters (turnstile/backend.h),
// and which server process each of its endpoints was last seen to be
// (redis/server_identity.h), shared by its nodes, their pools, subscribers
// and pipelined calls, which may outlive one another: held by shared_ptr.
// Relaxed atomics.

#ifndef TURNSTILE_REDIS_COUNTERS_H_
#define TURNSTILE_REDIS_COUNTERS_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "redis/server_identity.h"
#include "turnstile/backend.h"
#include "turnstile/script_call.h"

namespace turnstile::redis {

struct Counters {
  // Connections opened again after one broke: by a pool after it dropped a
  // broken connection (one per recovery), by a subscriber each time it
  // re-established its connection.
  std::atomic<std::uint64_t> reconnects{0};
  // Scripts loaded after NOSCRIPT, by endpoint: a second load is a reload.
  ScriptLoadCounter script_loads;
  // Every connection opened reports its server's run_id here; restarts are
  // told to the backend's restart watches.
  const std::shared_ptr<ServerIdentities> identities = std::make_shared<ServerIdentities>();

  BackendCounters read() const {
    return {.reconnects = reconnects.load(std::memory_order_relaxed),
            .script_reloads = script_loads.reloads(),
            .server_restarts = identities->restarts()};
  }
};

// `counters`, or a fresh set when it is null (a node or pool made alone).
inline std::shared_ptr<Counters> counters_or_new(std::shared_ptr<Counters> counters) {
  return counters != nullptr ? std::move(counters) : std::make_shared<Counters>();
}

}  // namespace turnstile::redis

#endif  // TURNSTILE_REDIS_COUNTERS_H_
