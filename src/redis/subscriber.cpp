#include "redis/subscriber.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <utility>

#include "core/check.h"
#include "core/script_call.h"
#include "redis/backoff.h"
#include "turnstile/errors.h"

namespace turnstile::redis {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Set on the reader thread while it dispatches for a subscriber (holding its
// lock), so that unsubscribe() from a handler does not lock again and
// subscribe() from a handler is refused instead of deadlocking.
thread_local const Subscriber* t_dispatching = nullptr;

int remaining_ms(Clock::time_point deadline, Clock::time_point now) {
  if (deadline <= now) return 0;
  // Rounded up, so poll() does not wake just before the deadline.
  return static_cast<int>(std::chrono::ceil<milliseconds>(deadline - now).count());
}

bool is_bulk(const Reply& reply, std::string_view text) { return reply.is_bulk() && reply.as_string() == text; }

}  // namespace

Subscriber::ConnectFailure Subscriber::ConnectFailure::current() {
  try {
    throw;
  } catch (const TimeoutError& error) {
    return {Kind::timeout, error.what()};
  } catch (const ConnectionError& error) {
    return {Kind::connection, error.what()};
  } catch (const ProtocolError& error) {
    return {Kind::protocol, error.what()};
  } catch (const ServerError& error) {
    return {Kind::server, error.server_message()};
  } catch (const std::exception& error) {
    return {Kind::connection, error.what()};
  } catch (...) {
    return {Kind::connection, "unknown error"};
  }
}

void Subscriber::ConnectFailure::raise() const {
  switch (kind) {
    case Kind::timeout:
      throw TimeoutError(message);
    case Kind::protocol:
      throw ProtocolError(message);
    case Kind::server:
      throw_server_error(message);
    case Kind::none:
    case Kind::connection:
      break;
  }
  throw ConnectionError(message);
}

Subscriber::Subscriber(RedisOptions options, bool sharded, std::function<void()> on_channel_moved,
                       std::shared_ptr<Counters> counters)
    : options_(std::move(options)),
      sharded_(sharded),
      on_channel_moved_(std::move(on_channel_moved)),
      counters_(counters_or_new(std::move(counters))) {}

Subscriber::~Subscriber() {
  {
    const MutexLock lock(mutex_);
    TURNSTILE_CHECK_MSG(handlers_.empty(), "destroy every Subscription before its backend");
    stopping_ = true;
  }
  changed_.notify_all();
  if (reader_.joinable()) {
    wake_reader();
    reader_.join();
  }
  if (wake_fd_ >= 0) close(wake_fd_);
}

void Subscriber::start_reader_locked() {
  if (reader_.joinable()) return;
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    throw ConnectionError("redis " + options_.endpoint() +
                          ": cannot create the subscriber's eventfd: " + std::strerror(errno));
  }
  reader_ = std::thread([this] { run_reader(); });
  TURNSTILE_CHECK(wake_fd_ >= 0 && reader_.joinable());
}

void Subscriber::wake_reader() const {
  TURNSTILE_CHECK_MSG(wake_fd_ >= 0, "the reader thread was started");
  const std::uint64_t one = 1;
  // Cannot fail short of a full counter, which already means "wake up".
  [[maybe_unused]] const ssize_t written = write(wake_fd_, &one, sizeof(one));
}

void Subscriber::queue_locked(Request request) {
  if (!connected_) return;  // the next connection subscribes from channels_
  requests_.push_back(std::move(request));
  wake_reader();
}

