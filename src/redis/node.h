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
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "redis/connection_pool.h"
#include "redis/subscriber.h"
#include "turnstile/backend.h"
#include "turnstile/mutex.h"
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

// What follows a grant's script on its connection: WAIT 1 for the
// master's `replicas` replicas (replica sync, when it has any), pipelined
// behind the script; then, with RedisOptions::aof_sync, WAITAOF 1 0 for
// its own append-only file, sent once the script's reply is in. (Pipelined
// too, it would reach the server before the script's write is flushed,
// and the server would answer it at its next cron tick, 100 ms later, even
// with appendfsync always; sent after the reply, which the server writes
// only after an `always` fsync, it is answered at once.)
struct GrantSync {
  std::vector<std::vector<std::string>> pipelined;  // WAIT, or nothing
  std::vector<std::string> waitaof;                 // empty: none
  int replicas = 0;
  bool aof() const { return !waitaof.empty(); }
};

// What `sync`'s commands answered: `pipelined` one reply each, in order,
// and `waitaof` (null without aof). Raises an error reply, and
// ProtocolError naming `endpoint` if a reply is not WAIT's replica count
// or WAITAOF's pair of counts.
ReplicaAck grant_ack(const GrantSync& sync, const std::vector<Reply>& pipelined, const Reply* waitaof,
                     const std::string& endpoint);

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
  // connection when replica sync is on and the server has replicas, and
  // then WAITAOF 1 0 <aof_sync_timeout_ms> with aof_sync (GrantSync). The
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
  // The calls, pipelined kMaxPipelinedEvals at a time on connections leased
  // from the pool (redis/pipelined_evals.h), as send_eval() with
  // EvalSync::none would send each. A failure to lease a connection is the
  // outcome of the calls meant for it.
  std::vector<std::unique_ptr<PendingReply>> send_evals(std::vector<EvalRequest> calls);
  // One command; error replies are returned as values, not raised.
  Reply command(const std::vector<std::string>& argv, bool asking);

  Subscriber& subscriber() { return subscriber_; }

 private:
  // The replicas attached to `connection`'s server (INFO replication),
  // re-read at most every kReplicaCountRefreshMs.
  int replica_count(Connection& connection);
  // With aof_sync: why `connection`'s server cannot confirm a grant's AOF
  // fsync (older than 7.2, appendonly no), or nullopt if it can; re-read
  // at most every kReplicaCountRefreshMs.
  std::optional<std::string> aof_sync_problem(Connection& connection);
  // What to pipeline after a grant's script on `connection` (GrantSync).
  // Throws UnsafeServerError when aof_sync is asked of a server that cannot.
  GrantSync grant_sync(Connection& connection);
  // `argv`, preceded by ASKING if `asking`, followed by `follow_ups`,
  // whose replies go to `follow_up_replies`.
  static Reply send(Connection& connection, const std::vector<std::string>& argv, bool asking,
                    const std::vector<std::vector<std::string>>& follow_ups, std::vector<Reply>* follow_up_replies);
  // send() of `script`'s EVALSHA: written from its parts (no argv copied)
  // when nothing goes before or after it.
  static Reply send_evalsha(Connection& connection, const Script& script, const std::vector<std::string>& keys,
                            const std::vector<std::string>& args, bool asking,
                            const std::vector<std::vector<std::string>>& follow_ups,
                            std::vector<Reply>* follow_up_replies);

  const RedisOptions options_;
  const std::shared_ptr<Counters> counters_;
  const std::shared_ptr<ConnectionPool> pool_;  // shared with leases
  Subscriber subscriber_;

  Mutex replicas_mutex_;
  int replicas_ TURNSTILE_GUARDED_BY(replicas_mutex_) = 0;
  std::chrono::steady_clock::time_point replicas_checked_ TURNSTILE_GUARDED_BY(replicas_mutex_) = {};
  bool replicas_known_ TURNSTILE_GUARDED_BY(replicas_mutex_) = false;
  std::optional<std::string> aof_problem_ TURNSTILE_GUARDED_BY(replicas_mutex_);
  std::chrono::steady_clock::time_point aof_checked_ TURNSTILE_GUARDED_BY(replicas_mutex_) = {};
  bool aof_known_ TURNSTILE_GUARDED_BY(replicas_mutex_) = false;
};

}  // namespace turnstile::redis

#endif  // TURNSTILE_REDIS_NODE_H_
