// locks/real_environment.h
//
// The LockEnvironment of a real deployment: the real runtime, clients as
// threads, every client sharing one backend (a single redis-server, a
// cluster, a sentinel-managed master). Whoever makes it owns the servers.
// A task's exception never escapes its thread: it fails the test, with
// what it was.

#ifndef TURNSTILE_TESTS_LOCKS_REAL_ENVIRONMENT_H_
#define TURNSTILE_TESTS_LOCKS_REAL_ENVIRONMENT_H_

#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "lock_environment.h"

namespace turnstile::testing {

class RealEnvironment : public LockEnvironment {
 public:
  RealEnvironment(std::shared_ptr<Backend> backend, std::string name)
      : backend_(std::move(backend)), runtime_(make_real_runtime()), name_(std::move(name)) {}

  ~RealEnvironment() override {
    run();
    clients_.clear();
  }

  Client& add_client(ClientOptions options) override {
    clients_.push_back(std::make_unique<Client>(backend_, runtime_, std::move(options)));
    return *clients_.back();
  }

  void spawn(Client&, std::function<void()> task) override {
    threads_.emplace_back([task = std::move(task)] {
      try {
        task();
      } catch (const std::exception& error) {
        ADD_FAILURE() << "a client thread threw: " << error.what();
      } catch (...) {
        ADD_FAILURE() << "a client thread threw a non-std exception";
      }
    });
  }

  void run() override {
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
  }

  void crash(Client&) override { ADD_FAILURE() << "crash needs the simulation"; }
  void freeze(Client&) override { ADD_FAILURE() << "freeze needs the simulation"; }
  void thaw(Client&) override { ADD_FAILURE() << "thaw needs the simulation"; }
  Backend& inspector() override { return *backend_; }
  bool virtual_time() const override { return false; }
  std::string name() const override { return name_; }

 private:
  std::shared_ptr<Backend> backend_;
  std::shared_ptr<Runtime> runtime_;
  std::string name_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::vector<std::thread> threads_;
};

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_LOCKS_REAL_ENVIRONMENT_H_
