// A redis-server restarted with data to load answers "LOADING Redis is
// loading the dataset in memory" to every command until it has (the soak
// found `turnstile run` exiting 70, an internal error, on it: seed 826,
// a master restarted with AOF). It is ServerNotReadyError: `run` started
// then says Redis is not ready and exits 69, as for a server that is down,
// and a waiting acquisition rides it out and takes the lock once loaded.
//
// The loading is made to last: the server is started with Redis's own
// test knob `key-load-delay` (microseconds per key loaded) over an RDB of
// kKeys keys, so that it loads for about kKeys milliseconds, answering
// clients every KiB it loads (`loading-process-events-interval-bytes`:
// else a small file is loaded before any client is heard).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "faults/fault_harness.h"
#include "redis_server.h"
#include "turnstile/client.h"
#include "turnstile/redis_backend.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;

constexpr int kKeys = 3000;
constexpr int kExitUnavailable = 69;

// A server with kKeys keys saved, stopped, then started again in a thread
// of its own (start() returns once it answers PING, after loading; the
// thread lives as long as the server, which dies with the thread that
// started it: PR_SET_PDEATHSIG): the constructor returns once the server
// answers LOADING.
class LoadingServer {
 public:
  LoadingServer() : server_({"--key-load-delay", "1000", "--loading-process-events-interval-bytes", "1024"}) {
    std::vector<std::string> mset = {"MSET"};
    for (int i = 0; i < kKeys; ++i) {
      mset.push_back("key:" + std::to_string(i));
      mset.push_back("value");
    }
    server_.command(mset);
    server_.command({"SAVE"});
    server_.kill();
    starting_ = std::thread([this] {
      try {
        server_.start();
      } catch (const std::exception& error) {
        start_error_ = error.what();
      }
      started_ = true;
      started_.notify_all();
      done_.wait(false);
    });
    const auto give_up = std::chrono::steady_clock::now() + kConditionTimeout;
    while (std::chrono::steady_clock::now() < give_up) {
      try {
        if (server_.command({"PING"}).find("LOADING") != std::string::npos) return;
      } catch (const std::exception&) {
        // Not listening yet.
      }
      std::this_thread::sleep_for(milliseconds(5));
    }
    ADD_FAILURE() << "the restarted server never answered LOADING";
  }
  // The server is stopped once its start() returned (its pid is the
  // starting thread's until then), before that thread ends.
  ~LoadingServer() {
    started_.wait(false);
    EXPECT_EQ(start_error_, "");
    server_.stop();
    done_ = true;
    done_.notify_all();
    if (starting_.joinable()) starting_.join();
  }
  LoadingServer(const LoadingServer&) = delete;
  LoadingServer& operator=(const LoadingServer&) = delete;

  RedisServer& server() { return server_; }
  // Whether it is still loading (else the test proved nothing).
  bool loading() {
    try {
      return server_.command({"PING"}).find("LOADING") != std::string::npos;
    } catch (const std::exception&) {
      return false;
    }
  }

 private:
  RedisServer server_;
  std::atomic<bool> started_ = false;
  std::string start_error_;  // written before started_
  std::atomic<bool> done_ = false;
  std::thread starting_;
};

TEST(LoadingServerTest, RunAgainstALoadingServerSaysItIsNotReadyAndExits69) {
  LoadingServer loading;
  const CliResult result = run_cli({"run", "--redis", loading.server().url(), "-n", "loading:run", "--", "true"});
  const bool still_loading = loading.loading();
  EXPECT_EQ(result.status, kExitUnavailable) << result.err;
  EXPECT_NE(result.err.find("is not ready"), std::string::npos) << result.err;
  EXPECT_EQ(result.err.find("internal error"), std::string::npos) << result.err;
  EXPECT_TRUE(still_loading) << "the server finished loading before the run: nothing was tested";
}

TEST(LoadingServerTest, AWaitingAcquisitionRidesOutTheLoadingAndTakesTheLock) {
  LoadingServer loading;
  ClientOptions options;
  Client client(make_redis_backend(RedisOptions::from_url(loading.server().url())), options);
  ReentrantLock lock = client.lock("loading:lock");
  EXPECT_TRUE(lock.try_lock({.wait = kConditionTimeout}));
  EXPECT_FALSE(loading.loading());
  lock.unlock();
}

}  // namespace
}  // namespace turnstile::testing
