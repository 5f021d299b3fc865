// Lock test bodies against a real redis-server (one per test, on a free
// loopback port) with the real runtime and the hiredis backend.

#include "real_environment.h"
#include "redis_server.h"
#include "turnstile/redis_backend.h"

namespace turnstile::testing {
namespace {

// The server is a base, so that it starts before the backend points at it
// and stops after every client is gone.
struct ServerHolder {
  RedisServer server;
};

class RedisEnvironment final : private ServerHolder, public RealEnvironment {
 public:
  RedisEnvironment() : RealEnvironment(make_redis_backend(RedisOptions::from_url(server.url())), "redis") {}
};

}  // namespace

std::vector<EnvironmentParam> lock_environments() {
  return {{"redis", [] { return std::make_unique<RedisEnvironment>(); }}};
}

}  // namespace turnstile::testing
