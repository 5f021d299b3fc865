#include "tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <list>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace turnstile::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kReadChunkBytes = 16 * 1024;
constexpr int kListenBacklog = 64;

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("tcp proxy: " + what + ": " + std::strerror(errno));
}

sockaddr_in loopback(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Closes `fd` so that the peer sees a reset (RST), not an orderly FIN.
void close_with_reset(int fd) {
  if (fd < 0) return;
  const linger abort_on_close{.l_onoff = 1, .l_linger = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
  ::close(fd);
}

int local_port_of(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof address;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return 0;
  return ntohs(address.sin_port);
}

struct Chunk {
  Clock::time_point due;
  std::string bytes;
  std::size_t sent = 0;
};

// Bytes read from one socket, waiting to be written to the other.
struct Direction {
  std::deque<Chunk> chunks;
  std::size_t buffered_bytes = 0;
};

struct Connection {
  int client_fd = -1;
  int upstream_fd = -1;
  int upstream_port = 0;
  Direction to_upstream;
  Direction to_client;
  bool broken = false;  // an end closed or failed: closed after this round
};

enum class Mode { pass, freeze };

}  // namespace

class TcpProxy::Impl {
 public:
  explicit Impl(int target_port) : target_port_(target_port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) fail("socket");
    const int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in address = loopback(0);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) fail("bind");
    if (::listen(listen_fd_, kListenBacklog) != 0) fail("listen");
    set_nonblocking(listen_fd_);
    port_ = local_port_of(listen_fd_);
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) fail("eventfd");
    thread_ = std::thread([this] { loop(); });
  }

  ~Impl() {
    {
      std::lock_guard guard(mutex_);
      stopping_ = true;
    }
    wake();
    thread_.join();
    for (Connection& connection : connections_) close_connection(connection, false);
    ::close(listen_fd_);
    ::close(wake_fd_);
  }

  int port() const { return port_; }

  // Applies `change` to the controls and waits until the thread has acted
  // on it (one full round of its loop).
  template <typename Change>
  void control(Change change) {
    std::unique_lock lock(mutex_);
    change();
    const std::uint64_t wanted = ++requested_generation_;
    wake();
    applied_.wait(lock, [&] { return applied_generation_ >= wanted || stopping_; });
  }

  void set_mode(Mode mode, std::chrono::milliseconds delay) {
    control([&] {
      mode_ = mode;
      delay_ = delay;
    });
  }
  void reset() {
    control([&] { ++reset_requests_; });
  }
  void refuse(bool on) {
    control([&] { refusing_ = on; });
  }

  std::size_t accepted() const { return accepted_.load(); }

  std::vector<int> upstream_local_ports() {
    std::lock_guard guard(mutex_);
    std::vector<int> ports;
    for (const Connection& connection : connections_) ports.push_back(connection.upstream_port);
    return ports;
  }

 private:
  void wake() {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = ::write(wake_fd_, &one, sizeof one);
  }

  void close_connection(Connection& connection, bool with_reset) {
    if (with_reset) {
      close_with_reset(connection.client_fd);
      close_with_reset(connection.upstream_fd);
    } else {
      ::close(connection.client_fd);
      ::close(connection.upstream_fd);
    }
    connection.client_fd = connection.upstream_fd = -1;
  }

  void accept_all() {
    for (;;) {
      const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) return;  // EAGAIN: none left (or a transient error)
      ++accepted_;
      if (refusing_ || connections_.size() >= kMaxConnections) {
        close_with_reset(client);
        continue;
      }
      const int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in target = loopback(target_port_);
      if (upstream < 0 || ::connect(upstream, reinterpret_cast<sockaddr*>(&target), sizeof target) != 0) {
        if (upstream >= 0) ::close(upstream);
        close_with_reset(client);  // the target is down: so is the proxied link
        continue;
      }
      const int one = 1;
      ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      ::setsockopt(upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      set_nonblocking(client);
      set_nonblocking(upstream);
      connections_.push_back(Connection{.client_fd = client,
                                        .upstream_fd = upstream,
                                        .upstream_port = local_port_of(upstream),
                                        .to_upstream = {},
                                        .to_client = {},
                                        .broken = false});
    }
  }

  // Reads what `from` has into `direction` (as far as the bound allows).
  void read_into(int from, Direction& direction, Connection& connection, Clock::time_point now) {
    if (direction.buffered_bytes >= kMaxBufferedBytes) return;
    std::string bytes(std::min(kReadChunkBytes, kMaxBufferedBytes - direction.buffered_bytes), '\0');
    const ssize_t count = ::read(from, bytes.data(), bytes.size());
    if (count == 0 || (count < 0 && errno != EAGAIN && errno != EINTR)) {
      connection.broken = true;
      return;
    }
    if (count < 0) return;
    bytes.resize(static_cast<std::size_t>(count));
    direction.buffered_bytes += bytes.size();
    direction.chunks.push_back(Chunk{.due = now + delay_, .bytes = std::move(bytes), .sent = 0});
  }

  // Writes the chunks of `direction` that are due to `to`.
  void write_due(int to, Direction& direction, Connection& connection, Clock::time_point now) {
    while (!direction.chunks.empty() && direction.chunks.front().due <= now) {
      Chunk& chunk = direction.chunks.front();
      const ssize_t count = ::send(to, chunk.bytes.data() + chunk.sent, chunk.bytes.size() - chunk.sent, MSG_NOSIGNAL);
      if (count < 0) {
        if (errno != EAGAIN && errno != EINTR) connection.broken = true;
        return;
      }
      chunk.sent += static_cast<std::size_t>(count);
      direction.buffered_bytes -= static_cast<std::size_t>(count);
      if (chunk.sent < chunk.bytes.size()) return;
      direction.chunks.pop_front();
    }
  }

  static short events_for(const Direction& incoming, const Direction& outgoing, Clock::time_point now) {
    short events = 0;
    if (incoming.buffered_bytes < kMaxBufferedBytes) events |= POLLIN;
    if (!outgoing.chunks.empty() && outgoing.chunks.front().due <= now) events |= POLLOUT;
    return events;
  }

  void loop() {
    std::unique_lock lock(mutex_);
    std::vector<pollfd> fds;
    std::vector<Connection*> polled;  // the connection of fds[2 + 2k], fds[3 + 2k]
    for (;;) {
      if (stopping_) return;
      if (reset_requests_ != resets_done_) {
        resets_done_ = reset_requests_;
        for (Connection& connection : connections_) close_connection(connection, true);
        connections_.clear();
      }
      applied_generation_ = requested_generation_;
      applied_.notify_all();

      const Clock::time_point now = Clock::now();
      fds.assign({{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}});
      polled.clear();
      int timeout_ms = -1;
      if (mode_ == Mode::pass) {
        for (Connection& connection : connections_) {
          fds.push_back({connection.client_fd, events_for(connection.to_upstream, connection.to_client, now), 0});
          fds.push_back({connection.upstream_fd, events_for(connection.to_client, connection.to_upstream, now), 0});
          polled.push_back(&connection);
          for (const Direction* direction : {&connection.to_upstream, &connection.to_client}) {
            if (direction->chunks.empty() || direction->chunks.front().due <= now) continue;
            const auto wait = std::chrono::ceil<std::chrono::milliseconds>(direction->chunks.front().due - now);
            timeout_ms =
                timeout_ms < 0 ? static_cast<int>(wait.count()) : std::min(timeout_ms, static_cast<int>(wait.count()));
          }
        }
      }
      lock.unlock();
      const int ready = ::poll(fds.data(), fds.size(), timeout_ms);
      lock.lock();
      if (ready < 0) continue;  // EINTR
      if (fds[0].revents & POLLIN) {
        std::uint64_t count = 0;
        [[maybe_unused]] const ssize_t got = ::read(wake_fd_, &count, sizeof count);
      }
      if (fds[1].revents & POLLIN) accept_all();
      // Connections polled are still there: only this thread removes them.
      const Clock::time_point after = Clock::now();
      for (std::size_t k = 0; k < polled.size() && mode_ == Mode::pass; ++k) {
        Connection& connection = *polled[k];
        const short client_events = fds[2 + 2 * k].revents;
        const short upstream_events = fds[3 + 2 * k].revents;
        if ((client_events | upstream_events) & (POLLERR | POLLNVAL)) connection.broken = true;
        if (client_events & (POLLIN | POLLHUP))
          read_into(connection.client_fd, connection.to_upstream, connection, after);
        if (upstream_events & (POLLIN | POLLHUP))
          read_into(connection.upstream_fd, connection.to_client, connection, after);
        write_due(connection.upstream_fd, connection.to_upstream, connection, after);
        write_due(connection.client_fd, connection.to_client, connection, after);
      }
      for (auto it = connections_.begin(); it != connections_.end();) {
        if (it->broken) {
          close_connection(*it, false);
          it = connections_.erase(it);
        } else {
          ++it;
        }
      }
    }
  }

  const int target_port_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  std::atomic<std::size_t> accepted_{0};

  std::mutex mutex_;
  std::condition_variable applied_;
  bool stopping_ = false;
  Mode mode_ = Mode::pass;
  std::chrono::milliseconds delay_{0};
  bool refusing_ = false;
  std::uint64_t reset_requests_ = 0;
  std::uint64_t resets_done_ = 0;
  std::uint64_t requested_generation_ = 0;
  std::uint64_t applied_generation_ = 0;
  std::list<Connection> connections_;  // stable addresses while polled
  std::thread thread_;                 // last: starts once the rest exists
};

TcpProxy::TcpProxy(int target_port) : impl_(std::make_unique<Impl>(target_port)) {}
TcpProxy::~TcpProxy() = default;

int TcpProxy::port() const { return impl_->port(); }
std::string TcpProxy::url() const { return "redis://127.0.0.1:" + std::to_string(port()); }

void TcpProxy::pass() { impl_->set_mode(Mode::pass, std::chrono::milliseconds::zero()); }
void TcpProxy::freeze() { impl_->set_mode(Mode::freeze, std::chrono::milliseconds::zero()); }
void TcpProxy::delay(std::chrono::milliseconds each_way) { impl_->set_mode(Mode::pass, each_way); }
void TcpProxy::reset() { impl_->reset(); }
void TcpProxy::refuse(bool on) { impl_->refuse(on); }
std::size_t TcpProxy::accepted() const { return impl_->accepted(); }
std::vector<int> TcpProxy::upstream_local_ports() const { return impl_->upstream_local_ports(); }

}  // namespace turnstile::testing
