#include "redis/connection.h"

#include <netinet/in.h>
#include <poll.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <new>
#include <utility>

#include "core/check.h"
#include "core/script_call.h"
#include "redis/command_format.h"
#include "redis/reply_conversion.h"
#include "redis/server_identity.h"
#include "redis/tls_stream.h"
#include "turnstile/errors.h"

namespace turnstile::redis {
namespace {

// TLS: decrypted input is read in chunks of this size.
constexpr std::size_t kTlsReadChunkBytes = 16 * 1024;

struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

timeval to_timeval(int milliseconds) {
  TURNSTILE_CHECK_MSG(milliseconds > 0, "RedisOptions::validate() refuses other timeouts");
  return timeval{milliseconds / 1000, (milliseconds % 1000) * 1000};
}

bool is_timeout(int saved_errno, const char* errstr) {
  if (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK || saved_errno == ETIMEDOUT) return true;
  // hiredis records strerror(errno); errno itself may have been overwritten
  // by cleanup (close) inside hiredis before it returned.
  return std::strcmp(errstr, std::strerror(EAGAIN)) == 0 || std::strcmp(errstr, std::strerror(ETIMEDOUT)) == 0;
}

void enable_keepalive(int fd) {
  // Best effort: if the kernel refuses, the PING of the subscriber and the
  // command timeout still bound every wait.
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &kKeepAliveIdleS, sizeof(kKeepAliveIdleS));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &kKeepAliveIntervalS, sizeof(kKeepAliveIntervalS));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &kKeepAliveProbes, sizeof(kKeepAliveProbes));
}

}  // namespace

namespace {

using Clock = std::chrono::steady_clock;

PoolExhaustedError cut_short_by_callers_deadline(const RedisOptions& options) {
  return PoolExhaustedError("redis " + options.endpoint() +
                            ": opening a connection did not finish by the caller's deadline; nothing was sent");
}

// How long the next handshake step may wait: connect_timeout_ms, or what is
// left before the caller's deadline if that is shorter (at least 1 ms: a
// deadline already past is refused before the step).
int handshake_step_ms(const RedisOptions& options, const std::optional<Clock::time_point>& callers_deadline) {
  if (!callers_deadline) return options.connect_timeout_ms;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(*callers_deadline - Clock::now()).count();
  if (left <= 0) {
    throw cut_short_by_callers_deadline(options);
  }
  return static_cast<int>(std::min<std::int64_t>(left, options.connect_timeout_ms));
}

}  // namespace

std::optional<Clock::time_point> callers_deadline_after(const std::optional<std::chrono::nanoseconds>& within) {
  if (!within) return std::nullopt;
  return Clock::now() +
         std::clamp<std::chrono::nanoseconds>(*within, std::chrono::nanoseconds::zero(), std::chrono::hours(24));
}

std::unique_ptr<Connection> Connection::open(const RedisOptions& options,
                                             std::optional<Clock::time_point> callers_deadline) {
  try {
    return open_bounded(options, callers_deadline);
  } catch (const PoolExhaustedError&) {
    throw;
  } catch (const TimeoutError&) {
    // A step that waited only what the caller had left: the caller's
    // deadline ended it, not the server's connect_timeout_ms.
    if (callers_deadline && Clock::now() >= *callers_deadline) {
      throw cut_short_by_callers_deadline(options);
    }
    throw;
  }
}

std::unique_ptr<Connection> Connection::open_bounded(const RedisOptions& options,
                                                     const std::optional<Clock::time_point>& callers_deadline) {
  const auto step_ms = [&] { return handshake_step_ms(options, callers_deadline); };
  std::unique_ptr<Connection> connection;
  if (options.tls.enabled) {
    RedisOptions bounded = options;
    bounded.connect_timeout_ms = step_ms();
    std::unique_ptr<TlsStream> stream = TlsStream::connect(bounded);
    connection.reset(new Connection(nullptr, options.endpoint()));
    connection->tls_ = std::move(stream);
    connection->reader_ = redisReaderCreate();
    if (connection->reader_ == nullptr) throw std::bad_alloc();
    enable_keepalive(connection->tls_->fd());
  } else {
    const int connect_ms = step_ms();
    const timeval connect_timeout = to_timeval(connect_ms);
    const bool unix_socket = !options.unix_socket_path.empty();
    redisContext* context = unix_socket ? redisConnectUnixWithTimeout(options.unix_socket_path.c_str(), connect_timeout)
                                        : redisConnectWithTimeout(options.host.c_str(), options.port, connect_timeout);
    const int saved_errno = errno;
    if (context == nullptr) throw std::bad_alloc();
    connection.reset(new Connection(context, options.endpoint()));
    connection->timeout_ms_ = connect_ms;
    connection->timeout_name_ = "connect_timeout_ms";
    if (context->err != 0) connection->throw_transport_error("connect", saved_errno);
    if (!unix_socket) enable_keepalive(context->fd);
  }
  // Each step of the handshake: its own bound, set again before it.
  const auto handshake = [&](const std::vector<std::string>& argv) {
    connection->set_timeout(step_ms(), "connect_timeout_ms");
    return connection->command(argv);
  };
  if (!options.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!options.user.empty()) auth.push_back(options.user);
    auth.push_back(options.password);
    raise_if_error(handshake(auth));
  }
  if (options.db != 0) {
    const Reply selected = handshake({"SELECT", std::to_string(options.db)});
    if (selected.is_error()) throw DatabaseSelectError(selected.as_string());
  }
  // Which process this is (Backend::watch_restarts). Refused (renamed away,
  // an ACL without it): no run_id, and restarts go unnoticed.
  const Reply info = handshake({"INFO", "server"});
  if (info.is_bulk()) connection->server_run_id_ = run_id_from_info(info.as_string()).value_or("");
  connection->set_timeout(options.command_timeout_ms, "command_timeout_ms");
  connection->check_transport();
  return connection;
}

