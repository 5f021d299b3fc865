// redis/tls_stream.h
//
// A TLS client stream on OpenSSL, for rediss:// connections (Debian's
// hiredis 0.14 has no TLS): Connection formats commands with hiredis and
// parses replies with hiredis's socket-free redisReader, and moves the bytes
// through a TlsStream.
//
// The socket is non-blocking and every wait is a poll() bounded by the
// current timeout, so a read or write that OpenSSL reports as
// SSL_ERROR_WANT_READ / SSL_ERROR_WANT_WRITE (TLS records are not bytes: a
// read may need a write, e.g. for a key update, and a readable socket may
// hold only a session ticket) waits at most that long. Writes use
// MSG_NOSIGNAL: a server that vanished raises ConnectionError, not SIGPIPE.
//
// Errors name the endpoint like Connection's: TimeoutError naming the
// timeout option, ConnectionError "server closed the connection", and
// ConnectionError "TLS handshake failed: ...", or TlsVerificationError
// with OpenSSL's certificate verification error when there is one. A server that refuses the client's
// certificate (or its absence) does so in TLS 1.3 after the client's
// handshake is over, on the first command: such errors, and alerts that
// mean it, carry a hint naming tls_cert_file and tls_key_file.
//
// Not thread-safe: one thread uses a stream at a time. tls_context() is
// thread-safe.

#ifndef TURNSTILE_REDIS_TLS_STREAM_H_
#define TURNSTILE_REDIS_TLS_STREAM_H_

#include <openssl/ssl.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "turnstile/redis_backend.h"

namespace turnstile::redis {

// The lowest protocol version offered (Redis 6+ speaks TLS 1.2 and 1.3).
inline constexpr int kMinTlsVersion = TLS1_2_VERSION;

// The client SSL_CTX for `tls`: built (and its files read) once per distinct
// set of file and verification options in the process, then shared by every
// connection using the same ones. Files changed later are not read again.
// Throws InvalidArgumentError naming a CA file or directory, certificate or
// key that cannot be read or used (or a key that does not match its
// certificate).
std::shared_ptr<SSL_CTX> tls_context(const TlsOptions& tls);

// What the stream's socket BIO saw (tls_stream.cpp).
struct TlsBioState;

class TlsStream {
 public:
  // Connects to options.host:options.port and runs the TLS handshake, both
  // within options.connect_timeout_ms (which stays the timeout until
  // set_timeout()). Verifies the certificate and the host name (or
  // tls.server_name) unless tls.insecure_skip_verify. Throws TimeoutError,
  // ConnectionError (naming the endpoint), or InvalidArgumentError from
  // tls_context().
  static std::unique_ptr<TlsStream> connect(const RedisOptions& options);

  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  // Each later wait for the socket lasts at most `timeout_ms`; `name` is the
  // option it came from, for error messages.
  void set_timeout(int timeout_ms, std::string_view name);

  // Writes all of `data`. `doing` names the operation for errors ("write").
  void write_all(std::string_view data, std::string_view doing);

  // Reads decrypted bytes into `buffer` (up to `capacity`) and returns how
  // many. With `wait`, waits for at least one byte (at most the timeout);
  // without, returns 0 when none can be read now. Throws ConnectionError
  // "server closed the connection" at end of stream.
  std::size_t read_some(char* buffer, std::size_t capacity, bool wait, std::string_view doing);

  // OpenSSL holds input not yet returned by read_some() (a poll() of fd()
  // would not show it).
  bool has_pending() const;

  int fd() const { return fd_; }

 private:
  TlsStream(int fd, std::string endpoint);

  // Waits for `events` on the socket until `deadline`; throws TimeoutError
  // for `doing` when it passes.
  void wait_for(short events, std::chrono::steady_clock::time_point deadline, std::string_view doing);
  // Throws the error SSL_get_error() reported as `ssl_error` for `doing`.
  [[noreturn]] void throw_ssl_error(int ssl_error, std::string_view doing);
  [[noreturn]] void throw_handshake_error(int ssl_error, const std::string& verified_name);
  std::chrono::steady_clock::time_point deadline() const;

  int fd_;
  std::string endpoint_;
  std::shared_ptr<SSL_CTX> context_;
  SSL* ssl_ = nullptr;
  std::unique_ptr<TlsBioState> bio_state_;
  int timeout_ms_ = 0;
  std::string_view timeout_name_;
  bool received_data_ = false;  // read_some() has returned data
};

}  // namespace turnstile::redis

#endif  // TURNSTILE_REDIS_TLS_STREAM_H_
