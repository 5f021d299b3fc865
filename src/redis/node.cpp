#include "redis/node.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <iterator>
#include <string_view>
#include <utility>

#include "core/check.h"
#include "core/info_reply.h"
#include "core/pending_reply.h"
#include "core/script_call.h"
#include "redis/pending_eval.h"
#include "redis/pipelined_evals.h"
#include "turnstile/errors.h"

namespace turnstile::redis {
namespace {

using Clock = std::chrono::steady_clock;

// More replicas than any server keeps: a count above it is taken as this
// (only "some" matters, and the count names them in ReplicaSyncError).
constexpr int kMaxReplicas = 10'000;

// Commands that change the state of the connection they run on. On a pooled
// connection they would leak into the next borrower's calls (another
// database, a half-open transaction, subscriber mode, RESP3), so command()
// refuses them.
constexpr std::array<std::string_view, 19> kConnectionStateCommands = {
    "ASKING",     "AUTH",         "DISCARD",     "EXEC",     "HELLO", "MONITOR", "MULTI",
    "PSUBSCRIBE", "PUNSUBSCRIBE", "QUIT",        "READONLY", "RESET", "SELECT",  "SSUBSCRIBE",
    "SUBSCRIBE",  "SUNSUBSCRIBE", "UNSUBSCRIBE", "UNWATCH",  "WATCH"};

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::toupper(static_cast<unsigned char>(x)) == std::toupper(static_cast<unsigned char>(y));
         });
}

}  // namespace

RedisOptions options_for_endpoint(const RedisOptions& options, const RedisEndpoint& endpoint) {
  RedisOptions result = options;
  result.mode = RedisMode::standalone;
  result.seeds.clear();
  result.unix_socket_path.clear();
  result.host = endpoint.host;
  result.port = endpoint.port;
  return result;
}

bool is_command(const std::vector<std::string>& argv, std::string_view name) {
  return !argv.empty() && equals_ignoring_case(argv[0], name);
}

void check_pooled_command(const std::vector<std::string>& argv) {
  if (argv.empty()) throw InvalidArgumentError("command(): empty argv (argv[0] is the command name)");
  for (const std::string_view refused : kConnectionStateCommands) {
    if (equals_ignoring_case(argv[0], refused)) {
      throw InvalidArgumentError("command(): " + std::string(refused) +
                                 " changes the state of a pooled connection; use subscribe() for "
                                 "pub/sub and a URL for the database and credentials");
    }
  }
}

MasterReply ask_master(Node& node, const std::vector<std::string>& argv) {
  MasterReply answer{.node = node.endpoint(), .reply = Reply::nil(), .failure = nullptr};
  try {
    answer.reply = node.command(argv, false);
  } catch (...) {
    answer.failure = std::current_exception();
  }
  return answer;
}

Node::Node(const RedisOptions& options, bool sharded_pubsub, std::function<void()> on_channel_moved,
           std::shared_ptr<Counters> counters)
    : options_(options),
      counters_(counters_or_new(std::move(counters))),
      pool_(std::make_shared<ConnectionPool>(options, counters_)),
      subscriber_(options, sharded_pubsub, std::move(on_channel_moved), counters_) {
  TURNSTILE_CHECK_MSG(options.mode == RedisMode::standalone, "a cluster or sentinel backend makes one Node per server");
  TURNSTILE_CHECK(pool_ != nullptr);
}

Reply Node::send(Connection& connection, const std::vector<std::string>& argv, bool asking,
                 const std::vector<std::vector<std::string>>& follow_ups, std::vector<Reply>* follow_up_replies) {
  if (!asking && follow_ups.empty()) return connection.command(argv);
  std::vector<std::vector<std::string>> batch;
  if (asking) batch.push_back({"ASKING"});
  batch.push_back(argv);
  batch.insert(batch.end(), follow_ups.begin(), follow_ups.end());
  std::vector<Reply> replies = connection.pipeline(batch);
  TURNSTILE_CHECK(replies.size() == batch.size());
  if (!follow_ups.empty()) {
    TURNSTILE_CHECK(follow_up_replies != nullptr);
    follow_up_replies->assign(std::make_move_iterator(replies.end() - std::ssize(follow_ups)),
                              std::make_move_iterator(replies.end()));
  }
  return std::move(replies[asking ? 1 : 0]);
}