void Connection::check_transport() const {
  TURNSTILE_CHECK_MSG((context_ == nullptr) == (tls_ != nullptr), "plain hiredis or TLS, one of them");
  TURNSTILE_CHECK_MSG((tls_ != nullptr) == (reader_ != nullptr), "TLS parses replies with its own reader");
}

Connection::Connection(redisContext* context, std::string endpoint)
    : context_(context), endpoint_(std::move(endpoint)) {}

Connection::~Connection() {
  if (context_ != nullptr) redisFree(context_);
  if (reader_ != nullptr) redisReaderFree(reader_);
}

int Connection::fd() const {
  check_transport();
  return tls_ != nullptr ? tls_->fd() : context_->fd;
}

bool Connection::broken() const {
  check_transport();
  return tls_ != nullptr ? tls_broken_ : context_->err != 0;
}

template <typename Io>
auto Connection::tls_io(Io&& io) -> decltype(io()) {
  if (tls_broken_) throw ConnectionError("redis " + endpoint_ + ": connection already broken");
  try {
    return io();
  } catch (const TimeoutError&) {
    tls_broken_ = true;
    timed_out_ = true;
    throw;
  } catch (const Error&) {  // ConnectionError, ProtocolError
    tls_broken_ = true;
    throw;
  }
}

Reply Connection::tls_read_reply(std::string_view doing) {
  for (;;) {
    if (std::optional<Reply> reply = next_reply()) return *std::move(reply);
    tls_io([&] {
      char buffer[kTlsReadChunkBytes];
      const std::size_t count = tls_->read_some(buffer, sizeof(buffer), true, doing);
      if (redisReaderFeed(reader_, buffer, count) != REDIS_OK) throw std::bad_alloc();
    });
  }
}

void Connection::set_timeout(int timeout_ms, std::string_view name) {
  TURNSTILE_CHECK(timeout_ms > 0 && !name.empty());
  timeout_ms_ = timeout_ms;
  timeout_name_ = name;
  if (tls_ != nullptr) {
    tls_->set_timeout(timeout_ms, name);
    return;
  }
  if (redisSetTimeout(context_, to_timeval(timeout_ms)) != REDIS_OK) {
    throw_transport_error("setting socket timeouts", errno);
  }
}

Reply Connection::command(const std::vector<std::string>& argv) { return command({}, {&argv}); }

Reply Connection::command(std::initializer_list<std::string_view> head,
                          std::initializer_list<const std::vector<std::string>*> tails) {
  std::string_view doing = "command";
  if (head.size() > 0) {
    doing = *head.begin();
  } else if (tails.size() > 0 && !(*tails.begin())->empty()) {
    doing = (*tails.begin())->front();
  }
  append(head, tails);
  if (tls_ != nullptr) {
    tls_io([&] { tls_->write_all(output_, doing); });
    output_.clear();
    return tls_read_reply(doing);
  }
  void* raw = nullptr;
  const int status = redisGetReply(context_, &raw);  // writes the command, then reads its reply
  const int saved_errno = errno;
  if (status != REDIS_OK || raw == nullptr) throw_transport_error(doing, saved_errno);
  const ReplyPtr reply(static_cast<redisReply*>(raw));
  return convert_reply(*reply);
}

Reply Connection::command_by(const std::vector<std::string>& argv,
                             const std::optional<Clock::time_point>& callers_deadline) {
  TURNSTILE_CHECK_MSG(!argv.empty(), "a command has a name");
  if (!callers_deadline) return command(argv);
  const auto left_ms = std::chrono::ceil<std::chrono::milliseconds>(*callers_deadline - Clock::now()).count();
  if (left_ms <= 0) {
    throw PoolExhaustedError("redis " + endpoint_ + ": " + argv[0] +
                             " not sent, the caller's deadline has passed; nothing was sent");
  }
  if (left_ms >= timeout_ms_) return command(argv);
  const int own_ms = timeout_ms_;
  const std::string_view own_name = timeout_name_;
  set_timeout(static_cast<int>(left_ms), "the caller's deadline");
  Reply reply = command(argv);  // a timeout breaks the connection: nothing to restore
  set_timeout(own_ms, own_name);
  return reply;
}

