// sim/fake_backend.h
//
// A Backend over an in-process fake Redis (sim::Server): what lock code sees
// as "the connection to one server" in simulation. One FakeBackend is one
// simulated client's link to one server:
//
//   * eval() goes through eval_with_reload (EVALSHA, SCRIPT LOAD on
//     NOSCRIPT), command() through Server::execute; top-level error replies
//     are raised as typed ServerErrors, like the real backend.
//   * send_eval() in a world runs the call as a task of its own of the same
//     client, so calls on several links proceed in parallel in virtual time
//     (every link fault, delay and replica-sync wait applies unchanged); its
//     PendingReply waits on a scheduler Event. Outside a world: Backend's
//     default (the call runs at once). The script must outlive the pending
//     (embedded scripts are static); keys and args are copied.
//   * subscribe() uses a dedicated pub/sub Session, as a real client uses a
//     dedicated connection: one server-side SUBSCRIBE per channel, shared by
//     every handler of that channel (reference-counted); SSUBSCRIBE with
//     Options::sharded_pubsub, as the cluster backend on Redis 7.
//   * The server's costs (fake_redis/server.h, ServerOptions): a command
//     waits until the server lets it in (Server::answers_at) and its reply
//     leaves when the server completed it; a wake-up leaves with the work
//     its script did before the PUBLISH. A script past the BUSY threshold
//     makes other commands fail with BusyError (subscribe() too: its
//     SUBSCRIBE is sent at once, not queued).
//
// Two modes:
//
//   * In a world (constructed with a Scheduler and a ClientId): pub/sub
//     messages reach handlers through the scheduler, as inline actions of
//     the client, `pubsub_delay` after the PUBLISH (zero by default: still
//     after the publishing task yields, in publish order). Calls may take
//     virtual time (request/reply delays), which requires calling them from a
//     simulated task. Not thread-safe: the scheduler runs one task at a time.
//
//   * Outside a world (constructed over a StandaloneServer): for simple tests
//     with RealRuntime and real threads. Every call holds the server's mutex;
//     messages are delivered synchronously, on the publishing thread, while
//     that mutex is held, so handlers must not call the backend. Delays and
//     drops of requests need a world; the down flag works in both modes.
//
// Faults (hooks for the simulation's fault injection):
//
//   * set_down(true): the link is broken. Calls throw ConnectionError naming
//     the fake server; the server drops the link's subscriptions and
//     messages are lost. set_down(false) reconnects: the channels are
//     subscribed again and every handler gets a `resubscribed` event (it may
//     have missed messages), as the real backend does after a reconnect.
//   * set_held_out(true): the same, for the server's sake rather than the
//     link's (a node kept out after a failover); a link fault healed
//     meanwhile does not bring it back.
//   * kill(): a client crash. The link is down for good and nothing is ever
//     sent again, not even UNSUBSCRIBE when subscriptions are destroyed.
//   * on_server_restart(): the server lost its state (World::restart_server):
//     the link subscribes again and handlers get `resubscribed`. The
//     restart watches (Backend::watch_restarts) are told at the link's first
//     contact with the new process, as the real backend's handshake finds
//     it: at once if the link has subscriptions (the pub/sub reader
//     reconnects at once), otherwise at the next command. A failover
//     (switch_server) is told likewise, at the next command.
//   * set_hanging(true) (world mode): a hanging partition, as a TCP link
//     that froze without a reset. Nothing is delivered either way and
//     nothing is refused: a request sent meanwhile never reaches the server
//     (the model picks "lost", of "may or may not have arrived"), and the
//     call waits `command_timeout` from its start, then throws TimeoutError,
//     as hiredis does on a frozen link; so does a reply on its way when the
//     link froze, and subscribe(). Messages published meanwhile are lost.
//     set_hanging(false) heals: calls go through again and every handler
//     gets `resubscribed` (the real subscriber's PING went unanswered and
//     it reconnected; messages may have been missed).
//   * Request filter (world mode): per call, extra request/reply delays, or a
//     dropped request (not executed) or reply (executed): the call then waits
//     `command_timeout` and throws TimeoutError.
//   * Message filter: per delivered message, drop it, delay it further or
//     deliver copies.
//
// Replica sync (world mode): with Options::replica_sync_timeout set and the
// server given a replica (World::add_replica tells the link its lag),
// eval_synced() acts as EVALSHA + WAIT 1 <timeout>: the replica acknowledges
// once it applied the link's last write, i.e. `lag` after that write; the
// call waits for that in virtual time, at most the timeout, and reports
// 1 replica and whether it acknowledged. A failover or restart during the
// wait loses the write: not acknowledged. Without a replica or with the
// timeout unset: eval() and no replicas, as Backend's default.
//
// AOF sync (world mode): with Options::aof_sync_timeout set, eval_synced()
// then acts as WAITAOF 1 0 <timeout>: the server fsyncs the script's writes
// after Server::aof_fsync_wait() (its persistence: always at once,
// everysec at its next whole second); the call waits for that, at most the
// timeout, and reports whether it came. A server without persistence
// refuses before the script runs (UnsafeServerError, as a real one without
// appendonly); a restart during the wait: not fsynced.
//
// A FakeBackend must outlive its Subscriptions and must be destroyed before
// its server (and scheduler). It may die before its pending replies: a call
// still in flight then fails with ConnectionError at its next step, without
// touching the backend.

