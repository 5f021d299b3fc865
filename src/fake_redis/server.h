// fake_redis/server.h
//
// One fake Redis server: a keyspace on a virtual clock, the command table,
// the Lua engine and the pub/sub registry. It speaks in argv vectors and
// Reply values (no sockets, no RESP): execute() is what a connection would do
// for one command, and PUBLISH hands messages to the subscribed sessions'
// sinks at once. Delivery delays, drops and other faults belong to the
// simulated network between a client and a server, not here.
//
// Everything a script does happens inside one execute() call, at one virtual
// instant, so scripts are atomic with respect to virtual time.
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

#include "fake_redis/lua_engine.h"
#include "fake_redis/virtual_clock.h"
#include "turnstile/reply.h"

namespace turnstile::sim {

class Keyspace;
class Server;

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
  // Channels this session is subscribed to (RESP2 subscribed mode when non-empty).
  const std::set<std::string>& channels() const { return channels_; }

 private:
  friend class Server;
  Session(Server* server, std::uint64_t id, MessageSink sink) : server_(server), id_(id), sink_(std::move(sink)) {}

  Server* server_;
  std::uint64_t id_;
  MessageSink sink_;
  std::set<std::string> channels_;
};

class Server {
 public:
  explicit Server(const VirtualClock& clock);
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

  // Restart without persistence: keyspace and script cache are lost.
  // Sessions stay (their subscriptions are dropped, as after a reconnect).
  void restart();

  // Delivers `message` to every session subscribed to `channel`; returns how
  // many received it (PUBLISH's reply).
  std::int64_t publish(std::string_view channel, std::string_view message);

  // Subscription bookkeeping, used by the pub/sub commands.
  void subscribe(Session& session, const std::string& channel);
  void unsubscribe(Session& session, const std::string& channel);
  // Channels with at least one subscriber, in byte order (PUBSUB CHANNELS).
  std::vector<std::string> active_channels() const;
  // Subscribers of `channel` (PUBSUB NUMSUB).
  std::int64_t subscriber_count(std::string_view channel) const;

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
  // A slow script keeps the server busy for `cost` from now (added to any
  // busy time left): links wait until busy_until() before a command runs
  // and before its reply leaves.
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

  const VirtualClock& clock_;
  std::unique_ptr<Keyspace> keyspace_;
  LuaEngine lua_;
  std::uint64_t next_session_id_ = 1;
  EffectHook effect_hook_;
  CommandHook command_hook_;
  FaultHook fault_hook_;
  Instant busy_until_{};
  std::uint64_t write_count_ = 0;
  WorkCounters work_;
  // Ordered by session id, never by pointer, so delivery order is
  // deterministic.
  std::map<std::string, std::map<std::uint64_t, Session*>, std::less<>> subscribers_;
};

}  // namespace turnstile::sim

#endif  // TURNSTILE_FAKE_REDIS_SERVER_H_
