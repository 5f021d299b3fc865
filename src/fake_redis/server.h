// fake_redis/server.h
//
// One fake Redis server: a keyspace on a virtual clock, the command table,
// the Lua engine and the pub/sub registry (classic and sharded channels).
// It speaks in argv vectors and Reply values (no sockets, no RESP):
// execute() is what a connection would do for one command, and PUBLISH /
// SPUBLISH hand messages to the subscribed sessions' sinks at once.
// Delivery delays, drops and other faults belong to the simulated network
// between a client and a server, not here.
//
// Everything a script does happens inside one execute() call, at one virtual
// instant, so scripts are atomic with respect to virtual time.
//
// Virtual cost (ServerOptions): each command keeps the server busy for its
// service time, a script for a base cost plus a cost per redis.call, so an
// O(N) script costs O(N). The server is single-threaded: the service times
// add up in busy_until(), and the simulated links (sim/fake_backend.h) wait
// for it before a command runs and before its reply leaves, so commands
// queue behind each other and a herd shows as latency in virtual time. A
// command runs at the instant it is let in; its reply is ready at
// completed_at(). A script costing more than busy_script_threshold makes
// the server answer every other command with BUSY from that threshold until
// the script ends, as redis-server does past busy-reply-threshold.
//
// Thread safety: none. A server belongs to one simulated world, whose
// scheduler runs one task at a time; FakeBackend adds a mutex for tests that
// drive it from real threads.

#ifndef TURNSTILE_FAKE_REDIS_SERVER_H_
#define TURNSTILE_FAKE_REDIS_SERVER_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fake_redis/append_only_file.h"
#include "fake_redis/lua_engine.h"
#include "fake_redis/server_profile.h"
#include "fake_redis/virtual_clock.h"
#include "turnstile/reply.h"
#include "turnstile/sim/server_options.h"

namespace turnstile::sim {

class Keyspace;
struct CommandSpec;
class Server;

// Classic channels (SUBSCRIBE, PUBLISH) and shard channels (SSUBSCRIBE,
// SPUBLISH: Redis 7's sharded pub/sub) are separate namespaces.
enum class ChannelScope : std::uint8_t { classic, shard };

// One client connection's state on a server.
class Session {
 public:
  // Receives (channel, message) for every PUBLISH on a subscribed channel,
  // synchronously from inside the publishing command.
  using MessageSink = std::function<void(std::string_view channel, std::string_view message)>;

  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session();

  std::uint64_t id() const { return id_; }
  // Channels this session is subscribed to, classic or shard.
  const std::set<std::string>& channels(ChannelScope scope = ChannelScope::classic) const {
    return scope == ChannelScope::classic ? channels_ : shard_channels_;
  }
  // RESP2 subscribed mode: subscribed to any channel of either scope.
  bool subscribed() const { return !channels_.empty() || !shard_channels_.empty(); }

 private:
  friend class Server;
  Session(Server* server, std::uint64_t id, MessageSink sink) : server_(server), id_(id), sink_(std::move(sink)) {}

  Server* server_;
  std::uint64_t id_;
  MessageSink sink_;
  std::set<std::string> channels_;
  std::set<std::string> shard_channels_;
};

class Server {
 public:
  explicit Server(const VirtualClock& clock) : Server(clock, ServerOptions()) {}
  Server(const VirtualClock& clock, ServerOptions options)
      : Server(clock, options, ServerProfile::of(ServerRelease::redis_7_0)) {}
  // A server speaking `profile`'s release (server_profile.h); the others
  // speak Redis 7.0.
  Server(const VirtualClock& clock, ServerOptions options, const ServerProfile& profile);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // A new connection. The session must be destroyed before the server; its
  // subscriptions end with it.
  std::unique_ptr<Session> connect(Session::MessageSink sink = nullptr);

  // Runs one command as `session` and returns the reply. Error replies are
  // values carrying Redis's exact text; bad input never throws.
  Reply execute(Session& session, const std::vector<std::string>& argv);

  // Runs one command from inside a script (redis.call / redis.pcall):
  // refuses commands flagged kCommandNoScript with Redis's text.
  Reply execute_from_script(Session& session, const std::vector<std::string>& argv);

  // A restart: the keyspace keeps what ServerOptions::persistence keeps
  // (none: nothing), the script cache is lost, and the server is idle (a
  // script it was running died with it). Sessions stay (their
  // subscriptions are dropped, as after a reconnect). True when a write
  // was lost (AppendOnlyFile::recover).
  bool restart();

  // Delivers `message` to every session subscribed to `channel` in
  // `scope`; returns how many received it (PUBLISH's / SPUBLISH's reply).
  std::int64_t publish(std::string_view channel, std::string_view message, ChannelScope scope = ChannelScope::classic);

  // Subscription bookkeeping, used by the pub/sub commands.
  void subscribe(Session& session, const std::string& channel, ChannelScope scope = ChannelScope::classic);
  void unsubscribe(Session& session, const std::string& channel, ChannelScope scope = ChannelScope::classic);
  // Channels with at least one subscriber, in byte order (PUBSUB CHANNELS,
  // SHARDCHANNELS).
  std::vector<std::string> active_channels(ChannelScope scope = ChannelScope::classic) const;
  // Subscribers of `channel` (PUBSUB NUMSUB, SHARDNUMSUB).
  std::int64_t subscriber_count(std::string_view channel, ChannelScope scope = ChannelScope::classic) const;