#ifndef TURNSTILE_SIM_FAKE_BACKEND_H_
#define TURNSTILE_SIM_FAKE_BACKEND_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "sim/buggify.h"
#include "sim/scheduler.h"
#include "fake_redis/server.h"
#include "fake_redis/virtual_clock.h"
#include "turnstile/backend.h"
#include "turnstile/mutex.h"
#include "turnstile/redis_backend.h"
#include "turnstile/script_call.h"
#include "turnstile/sim/world.h"

namespace turnstile::sim {

// A fake server with its own clock and a mutex, for use outside a world from
// real threads. Its clock moves only through advance_clock().
class StandaloneServer {
 public:
  StandaloneServer() : server_(clock_) {}
  StandaloneServer(const StandaloneServer&) = delete;
  StandaloneServer& operator=(const StandaloneServer&) = delete;

  Server& server() { return server_; }
  Mutex& mutex() TURNSTILE_RETURN_CAPABILITY(mutex_) { return mutex_; }
  Instant now() {
    const MutexLock lock(mutex_);
    return clock_.now();
  }
  void advance_clock(Duration duration) {
    const MutexLock lock(mutex_);
    clock_.advance_by(duration);
  }

 private:
  Mutex mutex_;
  VirtualClock clock_ TURNSTILE_GUARDED_BY(mutex_);
  // Guarded by mutex_ too, through FakeBackend::guard(), a lock the
  // analysis cannot follow.
  Server server_;
};

struct RestartHandlers;  // fake_backend.cpp

class FakeBackend final : public Backend {
 public:
  static constexpr std::size_t kMaxSubscriptions = 1'000'000;
  static constexpr std::size_t kMaxPendingDeliveries = 1'000'000;
  static constexpr int kMaxMessageCopies = 8;

  struct Options {
    // Added to every call on the way to the server and back.
    Duration request_delay{0};
    Duration reply_delay{0};
    // From PUBLISH on the server to the handler call.
    Duration pubsub_delay{0};
    // How long a call whose request or reply was dropped, or that was sent
    // on a hanging link, waits before it throws TimeoutError (the real
    // backend's command_timeout_ms, same default).
    Duration command_timeout{std::chrono::milliseconds(kDefaultCommandTimeoutMs)};
    // WAIT's timeout for eval_synced(); nullopt: replica sync off.
    std::optional<Duration> replica_sync_timeout = std::nullopt;
    // WAITAOF's timeout for eval_synced(); nullopt: aof_sync off.
    std::optional<Duration> aof_sync_timeout = std::nullopt;
    // Wake-ups as on a Redis 7 Cluster with sharded pub/sub (what the
    // cluster backend uses there): scripts publish with SPUBLISH
    // (publish_command()) and subscribe() sends SSUBSCRIBE / SUNSUBSCRIBE.
    bool sharded_pubsub = false;
  };

  struct RequestFate {
    Duration extra_request_delay{0};
    Duration extra_reply_delay{0};
    bool drop_request = false;  // the server never sees it
    bool drop_reply = false;    // the server executes it; the caller never hears
    // The request arrives twice (a retransmission): the server executes it
    // twice in a row; the caller gets the first reply.
    bool duplicate_request = false;
    // The reply arrives twice. RESP has no request ids, so the spare copy is
    // taken as the reply of the link's next call (whose own reply is then
    // discarded): one call sees a stale answer.
    bool duplicate_reply = false;
  };
  using RequestFilter = std::function<RequestFate(const std::vector<std::string>& argv)>;

  struct MessageFate {
    bool drop = false;
    Duration extra_delay{0};
    int copies = 1;  // 1..kMaxMessageCopies
  };
  using MessageFilter = std::function<MessageFate(std::string_view channel, std::string_view payload)>;

  // In a world, as `client` of `scheduler`. `server_name` appears in
  // describe() ("sim:<server_name>") and in error messages.
  FakeBackend(Server& server, std::string server_name, Scheduler& scheduler, ClientId client, Options options);
  FakeBackend(Server& server, std::string server_name, Scheduler& scheduler, ClientId client)
      : FakeBackend(server, std::move(server_name), scheduler, client, Options()) {}
  // Outside a world.
  FakeBackend(StandaloneServer& server, std::string server_name);
  ~FakeBackend() override;

