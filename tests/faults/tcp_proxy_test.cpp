// The fault-injecting proxy itself, against a real redis-server through the
// library's own backend: each control does what tcp_proxy.h says.

#include <gtest/gtest.h>

#include "redis_server.h"
#include "tcp_proxy.h"
#include "turnstile/errors.h"
#include "turnstile/redis_backend.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;

constexpr int kShortCommandTimeoutMs = 300;

std::shared_ptr<Backend> backend_through(const TcpProxy& proxy) {
  RedisOptions options = RedisOptions::from_url(proxy.url());
  options.command_timeout_ms = kShortCommandTimeoutMs;
  options.connect_timeout_ms = kShortCommandTimeoutMs;
  return make_redis_backend(options);
}

TEST(TcpProxyTest, ForwardsFreezesResetsRefusesAndDelays) {
  RedisServer server;
  TcpProxy proxy(server.port());
  const std::shared_ptr<Backend> backend = backend_through(proxy);
  EXPECT_EQ(backend->command({"SET", "k", "v"}), Reply::status("OK"));
  EXPECT_EQ(server.command({"GET", "k"}), "\"v\"");
  EXPECT_EQ(proxy.upstream_local_ports().size(), 1u);

  proxy.freeze();  // the request hangs until the client's own timeout
  EXPECT_THROW(backend->command({"GET", "k"}), ConnectionError);
  proxy.pass();
  EXPECT_EQ(backend_through(proxy)->command({"GET", "k"}), Reply::bulk("v"));

  const std::shared_ptr<Backend> reset_one = backend_through(proxy);
  EXPECT_EQ(reset_one->command({"PING"}), Reply::status("PONG"));
  proxy.reset();
  EXPECT_TRUE(proxy.upstream_local_ports().empty());
  EXPECT_THROW(reset_one->command({"PING"}), ConnectionError);

  proxy.refuse(true);
  EXPECT_THROW(backend_through(proxy)->command({"PING"}), ConnectionError);
  proxy.refuse(false);

  // Held at least the delay each way: a lower bound, never a race.
  constexpr milliseconds kDelay{100};
  const std::shared_ptr<Backend> delayed = backend_through(proxy);
  EXPECT_EQ(delayed->command({"PING"}), Reply::status("PONG"));
  proxy.delay(kDelay);
  const auto before = std::chrono::steady_clock::now();
  EXPECT_EQ(delayed->command({"PING"}), Reply::status("PONG"));
  EXPECT_GE(std::chrono::steady_clock::now() - before, 2 * kDelay);
}

}  // namespace
}  // namespace turnstile::testing
