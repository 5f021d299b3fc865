// turnstile/backend.h
//
// The narrow interface lock code talks to. Two implementations exist: the
// real one over hiredis (turnstile/redis_backend.h) and the fake Redis on a
// virtual clock (turnstile/sim/...). Locks only ever
//
//   * evaluate one of the embedded scripts with KEYS and ARGV (every state
//     change and PUBLISH happens inside a script, atomically), and
//   * subscribe to wake-up channels, to wait without polling.
//
// send_eval() is eval() split in two: the request goes out now, the reply
// is collected later, so one thread can have a call in flight on several
// backends at once (RedLock asks every node in parallel without a thread
// per node).
//
// command() sends a single arbitrary command; it exists for tools and tests
// (the CLI's status, SCRIPT FLUSH in a test), never for the lock hot path.
// command_each_master() sends one to every master the backend writes locks
// to (a cluster has several), for checks of the servers' configuration
// (turnstile/server_check.h).
//
// Errors: an error reply at the top level of a call is raised as the
// matching ServerError subclass (errors.h); transport failures raise
// ConnectionError or TimeoutError. No call blocks longer than the backend's
// configured command timeout.
//
// Thread safety: every method may be called from any thread. Pub/sub handlers
// run on a thread of the backend's choosing (the real backend's reader
// thread, the simulation's scheduler) and must not block; they typically
// notify a Runtime Event.

#ifndef TURNSTILE_BACKEND_H_
#define TURNSTILE_BACKEND_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "turnstile/export.h"
#include "turnstile/reply.h"
#include "turnstile/script.h"

namespace turnstile {

// What a subscription handler is told.
struct TURNSTILE_EXPORT PubSubEvent {
  enum class Kind : std::uint8_t {
    // A message was published on the channel.
    message,
    // The subscription was re-established after a lost connection. Messages
    // may have been missed meanwhile, so waiters must re-check the state.
    resubscribed,
  };
  Kind kind = Kind::message;
  std::string_view channel;
  std::string_view payload;  // empty for resubscribed
};

using PubSubHandler = std::function<void(const PubSubEvent&)>;

// What eval_synced() learned about the replication of a script's writes.
struct TURNSTILE_EXPORT ReplicaAck {
  // Replicas the master had when the script ran; 0 when it had none or the
  // backend does not check (then nothing was waited for).
  int replicas = 0;
  // How many of them acknowledged the script's writes in time (WAIT).
  int acknowledged = 0;
  // Replicas exist and none acknowledged: the writes may die with the master.
  bool unconfirmed() const { return replicas > 0 && acknowledged == 0; }
  // Whether the master was asked to fsync the writes to its append-only
  // file (WAITAOF: RedisOptions::aof_sync), and whether it did in time.
  bool aof_asked = false;
  bool aof_synced = false;
  // Asked and not fsynced in time: a restart of the master may forget them.
  bool unsynced() const { return aof_asked && !aof_synced; }
  // Either: a grant so written is undone (ReplicaSyncError, AofSyncError).
  bool grant_unsafe() const { return unconfirmed() || unsynced(); }
};

struct TURNSTILE_EXPORT SyncedReply {
  Reply reply;
  ReplicaAck ack;
};

// One master's answer to Backend::command_each_master().
struct TURNSTILE_EXPORT MasterReply {
  // The master asked: "host:port" or a socket path, never a password.
  std::string node;
  // Its reply; an error reply is kept here as a value, not raised.
  Reply reply;
  // Set instead of `reply` when the master could not be asked (what
  // command() would have thrown: ConnectionError, TimeoutError, ...).
  std::exception_ptr failure;
};

// What Backend::scan_each_master() looks for: keys matching a glob, read
// with SCAN (never KEYS), a bounded amount of server work per call.
struct TURNSTILE_EXPORT ScanOptions {
  // SCAN's MATCH glob (Redis's glob: *, ?, [...], \ escapes).
  std::string match = "*";
  // SCAN's COUNT: about how many keys one call makes a server look at.
  // 1..kMaxScanCountPerCall.
  std::int64_t count_per_call = 100;
  // Stop once this many keys were found (ScanResult::complete false).
  // 1..kMaxScanKeys.
  std::size_t max_keys = 10'000;
};

inline constexpr std::int64_t kMaxScanCountPerCall = 10'000;
inline constexpr std::size_t kMaxScanKeys = 1'000'000;

struct TURNSTILE_EXPORT ScanResult {
  // The keys found, each once, in the order found.
  std::vector<std::string> keys;
  // False when max_keys stopped the scan before every master was read.
  bool complete = true;
};

class Backend;

// A script call sent by Backend::send_eval() whose reply has not been
// collected yet. Move-only in spirit (held by unique_ptr); used by one task
// at a time. Destroying it before get() abandons the reply: the call may
// still run on the server, and the backend discards its answer (the real
// backend closes the connection it was sent on rather than reuse it).
class TURNSTILE_EXPORT PendingReply {
 public:
  PendingReply() = default;
  PendingReply(const PendingReply&) = delete;
  PendingReply& operator=(const PendingReply&) = delete;
  virtual ~PendingReply() = default;

