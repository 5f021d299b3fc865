// redis/connection.h
//
// One synchronous hiredis connection to the server named by RedisOptions,
// ready for use: connected within the connect timeout, TCP keepalive on,
// authenticated, with its database selected, and knowing which server
// process it reached (INFO server's run_id, redis/server_identity.h). Both
// the command pool and the pub/sub reader are built from these.
//
// With options.tls.enabled the bytes go through a TlsStream (OpenSSL) on a
// socket of its own, commands are formatted by redisFormatCommandArgv and
// replies parsed by a socket-free redisReader; the API and its errors are
// the same.
//
// Every transport failure is raised as a typed error naming the endpoint:
// TimeoutError when a connect, read or write ran out of its configured time,
// ProtocolError for unparseable input, ConnectionError otherwise. After a
// transport failure the connection is broken() for good and must be dropped;
// error replies from the server are values, not failures.
//
// Not thread-safe: one thread uses a connection at a time.

#ifndef TURNSTILE_REDIS_CONNECTION_H_
#define TURNSTILE_REDIS_CONNECTION_H_

#include <hiredis/hiredis.h>

#include <chrono>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/redis_backend.h"
#include "turnstile/reply.h"

namespace turnstile::redis {

class TlsStream;

// A caller's deadline `within` from now (EvalOptions::send_within,
// SubscribeOptions::confirm_within), nullopt when it has none. Clamped to
// 0..24 h, far above every timeout it is compared with, so that a far
// deadline cannot overflow the clock.
std::optional<std::chrono::steady_clock::time_point> callers_deadline_after(
    const std::optional<std::chrono::nanoseconds>& within);

// TCP keepalive on every connection, so that a peer that vanished without a
// FIN (host down, cable pulled) is noticed within about
// idle + interval * probes seconds even on an idle connection.
inline constexpr int kKeepAliveIdleS = 5;
inline constexpr int kKeepAliveIntervalS = 1;
inline constexpr int kKeepAliveProbes = 3;

// wait_readable() retries a poll interrupted by a signal at most this often
// before it reports the time as run out.
inline constexpr int kMaxPollInterruptions = 64;

class Connection {
 public:
  // Connects, sets socket timeouts and keepalive, sends AUTH (if a password
  // is set), SELECT (if db != 0) and INFO server (its run_id; a server that
  // refuses INFO leaves it empty). The handshake is bounded by
  // connect_timeout_ms, later calls by command_timeout_ms per read or write.
  // Throws ConnectionError / TimeoutError naming the endpoint, or the
  // ServerError the server answered AUTH or SELECT with (e.g.
  // AuthenticationError).
  // `callers_deadline`, when given, bounds every step of the handshake as
  // well: one it cuts short throws PoolExhaustedError (nothing of the
  // caller's was sent; no sign the server is down).
  static std::unique_ptr<Connection> open(
      const RedisOptions& options,
      std::optional<std::chrono::steady_clock::time_point> callers_deadline = std::nullopt);

  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends argv (binary-safe) and waits for its reply. Error replies are
  // returned as Reply::error values.
  Reply command(const std::vector<std::string>& argv);
  // command() of a command given in parts (redis/command_format.h), sent
  // without an argv copied first: EVALSHA <sha> <numkeys>, keys, arguments.
  Reply command(std::initializer_list<std::string_view> head,
                std::initializer_list<const std::vector<std::string>*> tails);
  // command(), each read and write bounded by `callers_deadline` as well
  // when it comes before command_timeout_ms (a TimeoutError then names the
  // caller's deadline); a deadline already past sends nothing
  // (PoolExhaustedError).
  Reply command_by(const std::vector<std::string>& argv,
                   const std::optional<std::chrono::steady_clock::time_point>& callers_deadline);

  // Sends every command of `commands` in one write and returns their
  // replies in order (error replies as values). For ASKING + EVALSHA and for
  // EVALSHA + WAIT, which must run on one connection.
  std::vector<Reply> pipeline(const std::vector<std::vector<std::string>>& commands);

  // Pipelining, for the pub/sub reader: append() queues a command in the
  // output buffer, flush() writes the buffer out, read_available() does one
  // read from the socket (call it when poll() reports the socket readable),
  // and next_reply() returns the next complete reply read so far, if any.
  void append(const std::vector<std::string>& argv);
  void append(std::initializer_list<std::string_view> head,
              std::initializer_list<const std::vector<std::string>*> tails);
  void flush();
  void read_available();
  std::optional<Reply> next_reply();

  // Waits until the socket has input, or was closed or failed (the next
  // read_available() tells which), or `deadline` passes (never later; a
  // deadline that passed only looks). Returns false if the time ran out
  // first. Throws ConnectionError naming the endpoint if poll itself fails.
  bool wait_readable(std::chrono::steady_clock::time_point deadline);

  // The socket, for poll(). Over TLS, read_available() leaves no decrypted
  // input behind, so a poll() after it sees everything still to come.
  int fd() const;
  // A transport failure happened; the connection cannot be used again.
  bool broken() const;
  // The failure was a timeout (the server may be merely slow), as opposed
  // to the connection being closed or reset (the server is likely gone).
  bool timed_out() const { return timed_out_; }

  const std::string& endpoint() const { return endpoint_; }
  // The server process's run_id, learned in the handshake; empty if the
  // server refused INFO or did not name it.
  const std::string& server_run_id() const { return server_run_id_; }

 private:
  // open() without telling a timeout the caller's deadline ended apart.
  static std::unique_ptr<Connection> open_bounded(
      const RedisOptions& options, const std::optional<std::chrono::steady_clock::time_point>& callers_deadline);
  Connection(redisContext* context, std::string endpoint);

  // Applies `timeout_ms` to reads and writes; `name` is the option it came
  // from, for error messages.
  void set_timeout(int timeout_ms, std::string_view name);

  // Raises the transport error recorded in the context. `doing` is what was
  // attempted ("connect", "EVALSHA", ...); `saved_errno` is errno right
  // after the failing hiredis call.
  [[noreturn]] void throw_transport_error(std::string_view doing, int saved_errno);
  // Exactly one transport: a hiredis context, or TLS with its reply reader.
  void check_transport() const;

  // TLS: runs `io`, marking the connection broken (and timed out) if it
  // throws a transport error.
  template <typename Io>
  auto tls_io(Io&& io) -> decltype(io());
  // TLS: reads until the reader holds a complete reply, and returns it.
  Reply tls_read_reply(std::string_view doing);

  redisContext* context_;  // plaintext only
  std::unique_ptr<TlsStream> tls_;
  redisReader* reader_ = nullptr;  // TLS only
  std::string output_;             // TLS: formatted commands not yet sent
  std::string request_;            // plaintext: the command being formatted (its capacity reused)
  bool tls_broken_ = false;
  std::string endpoint_;
  std::string server_run_id_;
  int timeout_ms_ = 0;
  std::string_view timeout_name_;
  bool timed_out_ = false;
};

}  // namespace turnstile::redis

#endif  // TURNSTILE_REDIS_CONNECTION_H_