Reply Node::send_evalsha(Connection& connection, const Script& script, const std::vector<std::string>& keys,
                         const std::vector<std::string>& args, bool asking,
                         const std::vector<std::vector<std::string>>& follow_ups,
                         std::vector<Reply>* follow_up_replies) {
  if (!asking && follow_ups.empty()) {
    return connection.command({"EVALSHA", script.sha1, std::to_string(keys.size())}, {&keys, &args});
  }
  return send(connection, evalsha_argv(script, keys, args), asking, follow_ups, follow_up_replies);
}

Reply Node::eval(const Script& script, const std::vector<std::string>& keys, const std::vector<std::string>& args,
                 bool asking, ConnectionPool::SendWithin send_within) {
  // One connection for EVALSHA and, on NOSCRIPT, SCRIPT LOAD and the retry.
  return pool_->with_connection(
      [&](Connection& connection) {
        return eval_parts_with_reload(
            script, keys, [&] { return send_evalsha(connection, script, keys, args, asking, {}, nullptr); },
            [&](const std::vector<std::string>& argv) { return send(connection, argv, asking, {}, nullptr); },
            [&](const Script& loaded) { counters_->script_loads.loaded(connection.endpoint(), loaded); });
      },
      send_within);
}

namespace {

// WAIT and WAITAOF answer UNBLOCKED when the master turned into a replica
// while they waited (a failover: "instance state changed (master ->
// replica?)") or an operator ran CLIENT UNBLOCK ... ERROR: nothing was
// confirmed, so the grant is unsafe and undone (the undo on a demoted
// master is refused as READONLY: a failover in progress, tried again while
// the wait lasts). Any other error reply is raised.
bool unblocked(const Reply& reply) {
  if (!reply.is_error()) return false;
  const std::string& text = reply.as_string();
  return text.rfind("UNBLOCKED", 0) == 0;
}

}  // namespace

ReplicaAck grant_ack(const GrantSync& sync, const std::vector<Reply>& pipelined, const Reply* waitaof,
                     const std::string& endpoint) {
  TURNSTILE_CHECK(sync.replicas >= 0);
  TURNSTILE_CHECK(pipelined.size() == sync.pipelined.size());
  TURNSTILE_CHECK(sync.pipelined.size() == (sync.replicas > 0 ? 1u : 0u));
  TURNSTILE_CHECK((waitaof != nullptr) == sync.aof());
  ReplicaAck ack{.replicas = sync.replicas, .aof_asked = sync.aof()};
  if (sync.replicas > 0 && unblocked(pipelined.front())) {
    ack.acknowledged = 0;
  } else if (sync.replicas > 0) {
    const Reply& wait = raise_if_error(pipelined.front());
    if (!wait.is_integer() || wait.as_integer() < 0) {
      throw ProtocolError("redis " + endpoint + ": WAIT answered " + wait.to_string() + ", expected a replica count");
    }
    ack.acknowledged = static_cast<int>(wait.as_integer());
  }
  if (waitaof != nullptr && unblocked(*waitaof)) {
    ack.aof_synced = false;
  } else if (waitaof != nullptr) {
    // [local fsyncs, replicas' fsyncs]; 0 replicas were asked for.
    const Reply& counts = raise_if_error(*waitaof);
    if (!counts.is_array() || counts.as_array().size() != 2 || !counts.as_array()[0].is_integer() ||
        counts.as_array()[0].as_integer() < 0) {
      throw ProtocolError("redis " + endpoint + ": WAITAOF answered " + counts.to_string() +
                          ", expected two fsync counts");
    }
    ack.aof_synced = counts.as_array()[0].as_integer() >= 1;
  }
  return ack;
}