  // Waits up to `timeout` for the outcome (the reply, or the failure get()
  // will throw) and returns whether it is in. A zero or negative timeout
  // only looks. Never waits longer than `timeout`, and never throws: errors
  // are kept for get().
  [[nodiscard]] virtual bool wait_for(std::chrono::nanoseconds timeout) = 0;

  // The outcome, as eval_synced() (or eval()) would have returned or thrown
  // it, waiting for it if needed (bounded by the backend's command timeout).
  // Call at most once.
  virtual SyncedReply get() = 0;
};

// Whether send_eval() is eval() or eval_synced().
enum class EvalSync : std::uint8_t { none, replicas };

// A live subscription of one handler to one channel. Move-only; destroying it
// (or calling reset()) unsubscribes, and once that returns the handler is
// never called again. The backend must outlive its subscriptions.
class TURNSTILE_EXPORT Subscription {
 public:
  Subscription() = default;
  Subscription(Backend* backend, std::uint64_t id) : backend_(backend), id_(id) {}
  Subscription(Subscription&& other) noexcept;
  Subscription& operator=(Subscription&& other) noexcept;
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;
  ~Subscription() { reset(); }

  bool active() const { return backend_ != nullptr; }
  void reset() noexcept;

 private:
  Backend* backend_ = nullptr;
  std::uint64_t id_ = 0;
};

// What a backend counts itself (turnstile/metrics.h): connections it
// opened again after one broke, scripts it loaded again after the server
// answered NOSCRIPT, and servers it found restarted (Backend::watch_restarts).
// Totals since the backend was made.
struct TURNSTILE_EXPORT BackendCounters {
  std::uint64_t reconnects = 0;
  std::uint64_t script_reloads = 0;
  std::uint64_t server_restarts = 0;
};

// What a restart or reconnect handler is told (Backend::watch_restarts,
// Backend::watch_reconnects).
struct TURNSTILE_EXPORT ServerRestart {
  // The server found restarted, or connected to again, as "host:port" (or
  // the socket path).
  std::string_view endpoint;
};

using ServerRestartHandler = std::function<void(const ServerRestart&)>;

// A registered restart or reconnect handler (Backend::watch_restarts,
// Backend::watch_reconnects). Move-only;
// destroying it (or calling reset()) removes the handler, and once that
// returns the handler is never called again. Inactive when the backend
// cannot tell restarts.
class TURNSTILE_EXPORT RestartWatch {
 public:
  RestartWatch() = default;
  // `remove` runs once, from reset() or the destructor.
  explicit RestartWatch(std::function<void()> remove) : remove_(std::move(remove)) {}
  RestartWatch(RestartWatch&& other) noexcept;
  RestartWatch& operator=(RestartWatch&& other) noexcept;
  RestartWatch(const RestartWatch&) = delete;
  RestartWatch& operator=(const RestartWatch&) = delete;
  ~RestartWatch() { reset(); }

  bool active() const { return remove_ != nullptr; }
  void reset() noexcept;