  // ---- virtual cost (see the file comment) ----
  const ServerOptions& options() const { return options_; }
  const ServerProfile& profile() const { return profile_; }
  // When a command arriving now is let in: now if the server is idle; the
  // end of the work queued before it; or, while a script runs past the BUSY
  // threshold, the threshold (the command is then answered BUSY).
  Instant answers_at() const;
  // When the reply of the last execute() is ready.
  Instant completed_at() const { return completed_at_; }
  // The server's clock skew (ServerOptions::clock_offset, clock_drift_ppm),
  // changed from now on.
  void set_clock_skew(Duration offset, std::int64_t drift_ppm);
  // What restart() keeps, from now on (the keyspace as it is now counts
  // as fsynced).
  void set_persistence(Persistence persistence);
  const ServerClock& server_clock() const { return server_clock_; }
  // WAITAOF 1 0 for a write made now (RedisOptions::aof_sync): how long
  // until the append-only file has it on disk (always: at once; everysec:
  // at the next whole second of the server's clock, when AppendOnlyFile
  // fsyncs), or nullopt without one (persistence none: appendonly no).
  std::optional<Duration> aof_fsync_wait() const;

  // ---- observers (the simulation's checkers and replication) ----
  // Called after every write command that changes data, top-level or from
  // a script (never for EVAL/EVALSHA themselves: a script's writes arrive
  // one by one, as Redis replicates scripts by their effects).
  using EffectHook = std::function<void(const std::vector<std::string>& argv)>;
  // Called after every top-level command, once its reply is ready.
  using CommandHook = std::function<void()>;
  void set_effect_hook(EffectHook hook) { effect_hook_ = std::move(hook); }
  void set_command_hook(CommandHook hook) { command_hook_ = std::move(hook); }

  // ---- BUGGIFY (simulation, turnstile/sim/buggify.h) ----
  // Asked by name at each of the server's fault points; unset: never fires.
  using FaultHook = std::function<bool(std::string_view point)>;
  void set_fault_hook(FaultHook hook) { fault_hook_ = std::move(hook); }
  bool fault(std::string_view point) const { return fault_hook_ && fault_hook_(point); }
  // Keeps the server busy for `cost` more (from now if it is idle): a
  // command's service time, or a slow script (BUGGIFY).
  void busy_for(Duration cost) { busy_until_ = std::max(busy_until_, clock_.now()) + cost; }
  Instant busy_until() const { return busy_until_; }

  // What the server has run so far (restart() keeps it), for tests that
  // bound the work per lock call: a script that reads or rewrites a whole
  // key moves as many words as the key has entries.
  struct WorkCounters {
    std::uint64_t commands = 0;         // top-level commands
    std::uint64_t scripts = 0;          // of them, EVAL and EVALSHA
    std::uint64_t script_commands = 0;  // redis.call / redis.pcall
    // Of the commands run from scripts: their arguments and the elements
    // of their replies (an array's, nested ones included; 1 otherwise).
    std::uint64_t script_words = 0;
    // Calls by command, top-level and from scripts alike (INFO
    // commandstats' "calls"), by the command's lower-case name.
    std::map<std::string, std::uint64_t, std::less<>> calls;
    // Every command run, top-level and from scripts (commandstats' sum).
    std::uint64_t all_commands() const { return commands + script_commands; }
  };
  const WorkCounters& work() const { return work_; }

  const VirtualClock& clock() const { return clock_; }
  Keyspace& keyspace() { return *keyspace_; }
  // Write effects so far (as the effect hook sees them): a link compares it
  // around a command to learn whether the command wrote (replica sync).
  std::uint64_t write_count() const { return write_count_; }
  LuaEngine& lua() { return lua_; }

 private:
  friend class Session;
  void forget(Session& session);

  using Subscribers = std::map<std::string, std::map<std::uint64_t, Session*>, std::less<>>;
  Subscribers& subscribers(ChannelScope scope) {
    return scope == ChannelScope::classic ? subscribers_ : shard_subscribers_;
  }
  const Subscribers& subscribers(ChannelScope scope) const {
    return scope == ChannelScope::classic ? subscribers_ : shard_subscribers_;
  }
  // The BUSY window of a script running past the threshold, if now is in it.
  bool busy_with_script() const;
  void record_effect(const std::vector<std::string>& argv);
  void count_call(const CommandSpec& spec);

  const VirtualClock& clock_;
  ServerOptions options_;
  const ServerProfile& profile_;
  ServerClock server_clock_;
  std::unique_ptr<Keyspace> keyspace_;
  AppendOnlyFile append_only_file_;
  LuaEngine lua_;
  std::uint64_t next_session_id_ = 1;
  EffectHook effect_hook_;
  CommandHook command_hook_;
  FaultHook fault_hook_;
  Instant busy_until_{};
  Instant completed_at_{};
  // A script past the BUSY threshold: BUSY replies from..until.
  Instant busy_replies_from_{};
  Instant busy_replies_until_{};
  std::uint64_t write_count_ = 0;
  WorkCounters work_;
  // Ordered by session id, never by pointer, so delivery order is
  // deterministic.
  Subscribers subscribers_;
  Subscribers shard_subscribers_;
};

}  // namespace turnstile::sim

#endif  // TURNSTILE_FAKE_REDIS_SERVER_H_