  Reply eval(const Script& script, const std::vector<std::string>& keys, const std::vector<std::string>& args) override;
  SyncedReply eval_synced(const Script& script, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args) override;
  [[nodiscard]] std::unique_ptr<PendingReply> send_eval(const Script& script, const std::vector<std::string>& keys,
                                                        const std::vector<std::string>& args, EvalSync sync) override;
  Reply command(const std::vector<std::string>& argv) override;
  [[nodiscard]] Subscription subscribe(std::string_view channel, PubSubHandler handler) override;
  // On a hanging link, the confirmation is waited for until the caller's
  // deadline if that comes before the command timeout; nothing stays
  // registered then.
  [[nodiscard]] Subscription subscribe_within(std::string_view channel, PubSubHandler handler,
                                              const SubscribeOptions& options) override;
  // In a world, a channel whose last handler left stays subscribed for
  // kChannelLingerMs (at most kMaxLingeringChannels
  // of them), as the real subscriber keeps it: a handler added meanwhile
  // is confirmed at once, with no SUBSCRIBE. Not on a link that is down,
  // hanging or reconnecting, whose lingering channels go.
  [[nodiscard]] Subscription subscribe_if_confirmed(std::string_view channel, const PubSubHandler& handler) override;
  std::string describe() const override;
  std::string_view publish_command() const override { return options_.sharded_pubsub ? "SPUBLISH" : "PUBLISH"; }
  // Reconnects: each time the link came back (up after down, healed,
  // switched to a promoted replica, its server restarted). Reloads: after
  // NOSCRIPT.
  BackendCounters counters() const override;
  [[nodiscard]] RestartWatch watch_restarts(ServerRestartHandler handler) override;

  // ---- faults ----
  void set_down(bool down);
  bool down() const;
  // The server is kept out of reach (World::fail_over_delayed): the link is
  // down as with set_down(true), whatever set_down() says meanwhile, until
  // set_held_out(false); then it is down only if set_down() left it so.
  void set_held_out(bool held_out);
  // A hanging partition (see the file comment); world mode only.
  void set_hanging(bool hanging);
  bool hanging() const;
  void kill();
  bool killed() const;
  void on_server_restart();
  // A failover: from now on the link talks to `server` (the promoted
  // replica). Both sessions reconnect and handlers get `resubscribed`.
  // (switch_server also forgets the replica: the promoted one has none.)
  void switch_server(Server& server);
  // The server's replica lag (World::add_replica); nullopt: no replica.
  void set_replica_lag(std::optional<Duration> lag);
  void set_pubsub_delay(Duration delay);
  void set_request_filter(RequestFilter filter);
  void set_message_filter(MessageFilter filter);
  // The world's BUGGIFY points (sim/buggify.h): a reply dropped after the
  // server applied the command, a subscription's connection dropped and
  // re-established soon after it is made (a reconnect mid-wait).
  void set_buggify(Buggify* buggify) { buggify_ = buggify; }
  // Every eval and command told to `*listener` when it ends, as a CallSpan
  // of server `server_index` (a trace's command spans). The listener is
  // the world's: it outlives the link; an empty one is not told.
  void set_call_listener(const World::CallListener* listener, std::size_t server_index) {
    call_listener_ = listener;
    server_index_ = server_index;
  }

  // ---- statistics ----
  std::uint64_t messages_delivered() const;  // handler calls for messages
  std::uint64_t messages_dropped() const;    // lost to a filter, a down link or a crash
  std::size_t channel_count() const;         // channels subscribed on the server

 protected:
  void unsubscribe(std::uint64_t id) noexcept override;

 private:
  struct Handler {
    std::string channel;
    PubSubHandler handler;
  };