 private:
  std::function<void()> remove_;
};

// Bounds of one call, from its caller (Backend::eval_synced_within).
struct TURNSTILE_EXPORT EvalOptions {
  // How long the call may wait before anything is sent (queued for a pooled
  // connection, for ClientOptions::server_check's first check, or for the
  // handshake of a connection opened for the call): what is
  // left of the caller's deadline. When it passes first, the call fails as a
  // busy pool does (PoolExhaustedError, nothing sent); nullopt: the backend's own bound.
  std::optional<std::chrono::nanoseconds> send_within = {};
};

// One script call of a batch (Backend::send_evals()): what send_eval()
// takes, owned. `script` must not be null and must outlive the call's
// pending reply (embedded scripts are static).
struct TURNSTILE_EXPORT EvalRequest {
  const Script* script = nullptr;
  std::vector<std::string> keys;
  std::vector<std::string> args;
};

// Bounds of one subscription, from its caller (Backend::subscribe_within).
struct TURNSTILE_EXPORT SubscribeOptions {
  // How long the caller waits for the server to confirm the subscription
  // (and, with Sentinel, for the master to be found first): what is left of
  // its deadline. When it passes first, nothing stays registered, a late
  // confirmation is dropped, and the call throws TimeoutError (a lookup cut
  // short: PoolExhaustedError, nothing sent); nullopt: the backend's own
  // bound (command_timeout_ms).
  std::optional<std::chrono::nanoseconds> confirm_within = {};
};

// A channel whose last handler left stays subscribed this long on a
// backend's pub/sub connection (the real subscriber's, and the simulator's
// links alike), at most kMaxLingeringChannels of them at once, so that a
// waiter arriving meanwhile needs no SUBSCRIBE (Backend::
// subscribe_if_confirmed).
inline constexpr int kChannelLingerMs = 1000;
inline constexpr std::size_t kMaxLingeringChannels = 256;

class TURNSTILE_EXPORT Backend {
 public:
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  virtual ~Backend() = default;

  // Runs `script` with KEYS = keys and ARGV = args and returns its reply.
  // Sends EVALSHA; if the server answers NOSCRIPT it loads the script and
  // retries once, so SCRIPT FLUSH on the server is invisible to callers.
  virtual Reply eval(const Script& script, const std::vector<std::string>& keys,
                     const std::vector<std::string>& args) = 0;

  // eval(), then, if the backend has replica-sync safety on and the master
  // has replicas, WAIT for one replica on the same connection (WAIT covers
  // only that connection's writes), bounded by the backend's replica-sync
  // timeout. Used for lock acquisitions. The default runs eval() and reports
  // no replicas.
  virtual SyncedReply eval_synced(const Script& script, const std::vector<std::string>& keys,
                                  const std::vector<std::string>& args) {
    return SyncedReply{eval(script, keys, args), ReplicaAck{}};
  }

  // eval_synced() within the caller's bounds (EvalOptions): a lock's wait
  // passes what is left of its deadline, so a try_lock_for(50ms) is not
  // held up to command_timeout_ms by a busy pool. The default (and
  // ForwardingBackend's, so a decorator that overrides eval_synced() alone
  // still sees every call) runs eval_synced() and leaves the bounds to the
  // backend; a decorator passes them on by overriding this too.
  virtual SyncedReply eval_synced_within(const Script& script, const std::vector<std::string>& keys,
                                         const std::vector<std::string>& args, const EvalOptions& options) {
    (void)options;
    return eval_synced(script, keys, args);
  }

  // Sends the call eval_synced() (sync == EvalSync::replicas) or eval()
  // (EvalSync::none) would send, and returns without waiting for its reply.
  // Errors found before anything is sent (no connection to be had) may be
  // thrown here or kept for get(). The default runs the call to the end
  // right away and returns its outcome, so a backend without pipelining is
  // still correct, merely sequential. `script` must outlive the pending
  // reply (a NOSCRIPT reload needs its source; embedded scripts are
  // static); keys and args are copied.
  [[nodiscard]] virtual std::unique_ptr<PendingReply> send_eval(const Script& script,
                                                                const std::vector<std::string>& keys,
                                                                const std::vector<std::string>& args, EvalSync sync);

  // send_eval() within the caller's bounds (EvalOptions::send_within): a
  // call that cannot be sent in time (a busy pool, a handshake that would
  // take longer) is not sent, and its pending reply holds
  // PoolExhaustedError. A lock's give-up after its wait's deadline sends
  // its call so. The default (and ForwardingBackend's) runs send_eval() and
  // leaves the bound to the backend; a decorator passes it on by
  // overriding this too.
  [[nodiscard]] virtual std::unique_ptr<PendingReply> send_eval_within(const Script& script,
                                                                       const std::vector<std::string>& keys,
                                                                       const std::vector<std::string>& args,
                                                                       EvalSync sync, const EvalOptions& options) {
    (void)options;
    return send_eval(script, keys, args, sync);
  }