std::uint64_t Subscriber::subscribe(std::string_view channel_name, PubSubHandler handler,
                                    std::optional<Clock::time_point> callers_deadline) {
  if (t_dispatching == this) {
    throw InvalidArgumentError("subscribe() called from a pub/sub handler; handlers must not block");
  }
  MutexLock lock(mutex_);
  start_reader_locked();
  if (!connected_ && connect_error_.kind != ConnectFailure::Kind::none) {
    // Reconnecting for live channels: fail fast, as the pool does. With no
    // channel the reader idles; ask it to try now and wait for the outcome.
    if (!channels_.empty()) connect_error_.raise();
    retry_now_ = true;
    changed_.notify_all();
  }

  const std::uint64_t id = ++next_id_;
  auto [it, inserted] = channels_.try_emplace(std::string(channel_name));
  Channel& channel = it->second;
  if (channel.lingers_until) {
    channel.lingers_until.reset();
    lingering_less_locked();
  }
  if (inserted || channel.state == ChannelState::failed) {
    channel.state = ChannelState::pending;
    channel.token = ++next_token_;
    queue_locked({Request::Kind::subscribe, it->first, channel.token, false});
  }
  channel.handler_ids.push_back(id);
  const bool handler_added =
      handlers_.emplace(id, Handler{it->first, std::make_shared<PubSubHandler>(std::move(handler))}).second;
  TURNSTILE_CHECK_MSG(handler_added, "subscription ids are never reused");

  // `channel` stays valid while we wait: our handler keeps it in channels_.
  const auto timeout_at = Clock::now() + milliseconds(options_.command_timeout_ms);
  const bool callers_bound = callers_deadline && *callers_deadline < timeout_at;
  const auto deadline = callers_bound ? *callers_deadline : timeout_at;
  const std::uint64_t failures_before = connect_failures_;
  for (;;) {
    if (channel.state == ChannelState::confirmed) return id;
    if (channel.state == ChannelState::failed) {
      const std::string error = channel.error;
      remove_locked(id);
      throw_server_error(error);
    }
    if (connect_failures_ != failures_before) {
      const ConnectFailure error = connect_error_;
      remove_locked(id);
      error.raise();
    }
    if (lock.wait_until(changed_, deadline) == std::cv_status::timeout && channel.state == ChannelState::pending &&
        connect_failures_ == failures_before) {
      // Our handler goes: the last one unsubscribes the channel, and a late
      // answer to the SUBSCRIBE then finds no channel (or confirms it for
      // the handlers still waiting for it).
      remove_locked(id);
      throw TimeoutError(
          "redis " + options_.endpoint() + ": SUBSCRIBE " + std::string(channel_name) + " was not confirmed " +
          (callers_bound ? std::string("by the caller's deadline")
                         : "within " + std::to_string(options_.command_timeout_ms) + " ms (command_timeout_ms)"));
    }
  }
}

std::optional<std::uint64_t> Subscriber::subscribe_if_confirmed(std::string_view channel_name,
                                                                const PubSubHandler& handler) {
  if (t_dispatching == this) return std::nullopt;
  const MutexLock lock(mutex_);
  const auto it = channels_.find(channel_name);
  if (!connected_ || it == channels_.end() || it->second.state != ChannelState::confirmed) return std::nullopt;
  Channel& channel = it->second;
  if (channel.lingers_until) {
    channel.lingers_until.reset();
    lingering_less_locked();
  }
  const std::uint64_t id = ++next_id_;
  channel.handler_ids.push_back(id);
  const bool handler_added = handlers_.emplace(id, Handler{it->first, std::make_shared<PubSubHandler>(handler)}).second;
  TURNSTILE_CHECK_MSG(handler_added, "subscription ids are never reused");
  return id;
}

bool Subscriber::moved_away(std::string_view channel) {
  const MutexLock lock(mutex_);
  const auto it = channels_.find(std::string(channel));
  return it != channels_.end() && it->second.moved_away;
}

void Subscriber::unsubscribe(std::uint64_t id) noexcept {
  if (t_dispatching == this) {
    mutex_.assert_held();  // the reader thread holds the lock already
    remove_locked(id);
    return;
  }
  const MutexLock lock(mutex_);
  remove_locked(id);
}