GrantSync Node::grant_sync(Connection& connection) {
  GrantSync sync;
  if (options_.aof_sync) {
    // Before the script: a server that cannot confirm the fsync gets no grant.
    if (const std::optional<std::string> problem = aof_sync_problem(connection)) {
      throw UnsafeServerError(detail::aof_sync_refusal(connection.endpoint(), *problem));
    }
    // Alone on the wire: its reply is read within one command timeout,
    // with room left for the round trip.
    const int cap_ms = std::max(1, options_.command_timeout_ms * 3 / 4);
    sync.waitaof = {"WAITAOF", "1", "0", std::to_string(std::min(options_.aof_sync_timeout_ms, cap_ms))};
  }
  sync.replicas = options_.replica_sync ? replica_count(connection) : 0;
  TURNSTILE_CHECK(sync.replicas == 0 || options_.replica_sync);
  if (sync.replicas > 0) {
    // Capped so that the script's and WAIT's replies arrive within the
    // socket's read timeout.
    const int cap_ms = std::max(1, options_.command_timeout_ms / 2);
    sync.pipelined.push_back({"WAIT", "1", std::to_string(std::min(options_.replica_sync_timeout_ms, cap_ms))});
  }
  return sync;
}

SyncedReply Node::eval_synced(const Script& script, const std::vector<std::string>& keys,
                              const std::vector<std::string>& args, bool asking,
                              ConnectionPool::SendWithin send_within) {
  return pool_->with_connection(
      [&](Connection& connection) {
        const GrantSync sync = grant_sync(connection);
        const std::vector<std::vector<std::string>> none;
        std::vector<Reply> wait_replies;
        // WAIT only after the script itself (not after SCRIPT LOAD).
        Reply reply = eval_parts_with_reload(
            script, keys,
            [&] { return send_evalsha(connection, script, keys, args, asking, sync.pipelined, &wait_replies); },
            [&](const std::vector<std::string>& argv) { return send(connection, argv, asking, none, &wait_replies); },
            [&](const Script& loaded) { counters_->script_loads.loaded(connection.endpoint(), loaded); });
        // The script's reply is in (an error reply was raised): its writes
        // are flushed, and fsynced with appendfsync always.
        std::optional<Reply> waitaof;
        if (sync.aof()) waitaof = connection.command(sync.waitaof);
        return SyncedReply{std::move(reply),
                           grant_ack(sync, wait_replies, waitaof ? &*waitaof : nullptr, connection.endpoint())};
      },
      send_within);
}

std::unique_ptr<PendingReply> Node::send_eval(const Script& script, const std::vector<std::string>& keys,
                                              const std::vector<std::string>& args, EvalSync sync,
                                              ConnectionPool::SendWithin send_within) {
  ConnectionPool::Lease lease;
  try {
    lease = pool_->lease(send_within);
    // INFO, when the replica count is stale, is one blocking round trip.
    GrantSync follow_ups = sync == EvalSync::replicas ? grant_sync(*lease) : GrantSync{};
    return std::make_unique<PendingEval>(std::move(lease), script, evalsha_argv(script, keys, args),
                                         std::move(follow_ups), counters_);
  } catch (const std::exception&) {
    lease.give_back();  // INFO failed: dropped if that broke the connection
    return std::make_unique<CompletedReply>(std::current_exception());
  }
}

std::vector<std::unique_ptr<PendingReply>> Node::send_evals(std::vector<EvalRequest> calls) {
  std::vector<std::unique_ptr<PendingReply>> pending;
  pending.reserve(calls.size());
  for (std::size_t begin = 0; begin < calls.size(); begin += kMaxPipelinedEvals) {
    const std::size_t end = std::min(calls.size(), begin + kMaxPipelinedEvals);
    std::vector<EvalRequest> part(std::make_move_iterator(calls.begin() + static_cast<std::ptrdiff_t>(begin)),
                                  std::make_move_iterator(calls.begin() + static_cast<std::ptrdiff_t>(end)));
    ConnectionPool::Lease lease;
    try {
      lease = pool_->lease();
    } catch (const std::exception&) {
      for (std::size_t i = begin; i < end; ++i)
        pending.push_back(std::make_unique<CompletedReply>(std::current_exception()));
      continue;
    }
    for (std::unique_ptr<PendingReply>& sent : pipeline_evals(std::move(lease), std::move(part), counters_)) {
      pending.push_back(std::move(sent));
    }
  }
  TURNSTILE_CHECK(pending.size() == calls.size());
  return pending;
}

