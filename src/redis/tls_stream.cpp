#include "redis/tls_stream.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <new>
#include <tuple>
#include <utility>

#include "core/check.h"
#include "turnstile/errors.h"
#include "turnstile/mutex.h"

namespace turnstile::redis {

// What the socket BIO saw, so that errors can tell an orderly close from a
// reset (OpenSSL reports both as SSL_ERROR_SYSCALL or SSL_ERROR_SSL).
struct TlsBioState {
  int fd = -1;
  bool end_of_stream = false;
  bool received_any = false;  // a byte came back: the peer speaks to us
  int last_errno = 0;
};

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kHandshake = "TLS handshake";

bool is_retryable(int error) { return error == EAGAIN || error == EWOULDBLOCK || error == EINTR; }

TlsBioState* state_of(BIO* bio) { return static_cast<TlsBioState*>(BIO_get_data(bio)); }

int bio_write(BIO* bio, const char* data, int size) {
  BIO_clear_retry_flags(bio);
  TlsBioState* state = state_of(bio);
  const ssize_t written = send(state->fd, data, static_cast<std::size_t>(size), MSG_NOSIGNAL);
  if (written < 0) {
    state->last_errno = errno;
    if (is_retryable(errno)) BIO_set_retry_write(bio);
  }
  return static_cast<int>(written);
}

int bio_read(BIO* bio, char* data, int size) {
  BIO_clear_retry_flags(bio);
  TlsBioState* state = state_of(bio);
  const ssize_t count = recv(state->fd, data, static_cast<std::size_t>(size), 0);
  if (count == 0) state->end_of_stream = true;
  if (count > 0) state->received_any = true;
  if (count < 0) {
    state->last_errno = errno;
    if (is_retryable(errno)) BIO_set_retry_read(bio);
  }
  return static_cast<int>(count);
}

long bio_ctrl(BIO* /*bio*/, int command, long /*number*/, void* /*pointer*/) {
  return command == BIO_CTRL_FLUSH ? 1 : 0;  // writes are unbuffered
}

int bio_create(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

// A socket BIO that writes with MSG_NOSIGNAL (OpenSSL's own uses write(),
// which raises SIGPIPE on a closed connection) and records end of stream.
BIO_METHOD* socket_bio_method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* made = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "turnstile socket");
    if (made == nullptr) throw std::bad_alloc();
    BIO_meth_set_write(made, bio_write);
    BIO_meth_set_read(made, bio_read);
    BIO_meth_set_ctrl(made, bio_ctrl);
    BIO_meth_set_create(made, bio_create);
    return made;
  }();
  return method;
}

// The reason of the last OpenSSL error queued by this thread, or `fallback`.
std::string openssl_reason(std::string_view fallback) {
  const unsigned long error = ERR_peek_last_error();
  const char* reason = error == 0 ? nullptr : ERR_reason_error_string(error);
  return reason != nullptr ? std::string(reason) : std::string(fallback);
}

[[noreturn]] void bad_file(std::string_view what, const std::string& path, const std::string& problem) {
  throw InvalidArgumentError("TLS " + std::string(what) + " '" + path + "' " + problem);
}

// Throws if `path` cannot be opened for reading, with the system's reason.
void check_readable(std::string_view what, const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "r");
  if (file == nullptr) bad_file(what, path, std::string("cannot be read: ") + std::strerror(errno));
  std::fclose(file);
}

struct ContextDeleter {
  void operator()(SSL_CTX* context) const { SSL_CTX_free(context); }
};