void Subscriber::remove_locked(std::uint64_t id) {
  const auto handler = handlers_.find(id);
  if (handler == handlers_.end()) return;
  const auto channel = channels_.find(handler->second.channel);
  TURNSTILE_CHECK_MSG(channel != channels_.end(), "a handler's channel lives while it does");
  std::vector<std::uint64_t>& ids = channel->second.handler_ids;
  const auto position = std::find(ids.begin(), ids.end(), id);
  TURNSTILE_CHECK(position != ids.end() && !channel->second.lingers_until);
  ids.erase(position);
  if (ids.empty()) {
    if (connected_ && channel->second.state == ChannelState::confirmed && lingering_ < kMaxLingeringChannels) {
      // Kept subscribed for a while, without waking the reader: it expires
      // the channel at its next wake-up past the deadline.
      channel->second.lingers_until = Clock::now() + milliseconds(kChannelLingerMs);
      ++lingering_;
      TURNSTILE_CHECK(lingering_ <= kMaxLingeringChannels);
    } else {
      queue_locked({Request::Kind::unsubscribe, channel->first, 0, false});
      channels_.erase(channel);
    }
  }
  handlers_.erase(handler);
}

Clock::time_point Subscriber::expire_lingering_locked(Clock::time_point now) {
  auto next = Clock::time_point::max();
  if (lingering_ == 0) return next;
  for (auto channel = channels_.begin(); channel != channels_.end();) {
    const std::optional<Clock::time_point> until = channel->second.lingers_until;
    if (!until || *until > now) {
      if (until) next = std::min(next, *until);
      ++channel;
      continue;
    }
    TURNSTILE_CHECK_MSG(channel->second.handler_ids.empty(), "only channels nobody listens to linger");
    lingering_less_locked();
    queue_locked({Request::Kind::unsubscribe, channel->first, 0, false});
    channel = channels_.erase(channel);
  }
  return next;
}

void Subscriber::run_reader() {
  Backoff backoff;
  MutexLock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    std::unique_ptr<Connection> connection;
    ConnectFailure error;
    try {
      connection = Connection::open(options_);
    } catch (...) {
      error = ConnectFailure::current();
    }
    // Unlocked: a restart or a reconnection found here is told to the
    // handlers now.
    if (connection != nullptr) {
      const bool restarted = counters_->identities->observe(options_.endpoint(), connection->server_run_id());
      if (!restarted && connected_before_) counters_->identities->reconnected(options_.endpoint());
    }
    lock.lock();
    if (connection == nullptr) {
      connect_error_ = error;
      ++connect_failures_;
      changed_.notify_all();
      lock.wait_for(changed_, backoff.next(), [this]() TURNSTILE_REQUIRES(mutex_) { return stopping_ || retry_now_; });
      // With no channel to serve, retrying would only load the server.
      lock.wait(changed_,
                [this]() TURNSTILE_REQUIRES(mutex_) { return stopping_ || retry_now_ || !channels_.empty(); });
      retry_now_ = false;
      continue;
    }
    backoff.reset();
    connect_error_ = {};
    if (std::exchange(connected_before_, true)) counters_->reconnects.fetch_add(1, std::memory_order_relaxed);
    // This connection starts with no subscriptions: subscribe every live
    // channel, announcing it to the handlers if it had been confirmed before.
    requests_.clear();
    // The new connection has no subscription: lingering channels just go.
    std::erase_if(channels_, [](const auto& entry) { return entry.second.lingers_until.has_value(); });
    lingering_ = 0;
    for (auto& [name, channel] : channels_) {
      channel.state = ChannelState::pending;
      channel.token = ++next_token_;
      requests_.push_back({Request::Kind::subscribe, name, channel.token, channel.was_confirmed});
    }
    connected_ = true;
    lock.unlock();
    serve(*connection);
    connection.reset();
    lock.lock();
    connected_ = false;
    for (auto& [name, channel] : channels_) channel.state = ChannelState::pending;
  }
}