  // send_eval(EvalSync::none) of every call in `calls`, as one batch: the
  // pending replies, one per call, in the order of `calls`. A backend that
  // can writes the calls bound for one server on one connection at once (a
  // cluster: one connection per master the calls' slots belong to), so a
  // batch of N calls costs each server one write and a few reads rather
  // than N of each. Each reply is still collected alone, and each call's
  // outcome is its own (an error reply, a redirection followed, a NOSCRIPT
  // reload), as with send_eval(). The default (and ForwardingBackend's, so
  // a decorator that overrides send_eval() alone still sees every call)
  // sends the calls one by one through send_eval(); a decorator passes the
  // batch on by overriding this too.
  [[nodiscard]] virtual std::vector<std::unique_ptr<PendingReply>> send_evals(std::vector<EvalRequest> calls);

  // Sends one command (argv[0] is its name) and returns the reply.
  virtual Reply command(const std::vector<std::string>& argv) = 0;

  // Sends `argv` to every master this backend may write a lock to, one
  // after the other, and returns their answers in a stable order: the one
  // server (standalone), the current master (Sentinel), every master that
  // serves a slot (Cluster). Never throws for one master's failure or
  // error reply (both are in its MasterReply); may throw InvalidArgumentError
  // for an argv command() refuses, and what finding the masters throws (a
  // cluster whose slot map cannot be read). Not for the lock hot path.
  // The default answers no master: a backend that reaches no Redis server
  // (the fake Redis, a test double) has none to check.
  virtual std::vector<MasterReply> command_each_master(const std::vector<std::string>& argv) {
    (void)argv;
    return {};
  }

  // Every key matching options.match on every master (as
  // command_each_master() names them), read with SCAN cursors; a key
  // created or deleted during the scan may be missed or seen, as SCAN
  // promises. For tools (`turnstile ls`), never the lock hot path. Throws
  // InvalidArgumentError for options out of range, what command() throws
  // for a master that cannot be read. The default scans through command():
  // one server (standalone, Sentinel's master).
  virtual ScanResult scan_each_master(const ScanOptions& options);

  // Subscribes `handler` to `channel` and returns once the server has
  // confirmed the subscription, so a message published after subscribe()
  // returns is delivered. Several subscriptions to one channel share one
  // server-side subscription (reference-counted).
  [[nodiscard]] virtual Subscription subscribe(std::string_view channel, PubSubHandler handler) = 0;

  // subscribe() within the caller's bounds (SubscribeOptions): a waiting
  // lock passes what is left of its deadline, so a try_lock_for(100ms) is
  // not held up to command_timeout_ms by a SUBSCRIBE the server does not
  // answer. The default (and ForwardingBackend's, so a decorator that
  // overrides subscribe() alone still sees every subscription) runs
  // subscribe() and leaves the bound to the backend; a decorator passes it
  // on by overriding this too.
  [[nodiscard]] virtual Subscription subscribe_within(std::string_view channel, PubSubHandler handler,
                                                      const SubscribeOptions& options) {
    (void)options;
    return subscribe(channel, std::move(handler));
  }

  // subscribe(), but only if that needs no round trip: the channel is
  // already confirmed on the backend's pub/sub connection (another handler
  // has it, or it lingers after its last one went). Otherwise returns an
  // inactive Subscription and subscribes nothing. A waiter that was
  // subscribed a moment ago can then skip its unsubscribed first try. The
  // default never subscribes.
  [[nodiscard]] virtual Subscription subscribe_if_confirmed(std::string_view channel, const PubSubHandler& handler) {
    (void)channel;
    (void)handler;
    return {};
  }

  // A short description of where this backend points, for error messages
  // and status output: "redis://127.0.0.1:6379/0", "sim:server-1". Never
  // contains a password.
  virtual std::string describe() const = 0;

  // The command lock scripts publish wake-ups with, passed to them as an
  // argument as Redisson's scripts take it: "PUBLISH", or "SPUBLISH" on a
  // Redis Cluster with sharded pub/sub, where the message must reach the
  // node that owns the lock's slot and subscribe() uses SSUBSCRIBE.
  virtual std::string_view publish_command() const { return "PUBLISH"; }