std::shared_ptr<SSL_CTX> make_context(const TlsOptions& tls) {
  ERR_clear_error();
  std::shared_ptr<SSL_CTX> context(SSL_CTX_new(TLS_client_method()), ContextDeleter());
  if (context == nullptr) throw std::bad_alloc();
  SSL_CTX* raw = context.get();
  SSL_CTX_set_min_proto_version(raw, kMinTlsVersion);
  SSL_CTX_set_mode(raw, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_verify(raw, tls.insecure_skip_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, nullptr);
  if (!tls.ca_file.empty()) check_readable("CA file", tls.ca_file);
  if (!tls.ca_dir.empty() && access(tls.ca_dir.c_str(), R_OK | X_OK) != 0) {
    bad_file("CA directory", tls.ca_dir, std::string("cannot be read: ") + std::strerror(errno));
  }
  if (!tls.ca_file.empty() || !tls.ca_dir.empty()) {
    if (SSL_CTX_load_verify_locations(raw, tls.ca_file.empty() ? nullptr : tls.ca_file.c_str(),
                                      tls.ca_dir.empty() ? nullptr : tls.ca_dir.c_str()) != 1) {
      const std::string& named = tls.ca_file.empty() ? tls.ca_dir : tls.ca_file;
      bad_file(tls.ca_file.empty() ? "CA directory" : "CA file", named,
               "holds no usable certificate: " + openssl_reason("unknown error"));
    }
  } else if (SSL_CTX_set_default_verify_paths(raw) != 1) {
    throw InvalidArgumentError("TLS: cannot load the system's CA certificates: " + openssl_reason("unknown error"));
  }
  if (!tls.cert_file.empty()) {
    check_readable("certificate file", tls.cert_file);
    if (SSL_CTX_use_certificate_chain_file(raw, tls.cert_file.c_str()) != 1) {
      bad_file("certificate file", tls.cert_file, "holds no usable certificate: " + openssl_reason("unknown error"));
    }
  }
  if (!tls.key_file.empty()) {
    check_readable("key file", tls.key_file);
    if (SSL_CTX_use_PrivateKey_file(raw, tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      bad_file("key file", tls.key_file, "holds no usable private key: " + openssl_reason("unknown error"));
    }
    if (SSL_CTX_check_private_key(raw) != 1) {
      bad_file("key file", tls.key_file, "does not match the certificate '" + tls.cert_file + "'");
    }
  }
  ERR_clear_error();
  return context;
}

bool is_ip_address(const std::string& host) {
  in6_addr address{};
  return inet_pton(AF_INET, host.c_str(), &address) == 1 || inet_pton(AF_INET6, host.c_str(), &address) == 1;
}

// Appended to an error the server's refusal of the client certificate may
// have caused.
constexpr std::string_view kClientCertificateHint =
    " (right after the TLS handshake: does the server require a client certificate, tls_cert_file and "
    "tls_key_file, and trust its CA?)";

// `reason` with kClientCertificateHint if it is an alert the server sends
// when it refuses the client's certificate or gets none.
std::string with_alert_hint(std::string reason) {
  for (const std::string_view alert : {"alert certificate required", "alert bad certificate", "alert unknown ca",
                                       "alert handshake failure", "alert certificate unknown"}) {
    if (reason.find(alert) != std::string::npos) return reason + std::string(kClientCertificateHint);
  }
  return reason;
}

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1LL << 30));
}

}  // namespace

std::shared_ptr<SSL_CTX> tls_context(const TlsOptions& tls) {
  using Key = std::tuple<std::string, std::string, std::string, std::string, bool>;
  static Mutex mutex;
  static std::map<Key, std::shared_ptr<SSL_CTX>> contexts;
  const Key key{tls.ca_file, tls.ca_dir, tls.cert_file, tls.key_file, tls.insecure_skip_verify};
  const MutexLock lock(mutex);
  std::shared_ptr<SSL_CTX>& context = contexts[key];
  if (context == nullptr) {
    try {
      context = make_context(tls);
    } catch (...) {
      contexts.erase(key);
      throw;
    }
  }
  return context;
}

TlsStream::TlsStream(int fd, std::string endpoint)
    : fd_(fd), endpoint_(std::move(endpoint)), bio_state_(std::make_unique<TlsBioState>()) {
  TURNSTILE_CHECK(fd >= 0);
  bio_state_->fd = fd;
}

TlsStream::~TlsStream() {
  // No close_notify: the server treats a plain close the same, and a
  // shutdown could block on a server that hangs.
  if (ssl_ != nullptr) SSL_free(ssl_);
  close(fd_);
}

