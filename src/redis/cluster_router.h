// redis/cluster_router.h
//
// The client side of Redis Cluster routing: the slot map (which master owns
// each of the 16384 slots, from CLUSTER SLOTS), one Node per master, and the
// retry loop that follows redirections.
//
//   * The map is loaded by the first call, from the seeds (then from every
//     node known), and reloaded after MOVED (the one slot is corrected at
//     once, the whole map in the background), CLUSTERDOWN or a lost
//     connection. The server's support for sharded pub/sub (SPUBLISH in
//     COMMAND INFO, Redis >= 7.0) is read with the first map and fixed for
//     the router's life.
//   * A failover is found by comparing each loaded map with the one before:
//     a slot whose master is now the node listed as that master's replica
//     is on a promoted replica, which may lack the latest writes (a replica
//     in its first sync, or one behind another, can be promoted by
//     CLUSTER FAILOVER TAKEOVER or an election). The new master is then
//     reported as a new server (ServerIdentities::restarted), as a
//     Sentinel backend reports a switch: a Client takes its holds as lost,
//     at the first map load after the promotion (its first contact with
//     the old master, answered MOVED or refused, asks for one).
//   * route() runs a call on the slot's master: MOVED -> that node; ASK ->
//     the named node with ASKING, once; TRYAGAIN / CLUSTERDOWN -> backoff and
//     again. At most kMaxClusterAttempts sends, then ClusterRedirectError.
//     Any other error (and transport errors) go to the caller unchanged.
//
// Thread-safe.

#ifndef TURNSTILE_REDIS_CLUSTER_ROUTER_H_
#define TURNSTILE_REDIS_CLUSTER_ROUTER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "redis/backoff.h"
#include "redis/node.h"
#include "redis/refresh_thread.h"
#include "redis/slot.h"
#include "turnstile/errors.h"
#include "turnstile/mutex.h"
#include "turnstile/redis_backend.h"

namespace turnstile::redis {

// One range of CLUSTER SLOTS: slots first..last served by `master`, with
// the node ids of the master and of its replicas (empty where the server
// gives none).
struct SlotRange {
  int first = 0;
  int last = 0;
  RedisEndpoint master;
  std::string master_id;
  std::vector<std::string> replica_ids;
};

// Parses a CLUSTER SLOTS reply; a master given without an address ("" or
// "?") is taken to be `asked` (the node that answered). Throws ProtocolError.
std::vector<SlotRange> parse_cluster_slots(const Reply& reply, const RedisEndpoint& asked);

// The target of "MOVED <slot> <host>:<port>" / "ASK <slot> <host>:<port>".
struct Redirect {
  int slot = 0;
  RedisEndpoint target;
};
// Throws ProtocolError for a malformed message.
Redirect parse_redirect(std::string_view message);

// The slot shared by every key of `keys`; nullopt if there are none. Throws
// InvalidArgumentError naming the keys and their slots if they differ (Redis
// would refuse with CROSSSLOT, or worse, run on part of them).
std::optional<int> common_slot(std::string_view what, const std::vector<std::string>& keys);

class ClusterRouter {
 public:
  // `on_topology_changed` runs (on the refresh thread) after each map reload.
  // Every node counts into `counters`.
  ClusterRouter(const RedisOptions& options, std::function<void()> on_topology_changed,
                std::shared_ptr<Counters> counters);
  ~ClusterRouter();
  ClusterRouter(const ClusterRouter&) = delete;
  ClusterRouter& operator=(const ClusterRouter&) = delete;

  // The master owning `slot` (loading the map on first use). Throws
  // ConnectionError if no seed answers, ClusterRedirectError if the slot is
  // not served.
  std::shared_ptr<Node> owner(int slot);
  // Any master (for calls without keys).
  std::shared_ptr<Node> any_master();
  // Every master currently in the map.
  std::vector<std::shared_ptr<Node>> masters();
  // Whether the cluster has sharded pub/sub (loads the map if needed; false
  // if it cannot be loaded).
  bool sharded_pubsub();

  // Reloads the map now, from any node that answers.
  void refresh();
  // Asks for a reload in the background.
  void request_refresh() { refresher_.request(); }

  // Runs `call(node, asking)` for `slot` with the redirection rules above.
  // `what` names the call for errors ("script 'x' on key 'k'").
  template <typename Call>
  auto route(int slot, std::string_view what, Call&& call) {
    std::shared_ptr<Node> ask_target;
    std::string last_answer;
    Backoff backoff;
    for (int attempt = 1; attempt <= kMaxClusterAttempts; ++attempt) {
      const bool asking = ask_target != nullptr;
      const std::shared_ptr<Node> node = asking ? std::move(ask_target) : owner(slot);
      ask_target.reset();
      try {
        return call(*node, asking);
      } catch (const ServerError& error) {
        last_answer = error.server_message();
        if (!follow(error, node->options(), ask_target, backoff)) throw;
      } catch (const ConnectionError&) {
        refresher_.request();  // the node may have failed over
        throw;
      }
    }
    throw ClusterRedirectError("redis cluster " + options_.endpoint() + ": " + std::string(what) + " (slot " +
                               std::to_string(slot) + ") still redirected after " +
                               std::to_string(kMaxClusterAttempts) +
                               " attempts (kMaxClusterAttempts), last: " + last_answer);
  }

 private:
  // Acts on a redirection-class error; returns false if `error` is not one.
  bool follow(const ServerError& error, const RedisOptions& from, std::shared_ptr<Node>& ask_target, Backoff& backoff);
  std::shared_ptr<Node> node_at_locked(const RedisEndpoint& endpoint) TURNSTILE_REQUIRES(mutex_);
  void ensure_loaded();
  // Loads from `endpoint`; false if it cannot be reached or answers oddly.
  // Throws TlsVerificationError if its certificate fails verification.
  bool load_from(const RedisEndpoint& endpoint) TURNSTILE_REQUIRES(load_mutex_);
  RedisOptions node_options(const RedisEndpoint& endpoint) const;
  // Whether the last map loaded listed `node_id` as a replica of
  // `master_id` (false if either is unknown).
  bool was_replica_of_locked(const std::string& node_id, const std::string& master_id) const TURNSTILE_REQUIRES(mutex_);

  const RedisOptions options_;
  const std::shared_ptr<Counters> counters_;
  const std::function<void()> on_topology_changed_;
  Mutex mutex_;
  std::map<std::string, std::shared_ptr<Node>> nodes_ TURNSTILE_GUARDED_BY(mutex_);  // by "host:port"; never shrinks
  std::vector<std::shared_ptr<Node>> owners_ TURNSTILE_GUARDED_BY(mutex_);           // by slot; null if unserved
  // From the last map loaded (load_from): each slot's master's node id
  // ("" if unserved or unnamed), and each replica's master by node id.
  std::vector<std::string> owner_ids_ TURNSTILE_GUARDED_BY(mutex_);
  std::map<std::string, std::string> replica_of_ TURNSTILE_GUARDED_BY(mutex_);
  bool loaded_ TURNSTILE_GUARDED_BY(mutex_) = false;
  std::atomic<int> sharded_{-1};  // -1 unknown, 0 no, 1 yes
  Mutex load_mutex_;              // one load at a time
  RefreshThread refresher_;       // last: its thread uses the members above
};

}  // namespace turnstile::redis

#endif  // TURNSTILE_REDIS_CLUSTER_ROUTER_H_
