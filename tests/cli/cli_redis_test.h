// cli/cli_redis_test.h
//
// The fixture of the end-to-end suites: one real redis-server per test
// suite (tests use distinct names, so they need no server of their own
// unless they stop it), and a scratch directory per test.

#ifndef TURNSTILE_TESTS_CLI_CLI_REDIS_TEST_H_
#define TURNSTILE_TESTS_CLI_CLI_REDIS_TEST_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "cli/cli_process.h"
#include "redis_server.h"

namespace turnstile::testing {

class CliRedisTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = std::make_unique<RedisServer>(); }
  static void TearDownTestSuite() { server_.reset(); }

  static RedisServer& server() { return *server_; }
  static std::string url() { return server_->url(); }
  static bool exists(const std::string& key) { return server_->command({"EXISTS", key}) == "(integer) 1"; }
  // PTTL of `key`: ms left, -1 without an expiry, -2 absent.
  static std::int64_t pttl_ms(const std::string& key) {
    const std::string reply = server_->command({"PTTL", key});  // "(integer) N"
    return std::stoll(reply.substr(reply.find(' ') + 1));
  }

  ScratchDirectory scratch_;

 private:
  static inline std::unique_ptr<RedisServer> server_;
};

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_CLI_CLI_REDIS_TEST_H_
