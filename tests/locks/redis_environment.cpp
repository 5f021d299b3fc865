// Lock test bodies against a real redis-server (one per test, on a free
// loopback port) with the real runtime and the hiredis backend.

#include <thread>

#include "lock_environment.h"
#include "redis_server.h"
#include "turnstile/redis_backend.h"

namespace turnstile::testing {
namespace {

class RedisEnvironment final : public LockEnvironment {
 public:
  RedisEnvironment()
      : backend_(make_redis_backend(RedisOptions::from_url(server_.url()))), runtime_(make_real_runtime()) {}

  ~RedisEnvironment() override {
    run();
    clients_.clear();
  }

  Client& add_client(ClientOptions options) override {
    clients_.push_back(std::make_unique<Client>(backend_, runtime_, std::move(options)));
    return *clients_.back();
  }

  void spawn(Client&, std::function<void()> task) override { threads_.emplace_back(std::move(task)); }

  void run() override {
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
  }

  void crash(Client&) override { ADD_FAILURE() << "crash needs the simulation"; }
  Backend& inspector() override { return *backend_; }
  bool virtual_time() const override { return false; }
  std::string name() const override { return "redis"; }

 private:
  RedisServer server_;
  std::shared_ptr<Backend> backend_;
  std::shared_ptr<Runtime> runtime_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::vector<std::thread> threads_;
};

}  // namespace

std::vector<EnvironmentParam> lock_environments() {
  return {{"redis", [] { return std::make_unique<RedisEnvironment>(); }}};
}

}  // namespace turnstile::testing
