// redis/subscriber.h
//
// The pub/sub side of the Redis backend: one dedicated connection and one
// reader thread, both started by the first subscribe().
//
//   * Channels are reference-counted: the first handler of a channel sends
//     SUBSCRIBE, the last one to go sends UNSUBSCRIBE. subscribe() returns
//     only once the server confirmed the channel.
//   * Handlers run on the reader thread while it holds the subscriber's
//     lock; unsubscribe() takes the same lock, so once it returns the handler
//     is not running and never runs again. A handler may drop subscriptions
//     (its own included) but must not block or subscribe.
//   * The reader notices a broken connection at once (EOF, reset) and a hung
//     server by PING: after pubsub_ping_interval_ms without any input it sends
//     PING and expects an answer within command_timeout_ms. It then
//     reconnects with bounded backoff, subscribes every live channel again
//     and, once the server confirms, sends every handler of a channel that
//     had been confirmed before a PubSubEvent::Kind::resubscribed event.
//   * Each connection it opens reports its server's run_id to the
//     backend's ServerIdentities (redis/server_identity.h): the reader,
//     which reconnects at once, is often the first to find a restart.
//   * While the reader cannot connect, subscribe() fails at once with the
//     last connection error; existing subscriptions stay registered and come
//     back when the server does. With no live channel the reader stops
//     retrying until the next subscribe() asks it to connect.
//
// Sharded mode (Redis Cluster >= 7.0) sends SSUBSCRIBE/SUNSUBSCRIBE and
// takes "smessage" pushes. When the server drops a sharded channel on its own
// (its slot moved to another node) or refuses a re-subscription (MOVED), the
// channel stays registered here and `on_channel_moved` is told, so that the
// owner can subscribe its handlers on the new node (redis/subscription_router.h).
//
// Lingering: when the last handler of a channel goes, the channel stays
// subscribed on the server for kChannelLingerMs (at most
// kMaxLingeringChannels channels at once) before UNSUBSCRIBE is sent. A lock
// waiter subscribes and unsubscribes its wake-up channel on every contended
// acquisition; while the channel lingers, subscribing again costs no round
// trip and dropping it again does not wake the reader. Messages on a
// lingering channel have no handler and are dropped.
//
// Only the reader thread touches the connection; other threads hand it
// SUBSCRIBE/UNSUBSCRIBE requests through a queue and wake it with an eventfd.

#ifndef TURNSTILE_REDIS_SUBSCRIBER_H_
#define TURNSTILE_REDIS_SUBSCRIBER_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "redis/connection.h"
#include "redis/counters.h"
#include "turnstile/backend.h"
#include "turnstile/mutex.h"
#include "turnstile/redis_backend.h"

namespace turnstile::redis {

class Subscriber {
 public:
  // A channel without handlers stays subscribed kChannelLingerMs
  // (backend.h; it is dropped at the reader's next wake-up after that, so
  // within twice this), kMaxLingeringChannels of them at once (past that,
  // the last handler's unsubscribe sends UNSUBSCRIBE at once, as without
  // lingering).

  // `on_channel_moved` runs on the reader thread under the subscriber's lock
  // and must only schedule work.
  // Counts its reconnects in `counters` (a fresh set if null).
  explicit Subscriber(RedisOptions options, bool sharded = false, std::function<void()> on_channel_moved = {},
                      std::shared_ptr<Counters> counters = nullptr);
  // Stops the reader thread (waiting at most for a connect attempt in
  // progress). Every subscription must have been dropped before.
  ~Subscriber();
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // Registers `handler` for `channel` and returns its id once the server has
  // confirmed the channel. Throws the server's error reply for the SUBSCRIBE
  // (e.g. PermissionError under an ACL without the channel), the last
  // connection error while the server is unreachable, TimeoutError if no
  // confirmation arrives within command_timeout_ms, and InvalidArgumentError
  // when called from a handler (it would deadlock). `callers_deadline`, when
  // given, ends the wait for the confirmation too (TimeoutError saying so):
  // the handler is gone then, and a confirmation that comes later confirms
  // nobody's (the channel is unsubscribed, or lingers for the next caller
  // if other handlers keep it). The connection stays as it is; a server
  // that does not answer at all is found by the reader's PING.
  std::uint64_t subscribe(std::string_view channel, PubSubHandler handler,
                          std::optional<std::chrono::steady_clock::time_point> callers_deadline = std::nullopt);

  // Registers `handler` for `channel` only if the channel is confirmed on
  // the current connection (so no round trip is needed) and returns its id;
  // otherwise registers nothing and returns nullopt. Never blocks on the
  // server; refused (nullopt) from a handler.
  std::optional<std::uint64_t> subscribe_if_confirmed(std::string_view channel, const PubSubHandler& handler);

  // Drops subscription `id`; afterwards its handler is not called again.
  void unsubscribe(std::uint64_t id) noexcept;

  // Whether the server dropped `channel` (a sharded one whose slot moved
  // away) or refused it again after a reconnect (MOVED), and it has not
  // been confirmed here since: its subscriptions belong on another node.
  bool moved_away(std::string_view channel);

