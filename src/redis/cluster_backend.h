// redis/cluster_backend.h
//
// The Backend for a Redis Cluster (RedisMode::cluster; see
// turnstile/redis_backend.h for the behaviour). Scripts and commands go
// through a ClusterRouter (redis/cluster_router.h); subscriptions through a
// SubscriptionRouter that moves them when their slot moves.
//
// command() routes by argv[1] as a key, except commands without a key:
// FLUSHALL, FLUSHDB and SCRIPT go to every master (the first master's reply
// is returned), the others in kKeylessCommands to any master.

#ifndef TURNSTILE_REDIS_CLUSTER_BACKEND_H_
#define TURNSTILE_REDIS_CLUSTER_BACKEND_H_

#include <memory>

#include "turnstile/backend.h"
#include "turnstile/redis_backend.h"

namespace turnstile::redis {

std::unique_ptr<Backend> make_cluster_backend(const RedisOptions& options);

}  // namespace turnstile::redis

#endif  // TURNSTILE_REDIS_CLUSTER_BACKEND_H_