void Subscriber::serve(Connection& connection) {
  std::deque<Request> sent;  // in the order the server will answer
  std::vector<Request> batch;
  auto last_input = Clock::now();
  // When the outstanding PING must have been answered; max() if none is.
  auto ping_deadline = Clock::time_point::max();
  try {
    for (;;) {
      auto linger_deadline = Clock::time_point::max();
      {
        const MutexLock lock(mutex_);
        if (stopping_) return;
        linger_deadline = expire_lingering_locked(Clock::now());
        batch.assign(std::make_move_iterator(requests_.begin()), std::make_move_iterator(requests_.end()));
        requests_.clear();
      }
      for (Request& request : batch) {
        const bool subscribe = request.kind == Request::Kind::subscribe;
        const char* command =
            sharded_ ? (subscribe ? "SSUBSCRIBE" : "SUNSUBSCRIBE") : (subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE");
        connection.append({command, request.channel});
        sent.push_back(std::move(request));
      }
      bool unsent = !batch.empty();
      batch.clear();
      const auto now = Clock::now();
      const bool pinging = ping_deadline != Clock::time_point::max();
      if (pinging && now >= ping_deadline) {
        throw TimeoutError("redis " + connection.endpoint() + ": subscriber connection got no PING reply within " +
                           std::to_string(options_.command_timeout_ms) + " ms (command_timeout_ms)");
      }
      const auto next_ping = last_input + milliseconds(options_.pubsub_ping_interval_ms);
      if (!pinging && now >= next_ping) {
        connection.append({"PING"});
        sent.push_back({Request::Kind::ping, {}, 0, false});
        ping_deadline = now + milliseconds(options_.command_timeout_ms);
        unsent = true;
      }
      if (unsent) connection.flush();

      pollfd fds[2] = {{connection.fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      const int timeout = remaining_ms(
          std::min(ping_deadline != Clock::time_point::max() ? ping_deadline : next_ping, linger_deadline), now);
      if (poll(fds, 2, timeout) < 0 && errno != EINTR) {
        throw ConnectionError("redis " + connection.endpoint() + ": poll: " + std::strerror(errno));
      }
      if (fds[1].revents != 0) {
        std::uint64_t count = 0;
        [[maybe_unused]] const ssize_t drained = read(wake_fd_, &count, sizeof(count));
      }
      if (fds[0].revents != 0) {
        connection.read_available();  // throws on EOF, reset, timeout
        last_input = Clock::now();
        ping_deadline = Clock::time_point::max();  // any input shows the server is alive
        while (std::optional<Reply> reply = connection.next_reply()) handle_reply(*reply, sent);
      }
    }
  } catch (const std::exception&) {
    // The connection is unusable; run_reader() reconnects. Subscribers
    // waiting for a confirmation see the next connect failure or time out.
  }
}

void Subscriber::handle_reply(const Reply& reply, std::deque<Request>& sent) {
  const MutexLock lock(mutex_);
  t_dispatching = this;
  struct Reset {
    ~Reset() { t_dispatching = nullptr; }
  } reset;

  const bool push = reply.is_array() && reply.as_array().size() >= 2 && reply.as_array()[0].is_bulk();
  if (push && is_bulk(reply.as_array()[0], sharded_ ? "smessage" : "message") && reply.as_array().size() == 3) {
    const auto& parts = reply.as_array();
    const PubSubEvent event{PubSubEvent::Kind::message, parts[1].as_string(), parts[2].as_string()};
    dispatch_locked(parts[1].as_string(), event);
    return;
  }
  // A sharded channel the server dropped by itself: its slot moved away.
  const bool our_unsubscribe = !sent.empty() && sent.front().kind == Request::Kind::unsubscribe;
  if (sharded_ && push && is_bulk(reply.as_array()[0], "sunsubscribe") && !our_unsubscribe) {
    const auto channel = channels_.find(reply.as_array()[1].as_string());
    if (channel != channels_.end() && channel->second.lingers_until) {
      // Nobody to move: forget it, so a later subscribe() sends SSUBSCRIBE.
      lingering_less_locked();
      channels_.erase(channel);
      return;
    }
    if (channel != channels_.end()) {
      channel->second.state = ChannelState::pending;
      channel->second.moved_away = true;
    }
    if (on_channel_moved_) on_channel_moved_();
    return;
  }
  // Everything else answers the oldest command still awaiting its reply.
  if (sent.empty())
    throw ProtocolError("redis " + options_.endpoint() + ": unexpected pub/sub reply " + reply.to_string());
  const Request request = std::move(sent.front());
  sent.pop_front();
  confirm_locked(request, reply);
}

void Subscriber::confirm_locked(const Request& request, const Reply& reply) {
  const auto unexpected = [&] {
    return ProtocolError("redis " + options_.endpoint() + ": unexpected reply " + reply.to_string() +
                         " to a pub/sub command");
  };
  const bool push = reply.is_array() && reply.as_array().size() >= 2;
  switch (request.kind) {
    case Request::Kind::ping:
      // ["pong", ""] while subscribed to something, +PONG otherwise.
      if (!(push && is_bulk(reply.as_array()[0], "pong")) && !(reply.is_status() && reply.as_string() == "PONG")) {
        throw unexpected();
      }
      return;
    case Request::Kind::unsubscribe:
      if (!(push && is_bulk(reply.as_array()[0], sharded_ ? "sunsubscribe" : "unsubscribe")) && !reply.is_error()) {
        throw unexpected();
      }
      return;
    case Request::Kind::subscribe:
      break;
  }
  if (!reply.is_error() && !(push && is_bulk(reply.as_array()[0], sharded_ ? "ssubscribe" : "subscribe"))) {
    throw unexpected();
  }
  const auto it = channels_.find(request.channel);
  if (it == channels_.end() || it->second.token != request.token) return;  // superseded
  Channel& channel = it->second;
  TURNSTILE_CHECK_MSG(channel.state == ChannelState::pending, "a channel waits for the answer to its current token");
  if (reply.is_error()) {
    channel.state = ChannelState::failed;
    channel.error = reply.as_string();
    // A channel that lived here was refused on a new connection: it now
    // belongs elsewhere (MOVED) and its handlers must move with it.
    channel.moved_away = request.resubscribe;
    if (request.resubscribe && on_channel_moved_) on_channel_moved_();
  } else {
    channel.state = ChannelState::confirmed;
    channel.was_confirmed = true;
    channel.moved_away = false;
    if (request.resubscribe) {
      dispatch_locked(request.channel, {PubSubEvent::Kind::resubscribed, request.channel, {}});
    }
  }
  changed_.notify_all();
}

void Subscriber::lingering_less_locked() {
  TURNSTILE_CHECK_MSG(lingering_ > 0, "counted down once per lingering channel");
  --lingering_;
}

void Subscriber::dispatch_locked(const std::string& channel_name, const PubSubEvent& event) {
  TURNSTILE_CHECK_MSG(t_dispatching == this, "handlers run flagged, so they cannot block the reader");
  const auto channel = channels_.find(channel_name);
  if (channel == channels_.end()) return;
  // A handler may drop subscriptions, so walk a copy of the ids and look
  // each one up again.
  dispatch_ids_ = channel->second.handler_ids;
  for (const std::uint64_t id : dispatch_ids_) {
    const auto handler = handlers_.find(id);
    if (handler == handlers_.end()) continue;
    const std::shared_ptr<PubSubHandler> function = handler->second.function;
    try {
      (*function)(event);
    } catch (...) {
      // A throwing handler must not take the reader thread down; handlers
      // are documented not to throw.
    }
  }
}

}  // namespace turnstile::redis
