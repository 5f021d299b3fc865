// interop/interop_fixture.h
//
// One real redis-server per test program; per test, a turnstile Client
// and a played Redisson client (redisson_client.h) on it, and helpers to
// wait for conditions (generous deadlines, never a fixed sleep as a
// condition) and to run participants on threads whose exceptions become
// test failures.

#ifndef TURNSTILE_TESTS_INTEROP_INTEROP_FIXTURE_H_
#define TURNSTILE_TESTS_INTEROP_INTEROP_FIXTURE_H_

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "redis_server.h"
#include "redisson_client.h"
#include "turnstile/client.h"
#include "turnstile/redis_backend.h"

namespace turnstile::testing {

class InteropTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = std::make_unique<RedisServer>(); }
  static void TearDownTestSuite() { server_.reset(); }

  void SetUp() override {
    client_ = make_client();
    redisson_ = std::make_unique<RedissonClient>(server_->url());
    inspector_ = make_redis_backend(RedisOptions::from_url(server_->url()));
  }

  void TearDown() override {
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
    std::lock_guard guard(failures_mutex_);
    for (const std::string& failure : failures_) ADD_FAILURE() << failure;
  }

  Client& client() { return *client_; }
  // A turnstile client of the test's own on the server (the fixture's has
  // the default options); its background errors become failures.
  std::unique_ptr<Client> make_client(ClientOptions options = {}) {
    options.on_background_error = [this](std::exception_ptr error) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        fail(std::string("background error: ") + e.what());
      }
    };
    return std::make_unique<Client>(
        std::shared_ptr<Backend>(make_redis_backend(RedisOptions::from_url(server_->url()))), options);
  }
  RedissonClient& redisson() { return *redisson_; }
  Reply raw(const std::vector<std::string>& argv) { return inspector_->command(argv); }

  // A failure seen on another thread, reported at the end of the test.
  void fail(const std::string& what) {
    std::lock_guard guard(failures_mutex_);
    failures_.push_back(what);
  }

  // Runs `body` on a thread of its own; an exception becomes a failure.
  void spawn(const std::string& who, std::function<void()> body) {
    threads_.emplace_back([this, who, body = std::move(body)] {
      try {
        body();
      } catch (const std::exception& e) {
        fail(who + ": " + e.what());
      } catch (...) {
        fail(who + ": unknown exception");
      }
    });
  }
  void join_all() {
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
  }

  // Polls `condition` every 5 ms for kPatience at most.
  static bool eventually(const std::function<bool()>& condition) {
    const auto deadline = std::chrono::steady_clock::now() + kPatience;
    while (!condition()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

  // Subscribers of `channel` (a waiter of either library subscribes
  // before it sleeps).
  std::int64_t subscribers(const std::string& channel) {
    return raw({"PUBSUB", "NUMSUB", channel}).as_array()[1].as_integer();
  }

  std::vector<std::string> queue(const std::string& name) {
    std::vector<std::string> owners;
    const Reply reply = raw({"LRANGE", "redisson_lock_queue:{" + name + "}", "0", "-1"});
    if (!reply.is_array()) throw std::runtime_error("LRANGE answered " + reply.to_string());
    for (const Reply& owner : reply.as_array()) {
      if (!owner.is_bulk()) throw std::runtime_error("LRANGE answered " + reply.to_string());
      owners.push_back(owner.as_string());
    }
    return owners;
  }

 private:
  static inline std::unique_ptr<RedisServer> server_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<RedissonClient> redisson_;
  std::unique_ptr<Backend> inspector_;
  std::vector<std::thread> threads_;
  std::mutex failures_mutex_;
  std::vector<std::string> failures_;
};

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_INTEROP_INTEROP_FIXTURE_H_
