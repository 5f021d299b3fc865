// support/tcp_proxy.h
//
// A fault-injecting TCP proxy for tests: listens on a free loopback port and
// forwards every connection to a target loopback port, both ways, on one
// thread (poll, no busy waiting). Faults are switched at any time from the
// test's thread:
//
//   pass()          forward as it comes (the start state)
//   freeze()        stop forwarding both ways and keep every socket open:
//                   requests hang as on a dead link (new connections are
//                   accepted and frozen too)
//   delay(ms)       hold every chunk `ms` before forwarding it, each way
//   reset()         close every current connection with RST (SO_LINGER 0)
//   refuse(on)      new connections are reset at once while `on`
//
// Contracts: loopback addresses only (it binds and connects 127.0.0.1);
// every buffer is bounded (a direction holding kMaxBufferedBytes stops
// reading until it drains); at most kMaxConnections at once (more are
// reset). The destructor stops the thread and closes every socket. Control
// calls are thread-safe and take effect before they return.

#ifndef TURNSTILE_TESTS_SUPPORT_TCP_PROXY_H_
#define TURNSTILE_TESTS_SUPPORT_TCP_PROXY_H_

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace turnstile::testing {

class TcpProxy {
 public:
  static constexpr std::size_t kMaxBufferedBytes = 256 * 1024;  // per direction
  static constexpr std::size_t kMaxConnections = 128;

  // Listens on a free loopback port; forwards to 127.0.0.1:`target_port`.
  // Throws std::runtime_error if it cannot listen.
  explicit TcpProxy(int target_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  // The port clients connect to.
  int port() const;
  // redis://127.0.0.1:<port()>
  std::string url() const;

  void pass();
  void freeze();
  void delay(std::chrono::milliseconds each_way);
  void reset();
  void refuse(bool on);

  // Connections accepted so far (including refused ones).
  std::size_t accepted() const;
  // The local ports of the proxy's current connections to the target (how
  // the target names them, e.g. in CLIENT LIST's addr field).
  std::vector<int> upstream_local_ports() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_SUPPORT_TCP_PROXY_H_