Reply Node::command(const std::vector<std::string>& argv, bool asking) {
  return pool_->with_connection([&](Connection& connection) { return send(connection, argv, asking, {}, nullptr); });
}

namespace {

// The replicas attached to the server of `connection`. Every replica,
// whatever its state: one still in its first full sync can be promoted by
// a failover too, and WAIT counts it only once it has the data. ROLE lists
// only the replicas online, so a grant during a replica's first sync
// waited for nobody (issue #50); it is asked only where INFO is refused
// (renamed away, an ACL without it).
int read_replica_count(Connection& connection) {
  const Reply info = connection.command({"INFO", "replication"});
  if (info.is_error()) {
    // ROLE on a master: ["master", offset, [[ip, port, offset], ...]].
    const Reply role = raise_if_error(connection.command({"ROLE"}));
    if (role.is_array() && role.as_array().size() >= 3 && role.as_array()[0].is_bulk() &&
        role.as_array()[0].as_string() == "master" && role.as_array()[2].is_array()) {
      return static_cast<int>(std::min<std::size_t>(role.as_array()[2].as_array().size(), kMaxReplicas));
    }
    return 0;
  }
  if (!info.is_bulk()) {
    throw ProtocolError("redis " + connection.endpoint() + ": INFO replication answered " + info.to_string() +
                        ", expected its text");
  }
  if (detail::info_field(info.as_string(), "role") != "master") return 0;
  const std::optional<std::int64_t> attached = detail::info_count(info.as_string(), "connected_slaves");
  if (!attached) {
    throw ProtocolError("redis " + connection.endpoint() + ": INFO replication has no connected_slaves count");
  }
  return static_cast<int>(std::min<std::int64_t>(*attached, kMaxReplicas));
}

// Why the server of `connection` cannot confirm a grant's fsync to its
// append-only file (detail::aof_sync_problem), or nullopt.
std::optional<std::string> read_aof_sync_problem(Connection& connection) {
  const auto section = [&](const char* name) {
    const Reply info = raise_if_error(connection.command({"INFO", name}));
    if (!info.is_bulk()) {
      throw ProtocolError("redis " + connection.endpoint() + ": INFO " + name + " answered " + info.to_string() +
                          ", expected its text");
    }
    return info.as_string();
  };
  return detail::aof_sync_problem(section("server"), section("persistence"));
}

}  // namespace

std::optional<std::string> Node::aof_sync_problem(Connection& connection) {
  const auto now = Clock::now();
  {
    const MutexLock lock(replicas_mutex_);
    if (aof_known_ && now - aof_checked_ < std::chrono::milliseconds(kReplicaCountRefreshMs)) return aof_problem_;
  }
  std::optional<std::string> problem = read_aof_sync_problem(connection);
  const MutexLock lock(replicas_mutex_);
  aof_problem_ = problem;
  aof_checked_ = now;
  aof_known_ = true;
  return problem;
}

int Node::replica_count(Connection& connection) {
  const auto now = Clock::now();
  {
    const MutexLock lock(replicas_mutex_);
    if (replicas_known_ && now - replicas_checked_ < std::chrono::milliseconds(kReplicaCountRefreshMs)) {
      return replicas_;
    }
  }
  const int replicas = read_replica_count(connection);
  const MutexLock lock(replicas_mutex_);
  TURNSTILE_CHECK(replicas >= 0);
  replicas_ = replicas;
  replicas_checked_ = now;
  replicas_known_ = true;
  return replicas;
}

}  // namespace turnstile::redis