 private:
  enum class ChannelState : std::uint8_t { pending, confirmed, failed };

  struct Channel {
    std::vector<std::uint64_t> handler_ids;
    ChannelState state = ChannelState::pending;
    // The SUBSCRIBE whose confirmation counts: a reply to an older one (sent
    // before an UNSUBSCRIBE and a new SUBSCRIBE) must not confirm this one.
    std::uint64_t token = 0;
    // Confirmed on some earlier connection: a re-subscription must be
    // announced to its handlers.
    bool was_confirmed = false;
    // Dropped by the server or refused on a new connection, not confirmed
    // here since (moved_away()).
    bool moved_away = false;
    std::string error;  // the server's error reply, when failed
    // Set while the channel has no handler but stays subscribed; it is
    // unsubscribed once this passes.
    std::optional<std::chrono::steady_clock::time_point> lingers_until;
  };

  struct Handler {
    std::string channel;
    // Shared so that dispatch keeps it alive while a handler unsubscribes
    // itself.
    std::shared_ptr<PubSubHandler> function;
  };

  // A command for the reader to send, and later what its reply answers.
  struct Request {
    enum class Kind : std::uint8_t { subscribe, unsubscribe, ping } kind;
    std::string channel;
    std::uint64_t token = 0;
    bool resubscribe = false;
  };

  // A connect failure, kept as a value: each waiter throws its own copy, as
  // sharing one exception object between threads (std::exception_ptr) races
  // on its destruction.
  struct ConnectFailure {
    enum class Kind : std::uint8_t { none, connection, timeout, protocol, server } kind = Kind::none;
    std::string message;

    // Records the exception being handled; call inside a catch block.
    static ConnectFailure current();
    [[noreturn]] void raise() const;
  };

  void start_reader_locked() TURNSTILE_REQUIRES(mutex_);
  void wake_reader() const;
  void queue_locked(Request request) TURNSTILE_REQUIRES(mutex_);
  // Removes handler `id`; the last handler of a channel unsubscribes it.
  void remove_locked(std::uint64_t id) TURNSTILE_REQUIRES(mutex_);
  // One lingering channel fewer (lingering_ never wraps).
  void lingering_less_locked() TURNSTILE_REQUIRES(mutex_);
  // Unsubscribes the lingering channels whose time has passed; returns when
  // the next one is due (max() if none lingers).
  std::chrono::steady_clock::time_point expire_lingering_locked(std::chrono::steady_clock::time_point now)
      TURNSTILE_REQUIRES(mutex_);

  // Reader thread.
  void run_reader();
  // Serves one connection until it breaks or the subscriber stops.
  void serve(Connection& connection);
  // Handles one reply; `sent` holds the commands still awaiting replies.
  void handle_reply(const Reply& reply, std::deque<Request>& sent);
  void confirm_locked(const Request& request, const Reply& reply) TURNSTILE_REQUIRES(mutex_);
  void dispatch_locked(const std::string& channel, const PubSubEvent& event) TURNSTILE_REQUIRES(mutex_);

  const RedisOptions options_;
  const bool sharded_;
  const std::function<void()> on_channel_moved_;
  const std::shared_ptr<Counters> counters_;
  bool connected_before_ = false;  // reader thread only: the next connection is a reconnect
  // eventfd: requests queued or stopping. Set (under mutex_) before the
  // reader thread starts, which reads it unlocked.
  int wake_fd_ = -1;

  Mutex mutex_;
  std::condition_variable changed_;  // confirmations, failures, connection state, stop
  std::map<std::string, Channel, std::less<>> channels_ TURNSTILE_GUARDED_BY(mutex_);
  std::unordered_map<std::uint64_t, Handler> handlers_ TURNSTILE_GUARDED_BY(mutex_);
  std::deque<Request> requests_ TURNSTILE_GUARDED_BY(mutex_);  // for the current connection, not yet sent
  bool connected_ TURNSTILE_GUARDED_BY(mutex_) = false;
  bool stopping_ TURNSTILE_GUARDED_BY(mutex_) = false;
  bool retry_now_ TURNSTILE_GUARDED_BY(mutex_) = false;        // subscribe() asks the idle reader to connect
  ConnectFailure connect_error_ TURNSTILE_GUARDED_BY(mutex_);  // of the last failed attempt, until a success
  std::uint64_t connect_failures_ TURNSTILE_GUARDED_BY(mutex_) = 0;
  std::size_t lingering_ TURNSTILE_GUARDED_BY(mutex_) = 0;  // channels with lingers_until set
  std::uint64_t next_id_ TURNSTILE_GUARDED_BY(mutex_) = 0;
  std::uint64_t next_token_ TURNSTILE_GUARDED_BY(mutex_) = 0;
  std::vector<std::uint64_t> dispatch_ids_ TURNSTILE_GUARDED_BY(mutex_);  // scratch space of the reader
  std::thread reader_ TURNSTILE_GUARDED_BY(mutex_);
};

}  // namespace turnstile::redis

#endif  // TURNSTILE_REDIS_SUBSCRIBER_H_