  // The StandaloneServer's mutex, held; nothing inside a world, where one
  // task runs at a time. A lock taken or not at run time, which the
  // analysis cannot follow: what it guards is not annotated.
  std::unique_lock<Mutex> guard() const;
  void check_up() const;  // throws ConnectionError
  // On a hanging link: waits until `started` + command_timeout (or
  // + `callers_bound`, the caller's deadline, if that is shorter), then
  // throws TimeoutError saying `what` was lost. Otherwise returns at once.
  void time_out_if_hanging(Instant started, const char* what, std::optional<Duration> callers_bound = std::nullopt);
  // Sends one command on the command session, with the link's delays and
  // faults; error replies are returned as values.
  Reply send(const std::vector<std::string>& argv);
  Reply eval_unobserved(const Script& script, const std::vector<std::string>& keys,
                        const std::vector<std::string>& args);
  // `call()`, told to the call listener (if any) as `span` when it ends.
  Reply observed(CallSpan span, const std::function<Reply()>& call);
  // Lets `duration` of virtual time pass for the calling task (world mode).
  // Throws ConnectionError if the backend was destroyed meanwhile (a
  // send_eval task outlived it); `this` is not touched then.
  void wait_for(Duration duration);
  void on_published(std::string_view channel, std::string_view payload);
  // Calls the handlers of `channel` (or of every channel for resubscribed).
  void dispatch(PubSubEvent::Kind kind, const std::string& channel, const std::string& payload);
  void deliver_later(Duration delay, PubSubEvent::Kind kind, std::string channel, std::string payload);
  void reconnect_pubsub();
  bool buggify(std::string_view point) { return buggify_ != nullptr && buggify_->fires(point); }
  // The server works through what was let in before (ServerOptions' costs,
  // a slow script): wait until it lets this command in.
  void wait_for_server_turn();
  // The pub/sub session's (un)subscribe command and channel scope.
  const char* subscribe_command(bool subscribe) const;
  ChannelScope channel_scope() const;
  // pubsub.reconnect_mid_wait: soon drop the pub/sub connection, a moment
  // later reconnect and tell handlers `resubscribed`.
  void drop_pubsub_soon();
  // After a reconnect: subscribe every channel again and tell every handler
  // (it may have missed messages).
  void resubscribe_and_notify();

  Server* server_;
  std::string name_;
  Scheduler* scheduler_ = nullptr;  // null outside a world
  ClientId client_ = kWorldClient;
  Mutex* mutex_ = nullptr;  // the StandaloneServer's, outside a world
  Options options_;
  RequestFilter request_filter_;
  MessageFilter message_filter_;
  std::unique_ptr<Session> command_session_;
  std::unique_ptr<Session> pubsub_session_;
  // A duplicated reply waiting to be mistaken for the next call's.
  std::optional<Reply> stale_reply_;
  // Replica sync: the server's replica lag, when this link last wrote, and
  // a counter of server changes (restart, failover) that lose writes.
  std::optional<Duration> replica_lag_;
  std::optional<Instant> last_write_at_;
  std::uint64_t server_generation_ = 0;
  // The link is down while either holds (is_down()): a link fault, or its
  // server kept out of reach.
  bool link_down_ = false;
  bool held_out_ = false;
  bool is_down() const { return link_down_ || held_out_; }
  // Sets one of the two reasons; if that changes is_down(), the sessions
  // are dropped, or reconnected and resubscribed.
  void set_down_reason(bool& reason, bool value);
  bool hanging_ = false;
  bool pubsub_gap_ = false;  // between a BUGGIFY drop and its reconnect
  Buggify* buggify_ = nullptr;
  const World::CallListener* call_listener_ = nullptr;
  std::size_t server_index_ = 0;
  bool killed_ = false;
  std::uint64_t next_subscription_id_ = 1;
  std::map<std::uint64_t, Handler> subscriptions_;
  std::map<std::string, std::set<std::uint64_t>, std::less<>> channels_;
  // Channels of channels_ without a handler, kept subscribed until then
  // (subscribe_if_confirmed).
  std::map<std::string, Instant, std::less<>> lingering_;
  // Unsubscribes the lingering channels whose time is up (all of them with
  // `all`), as the real subscriber does at its next wake-up past it.
  void expire_lingering_locked(bool all);
  // Whether a channel without handlers may linger now: in a world, on a
  // link that is up, not hanging, not between a drop and its reconnect.
  bool may_linger_locked() const;
  // Registers `handler` on `entry`'s channel, subscribed already.
  Subscription add_handler_locked(std::map<std::string, std::set<std::uint64_t>, std::less<>>::iterator entry,
                                  PubSubHandler handler);
  std::size_t pending_deliveries_ = 0;
  std::uint64_t messages_delivered_ = 0;
  std::uint64_t messages_dropped_ = 0;
  std::atomic<std::uint64_t> reconnects_{0};
  ScriptLoadCounter script_loads_;  // by the server's address
  // Deliveries queued on the scheduler and send_eval tasks hold a weak
  // reference: a delivery that comes due after the backend died does
  // nothing, a call fails.
  std::shared_ptr<FakeBackend*> self_;
  // A restart or failover not yet told to the restart watches (guard()).
  bool restart_unseen_ = false;
  std::uint64_t restarts_told_ = 0;  // guard()
  // The restart watches; held while they run, so that a removal waits.
  std::shared_ptr<RestartHandlers> restart_handlers_ = make_restart_handlers();
  static std::shared_ptr<RestartHandlers> make_restart_handlers();
  // Tells the restart watches if a restart is unseen and the link is up.
  void tell_restart_if_unseen();
};

}  // namespace turnstile::sim

#endif  // TURNSTILE_SIM_FAKE_BACKEND_H_
