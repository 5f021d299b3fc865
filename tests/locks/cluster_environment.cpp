// Lock test bodies against a 3-master Redis Cluster (redis+cluster://), with
// the real runtime. Forming a cluster takes seconds, so one cluster serves
// the whole binary; each environment starts from FLUSHALL on every master.

#include "real_environment.h"
#include "redis_cluster.h"
#include "turnstile/redis_backend.h"

namespace turnstile::testing {
namespace {

std::unique_ptr<LockEnvironment> make_cluster_environment() {
  std::shared_ptr<Backend> backend = make_redis_backend(RedisOptions::from_url(shared_test_cluster().url()));
  backend->command({"FLUSHALL"});
  return std::make_unique<RealEnvironment>(std::move(backend), "cluster");
}

}  // namespace

std::vector<EnvironmentParam> lock_environments() { return {{"cluster", make_cluster_environment}}; }

}  // namespace turnstile::testing