std::vector<Reply> Connection::pipeline(const std::vector<std::vector<std::string>>& commands) {
  for (const std::vector<std::string>& argv : commands) {
    TURNSTILE_CHECK_MSG(!argv.empty(), "a pipelined command has a name");
    append(argv);
  }
  std::vector<Reply> replies;
  replies.reserve(commands.size());
  if (tls_ != nullptr) {
    flush();
    for (const std::vector<std::string>& argv : commands) replies.push_back(tls_read_reply(argv[0]));
    return replies;
  }
  for (const std::vector<std::string>& argv : commands) {
    void* raw = nullptr;
    if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) throw_transport_error(argv[0], errno);
    const ReplyPtr reply(static_cast<redisReply*>(raw));
    replies.push_back(convert_reply(*reply));
  }
  return replies;
}

void Connection::append(const std::vector<std::string>& argv) { append({}, {&argv}); }

void Connection::append(std::initializer_list<std::string_view> head,
                        std::initializer_list<const std::vector<std::string>*> tails) {
  if (tls_ != nullptr) {
    append_command(output_, head, tails);
    return;
  }
  request_.clear();
  append_command(request_, head, tails);
  if (redisAppendFormattedCommand(context_, request_.data(), request_.size()) != REDIS_OK) {
    throw std::bad_alloc();  // the only way appending to a buffer fails
  }
}

void Connection::flush() {
  if (tls_ != nullptr) {
    tls_io([&] { tls_->write_all(output_, "write"); });
    output_.clear();
    return;
  }
  int done = 0;
  while (done == 0) {
    if (redisBufferWrite(context_, &done) != REDIS_OK) throw_transport_error("write", errno);
  }
}

bool Connection::wait_readable(std::chrono::steady_clock::time_point deadline) {
  if (tls_ != nullptr && tls_->has_pending()) return true;  // decrypted already; poll() cannot see it
  for (int attempt = 0; attempt <= kMaxPollInterruptions; ++attempt) {
    const std::chrono::nanoseconds left =
        std::max<std::chrono::nanoseconds>(deadline - std::chrono::steady_clock::now(), {});
    const auto seconds = std::chrono::floor<std::chrono::seconds>(left);
    const timespec wait{static_cast<time_t>(seconds.count()), static_cast<long>((left - seconds).count())};
    pollfd fds[1] = {{fd(), POLLIN, 0}};
    const int ready = ppoll(fds, 1, &wait, nullptr);
    if (ready > 0) return true;
    if (ready == 0) return false;
    if (errno != EINTR) throw ConnectionError("redis " + endpoint_ + ": poll: " + std::strerror(errno));
  }
  return false;
}

void Connection::read_available() {
  if (tls_ != nullptr) {
    // Everything OpenSSL can give now, so that none stays hidden from a
    // poll() of the socket (a readable socket may also hold no data at all,
    // e.g. only a TLS session ticket).
    tls_io([&] {
      char buffer[kTlsReadChunkBytes];
      while (const std::size_t count = tls_->read_some(buffer, sizeof(buffer), false, "read")) {
        if (redisReaderFeed(reader_, buffer, count) != REDIS_OK) throw std::bad_alloc();
      }
    });
    return;
  }
  if (redisBufferRead(context_) != REDIS_OK) throw_transport_error("read", errno);
}

std::optional<Reply> Connection::next_reply() {
  void* raw = nullptr;
  if (reader_ != nullptr) {
    if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
      tls_broken_ = true;
      throw ProtocolError("redis " + endpoint_ + ": read: " + reader_->errstr);
    }
    if (raw == nullptr) return std::nullopt;
    const ReplyPtr reply(static_cast<redisReply*>(raw));
    return convert_reply(*reply);
  }
  if (redisGetReplyFromReader(context_, &raw) != REDIS_OK) throw_transport_error("read", errno);
  if (raw == nullptr) return std::nullopt;
  const ReplyPtr reply(static_cast<redisReply*>(raw));
  return convert_reply(*reply);
}

void Connection::throw_transport_error(std::string_view doing, int saved_errno) {
  TURNSTILE_CHECK_MSG(context_ != nullptr, "TLS reports its own transport errors (TlsStream)");
  const std::string where = "redis " + endpoint_ + ": " + std::string(doing);
  switch (context_->err) {
    case REDIS_ERR_IO:
      if (is_timeout(saved_errno, context_->errstr)) {
        timed_out_ = true;
        throw TimeoutError(where + " timed out after " + std::to_string(timeout_ms_) + " ms (" +
                           std::string(timeout_name_) + ")");
      }
      throw ConnectionError(where + ": " + context_->errstr);
    case REDIS_ERR_EOF:
      throw ConnectionError(where + ": server closed the connection");
    case REDIS_ERR_PROTOCOL:
      throw ProtocolError(where + ": " + context_->errstr);
    case REDIS_ERR_OOM:
      throw std::bad_alloc();
    default:
      throw ConnectionError(where + ": " + context_->errstr);
  }
}

}  // namespace turnstile::redis