std::unique_ptr<TlsStream> TlsStream::connect(const RedisOptions& options) {
  TURNSTILE_CHECK_MSG(options.tls.enabled && options.unix_socket_path.empty(), "RedisOptions::validate() ran");
  const std::shared_ptr<SSL_CTX> context = tls_context(options.tls);
  const std::string endpoint = options.endpoint();
  const std::string where = "redis " + endpoint + ": ";
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(options.connect_timeout_ms);

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  const std::string port = std::to_string(options.port);
  const int resolved = getaddrinfo(options.host.c_str(), port.c_str(), &hints, &addresses);
  if (resolved != 0) throw ConnectionError(where + "connect: " + gai_strerror(resolved));
  const std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(addresses, &freeaddrinfo);

  std::unique_ptr<TlsStream> stream;
  int last_errno = 0;
  for (const addrinfo* address = addresses; address != nullptr && stream == nullptr; address = address->ai_next) {
    const int fd = socket(address->ai_family, address->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      last_errno = errno;
      continue;
    }
    auto candidate = std::unique_ptr<TlsStream>(new TlsStream(fd, endpoint));
    candidate->timeout_ms_ = options.connect_timeout_ms;
    candidate->timeout_name_ = "connect_timeout_ms";
    if (::connect(fd, address->ai_addr, address->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last_errno = errno;
        continue;
      }
      candidate->wait_for(POLLOUT, deadline, "connect");
      int error = 0;
      socklen_t length = sizeof(error);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
      if (error != 0) {
        last_errno = error;
        continue;
      }
    }
    stream = std::move(candidate);
  }
  if (stream == nullptr) throw ConnectionError(where + "connect: " + std::strerror(last_errno));
  const int on = 1;
  setsockopt(stream->fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));

  stream->context_ = context;
  stream->ssl_ = SSL_new(context.get());
  BIO* bio = BIO_new(socket_bio_method());
  if (stream->ssl_ == nullptr || bio == nullptr) {
    BIO_free(bio);
    throw std::bad_alloc();
  }
  BIO_set_data(bio, stream->bio_state_.get());
  SSL_set_bio(stream->ssl_, bio, bio);
  const std::string& name = options.tls.server_name.empty() ? options.host : options.tls.server_name;
  const bool ip = is_ip_address(name);
  if (!ip) SSL_set_tlsext_host_name(stream->ssl_, name.c_str());
  if (!options.tls.insecure_skip_verify) {
    const int named = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(stream->ssl_), name.c_str())
                         : SSL_set1_host(stream->ssl_, name.c_str());
    if (named != 1) throw InvalidArgumentError("TLS: cannot verify the server name '" + name + "'");
  }
  for (;;) {
    ERR_clear_error();
    const int result = SSL_connect(stream->ssl_);
    if (result == 1) break;
    const int error = SSL_get_error(stream->ssl_, result);
    if (error == SSL_ERROR_WANT_READ) {
      stream->wait_for(POLLIN, deadline, kHandshake);
    } else if (error == SSL_ERROR_WANT_WRITE) {
      stream->wait_for(POLLOUT, deadline, kHandshake);
    } else {
      stream->throw_handshake_error(error, name);
    }
  }
  TURNSTILE_CHECK(stream->ssl_ != nullptr && stream->fd_ >= 0);
  return stream;
}

void TlsStream::set_timeout(int timeout_ms, std::string_view name) {
  TURNSTILE_CHECK(timeout_ms > 0 && !name.empty());
  timeout_ms_ = timeout_ms;
  timeout_name_ = name;
}

Clock::time_point TlsStream::deadline() const { return Clock::now() + std::chrono::milliseconds(timeout_ms_); }

void TlsStream::write_all(std::string_view data, std::string_view doing) {
  TURNSTILE_CHECK_MSG(ssl_ != nullptr, "connect() leaves no stream without a session");
  const Clock::time_point until = deadline();
  while (!data.empty()) {
    ERR_clear_error();
    const int size = static_cast<int>(std::min<std::size_t>(data.size(), INT32_MAX));
    const int written = SSL_write(ssl_, data.data(), size);
    if (written > 0) {
      TURNSTILE_CHECK(written <= size);
      data.remove_prefix(static_cast<std::size_t>(written));
      continue;
    }
    const int error = SSL_get_error(ssl_, written);
    if (error == SSL_ERROR_WANT_WRITE) {
      wait_for(POLLOUT, until, doing);
    } else if (error == SSL_ERROR_WANT_READ) {
      wait_for(POLLIN, until, doing);
    } else {
      throw_ssl_error(error, doing);
    }
  }
}