  // The Redis Cluster hash slot of `key` (0..16383, Redis's hash-tag rule)
  // when this backend is a cluster, whose eval() refuses keys of different
  // slots in one call; nullopt when any keys may share one call (one
  // server, Sentinel's master, the fake). Callers that batch many names
  // into one script call (the watchdog's renewals) group by it. Pure and
  // cheap; safe from any thread.
  virtual std::optional<int> cluster_slot(std::string_view key) const {
    (void)key;
    return std::nullopt;
  }

  // Its counters (see BackendCounters); the default counts nothing. Safe
  // from any thread.
  virtual BackendCounters counters() const { return {}; }

  // Calls `handler` each time the backend finds that a server it talks to
  // is no longer the process it talked to before, until the returned watch
  // is dropped. The Redis backend learns each server's identity (INFO
  // server's run_id) in the handshake of every connection it opens, after
  // AUTH and SELECT; a connection to the same endpoint that answers another
  // run_id than the last one seen is a restart (with Sentinel, a switch to
  // another master is one too). A restart without persistence has lost
  // every key, so a Client takes every hold on the backend as lost then
  // (LockLostReason::server_restarted). A server that refuses INFO (a
  // renamed command, an ACL without it) is never found restarted.
  //
  // Handlers run on the thread that opened the connection (a caller's, or
  // the pub/sub reader) and must not block or call the backend. The
  // default watch is inactive: the backend cannot tell restarts.
  [[nodiscard]] virtual RestartWatch watch_restarts(ServerRestartHandler handler) {
    (void)handler;
    return {};
  }

  // Calls `handler` each time the backend opens a connection again after
  // one to the same endpoint broke (a reset, CLIENT KILL, a timeout, a
  // network outage) and finds the process it talked to before (or cannot
  // tell: INFO refused). The connection that finds a restart tells
  // watch_restarts() instead; another one of the same outage may then
  // tell this. At most one report per outage of the pool (the first
  // connection opened again) and one per reconnection of the subscriber.
  // Same threads and rules as watch_restarts(); the default watch is
  // inactive.
  [[nodiscard]] virtual RestartWatch watch_reconnects(ServerRestartHandler handler) {
    (void)handler;
    return {};
  }

 protected:
  friend class Subscription;
  // Drops subscription `id`. After it returns, that handler is not called.
  virtual void unsubscribe(std::uint64_t id) noexcept = 0;
};

// A Backend that passes every call on to another one. Derive from it to
// decorate a backend (time its calls, count them, stamp them) and override
// only what changes. The subscriptions handed out are the inner backend's
// own, so unsubscribing never reaches the decorator; a handler passed on
// may be wrapped, but must not capture the decorator if the inner backend
// can outlive it.
class TURNSTILE_EXPORT ForwardingBackend : public Backend {
 public:
  // `inner` must not be null.
  explicit ForwardingBackend(std::shared_ptr<Backend> inner);

  Reply eval(const Script& script, const std::vector<std::string>& keys, const std::vector<std::string>& args) override;
  SyncedReply eval_synced(const Script& script, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args) override;
  [[nodiscard]] std::unique_ptr<PendingReply> send_eval(const Script& script, const std::vector<std::string>& keys,
                                                        const std::vector<std::string>& args, EvalSync sync) override;
  Reply command(const std::vector<std::string>& argv) override;
  std::vector<MasterReply> command_each_master(const std::vector<std::string>& argv) override;
  ScanResult scan_each_master(const ScanOptions& options) override;
  [[nodiscard]] Subscription subscribe(std::string_view channel, PubSubHandler handler) override;
  [[nodiscard]] Subscription subscribe_if_confirmed(std::string_view channel, const PubSubHandler& handler) override;
  std::string describe() const override;
  std::string_view publish_command() const override;
  std::optional<int> cluster_slot(std::string_view key) const override;
  BackendCounters counters() const override;
  [[nodiscard]] RestartWatch watch_restarts(ServerRestartHandler handler) override;
  [[nodiscard]] RestartWatch watch_reconnects(ServerRestartHandler handler) override;

  Backend& inner() const { return *inner_; }

 protected:
  // Never called: every Subscription handed out belongs to the inner
  // backend (asserts).
  void unsubscribe(std::uint64_t id) noexcept override;

 private:
  const std::shared_ptr<Backend> inner_;
};

}  // namespace turnstile

#endif  // TURNSTILE_BACKEND_H_
