// redis/node.h
//
// One Redis server as every backend mode uses it: a connection pool for
// commands and scripts, a subscriber for pub/sub (classic or sharded), and
// the master's replica count for replica-sync safety. The standalone backend
// has one Node; the cluster backend one per master; the sentinel backend one
// for the current master (a new one after a failover).
//
// Calls may be preceded by ASKING (cluster ASK redirection): the flag covers
// exactly the next command, so it is pipelined in front of each command of
// the call on the same connection.
//
// Thread-safe.

#ifndef TURNSTILE_REDIS_NODE_H_
#define TURNSTILE_REDIS_NODE_H_

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "redis/connection_pool.h"
#include "redis/subscriber.h"
#include "turnstile/backend.h"
#include "turnstile/redis_backend.h"

namespace turnstile::redis {

// Refuses (InvalidArgumentError) an empty argv and commands that change the
// state of the pooled connection they run on (SELECT, MULTI, SUBSCRIBE, ...).
void check_pooled_command(const std::vector<std::string>& argv);

// `options` pointed at the single server `endpoint` (standalone mode, no
// seeds): how cluster nodes, sentinels and a sentinel's master are reached.
RedisOptions options_for_endpoint(const RedisOptions& options, const RedisEndpoint& endpoint);

// Whether `argv[0]` is `name`, ignoring case.
bool is_command(const std::vector<std::string>& argv, std::string_view name);

// What WAIT answered after a script, for a master with `replicas` replicas
// (`wait_reply` unused when there are none). Raises an error reply, and
// ProtocolError naming `endpoint` if the reply is not a replica count.
ReplicaAck replica_ack(int replicas, const Reply& wait_reply, const std::string& endpoint);

class Node;

// `argv` sent to `node`, for Backend::command_each_master(): the reply (an
// error reply as a value), or the failure to ask caught in `failure`.
MasterReply ask_master(Node& node, const std::vector<std::string>& argv);

class Node {
 public:
  // `options` name this server (standalone host/port or socket). With
  // `sharded_pubsub`, subscriptions use SSUBSCRIBE; `on_channel_moved` is
  // told when the server drops a sharded channel (its slot moved).
  // Its pool, subscriber and pipelined calls count into `counters` (a
  // fresh set if null).
  Node(const RedisOptions& options, bool sharded_pubsub, std::function<void()> on_channel_moved = {},
       std::shared_ptr<Counters> counters = nullptr);
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const RedisOptions& options() const { return options_; }
  std::string endpoint() const { return options_.endpoint(); }

  // EVALSHA with reload on NOSCRIPT; top-level error replies raised. The
  // wait for a pooled connection ends by `send_within` too, if given.
  Reply eval(const Script& script, const std::vector<std::string>& keys, const std::vector<std::string>& args,
             bool asking, ConnectionPool::SendWithin send_within = std::nullopt);
  // eval(), plus WAIT 1 <replica_sync_timeout_ms> pipelined on the same
  // connection when replica sync is on and the server has replicas. The
  // wait for a pooled connection ends by `send_within` too, if given.
  SyncedReply eval_synced(const Script& script, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args, bool asking,
                          ConnectionPool::SendWithin send_within = std::nullopt);
  // eval() (EvalSync::none) or eval_synced() (EvalSync::replicas) without
  // ASKING, pipelined on a connection leased from the pool
  // (redis/pending_eval.h). Failures before anything is sent (no connection,
  // INFO failed) are kept for get(). With EvalSync::replicas, a replica
  // count older than kReplicaCountRefreshMs is re-read first (INFO, one
  // blocking round trip). The wait for a pooled connection ends by
  // `send_within` too, if given (PoolExhaustedError kept for get()).
  std::unique_ptr<PendingReply> send_eval(const Script& script, const std::vector<std::string>& keys,
                                          const std::vector<std::string>& args, EvalSync sync,
                                          ConnectionPool::SendWithin send_within = std::nullopt);
  // One command; error replies are returned as values, not raised.
  Reply command(const std::vector<std::string>& argv, bool asking);

  Subscriber& subscriber() { return subscriber_; }

 private:
  // The replicas attached to `connection`'s server (INFO replication),
  // re-read at most every kReplicaCountRefreshMs.
  int replica_count(Connection& connection);
  // The WAIT to pipeline after a script on `connection`, and for how many
  // replicas: none when replica sync is off or the master has no replicas.
  std::pair<std::vector<std::string>, int> wait_command(Connection& connection);
  // `argv`, preceded by ASKING if `asking`, followed by `wait` if not empty.
  static Reply send(Connection& connection, const std::vector<std::string>& argv, bool asking,
                    const std::vector<std::string>& wait, Reply* wait_reply);

  const RedisOptions options_;
  const std::shared_ptr<Counters> counters_;
  const std::shared_ptr<ConnectionPool> pool_;  // shared with leases
  Subscriber subscriber_;

  std::mutex replicas_mutex_;
  int replicas_ = 0;
  std::chrono::steady_clock::time_point replicas_checked_{};
  bool replicas_known_ = false;
};

}  // namespace turnstile::redis

#endif  // TURNSTILE_REDIS_NODE_H_