std::size_t TlsStream::read_some(char* buffer, std::size_t capacity, bool wait, std::string_view doing) {
  TURNSTILE_CHECK_MSG(ssl_ != nullptr && capacity > 0, "0 would read as \"nothing to read\"");
  const Clock::time_point until = deadline();
  for (;;) {
    ERR_clear_error();
    const int count = SSL_read(ssl_, buffer, static_cast<int>(std::min<std::size_t>(capacity, INT32_MAX)));
    if (count > 0) {
      TURNSTILE_CHECK(static_cast<std::size_t>(count) <= capacity);
      received_data_ = true;
      return static_cast<std::size_t>(count);
    }
    const int error = SSL_get_error(ssl_, count);
    if (error == SSL_ERROR_WANT_READ) {
      if (!wait) return 0;
      wait_for(POLLIN, until, doing);
    } else if (error == SSL_ERROR_WANT_WRITE) {
      wait_for(POLLOUT, until, doing);
    } else {
      throw_ssl_error(error, doing);
    }
  }
}

bool TlsStream::has_pending() const {
  TURNSTILE_CHECK(ssl_ != nullptr);
  return SSL_has_pending(ssl_) == 1;
}

void TlsStream::wait_for(short events, Clock::time_point deadline, std::string_view doing) {
  TURNSTILE_CHECK(events == POLLIN || events == POLLOUT);
  for (;;) {
    pollfd fds[1] = {{fd_, events, 0}};
    const int ready = poll(fds, 1, remaining_ms(deadline));
    if (ready > 0) return;  // ready, or an error the next call reports
    if (ready == 0 || Clock::now() >= deadline) {
      // A plaintext Redis reads a ClientHello as the start of an inline
      // command and waits for its end: silence, not a refusal.
      const bool silent_handshake = doing == kHandshake && !bio_state_->received_any;
      throw TimeoutError("redis " + endpoint_ + ": " + std::string(doing) + " timed out after " +
                         std::to_string(timeout_ms_) + " ms (" + std::string(timeout_name_) + ")" +
                         (silent_handshake ? "; the server sent nothing back (is the port serving TLS?)" : ""));
    }
    if (errno != EINTR) throw ConnectionError("redis " + endpoint_ + ": poll: " + std::strerror(errno));
  }
}

void TlsStream::throw_ssl_error(int ssl_error, std::string_view doing) {
  TURNSTILE_CHECK(ssl_ != nullptr);
  const std::string where = "redis " + endpoint_ + ": " + std::string(doing);
  // In TLS 1.3 the client's handshake ends before the server has checked
  // the client's certificate: a refusal comes as an alert (or, when the
  // server closes with our first command unread, a reset that loses the
  // alert) on the first read or write after it.
  const bool first_exchange = !received_data_ && SSL_version(ssl_) == TLS1_3_VERSION;
  const std::string hint = first_exchange ? std::string(kClientCertificateHint) : std::string();
  if (ssl_error == SSL_ERROR_ZERO_RETURN || bio_state_->end_of_stream) {
    throw ConnectionError(where + ": server closed the connection" + hint);
  }
  if (ssl_error == SSL_ERROR_SYSCALL && ERR_peek_last_error() == 0) {
    const int error = bio_state_->last_errno;
    throw ConnectionError(where + ": " + (error == 0 ? std::string("connection lost") : std::strerror(error)) + hint);
  }
  throw ConnectionError(where + ": TLS: " + with_alert_hint(openssl_reason("error " + std::to_string(ssl_error))));
}

void TlsStream::throw_handshake_error(int ssl_error, const std::string& verified_name) {
  const std::string where = "redis " + endpoint_ + ": TLS handshake failed: ";
  const long verified = SSL_get_verify_result(ssl_);
  if (verified != X509_V_OK) {
    std::string message = where + "certificate verify failed (" + X509_verify_cert_error_string(verified) + ")";
    if (verified == X509_V_ERR_HOSTNAME_MISMATCH || verified == X509_V_ERR_IP_ADDRESS_MISMATCH) {
      message += ": the host name '" + verified_name + "' did not match the server's certificate";
    }
    throw TlsVerificationError(message);
  }
  if (bio_state_->end_of_stream) {
    throw ConnectionError(where + "server closed the connection (is the port serving TLS?)");
  }
  if (ssl_error == SSL_ERROR_SYSCALL && ERR_peek_last_error() == 0) {
    const int error = bio_state_->last_errno;
    throw ConnectionError(where + (error == 0 ? std::string("connection lost") : std::strerror(error)));
  }
  std::string reason = with_alert_hint(openssl_reason("error " + std::to_string(ssl_error)));
  if (reason == "wrong version number" || reason == "packet length too long" || reason == "record layer failure") {
    reason += " (is the port serving TLS?)";
  }
  throw ConnectionError(where + reason);
}

}  // namespace turnstile::redis
