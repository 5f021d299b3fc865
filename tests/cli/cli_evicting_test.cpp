// End to end: a Redis that may evict lock keys (issue #32). `turnstile run`
// refuses it with 78 before anything is held, runs with a warning under
// --allow-evicting (or the policy file's allow_evicting = true), and runs
// silently on noeviction; `turnstile status` shows the policy, text and
// JSON, and warns. The server of this suite is its own: its policy is
// changed with CONFIG SET (with a limit far above what the tests use, so
// nothing is actually evicted here; tests/faults evicts for real).

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/cli_process.h"
#include "redis_server.h"

namespace turnstile::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kUnsafeServer = 78;
constexpr const char* kLimit = "104857600";  // 100 MB

class CliEvictingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = std::make_unique<RedisServer>(); }
  static void TearDownTestSuite() { server_.reset(); }
  void TearDown() override { set_policy("noeviction"); }

  static void set_policy(const std::string& policy) {
    server_->command({"CONFIG", "SET", "maxmemory-policy", policy});
    server_->command({"CONFIG", "SET", "maxmemory", kLimit});
  }
  static std::string url() { return server_->url(); }
  static bool exists(const std::string& key) { return server_->command({"EXISTS", key}) == "(integer) 1"; }

  // `turnstile run --redis URL options... NAME -- sh -c 'echo ran; exists?'`:
  // the command prints whether the lock key existed while it ran.
  static std::vector<std::string> run_args(const std::string& name, std::vector<std::string> options = {}) {
    std::vector<std::string> args = {"run", "--redis", url()};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), {name, "--", "sh", "-c", "echo ran"});
    return args;
  }

  ScratchDirectory scratch_;
  static inline std::unique_ptr<RedisServer> server_;
};

const std::vector<std::string> kEvictingPolicies = {"allkeys-lru", "volatile-lru", "volatile-ttl"};

TEST_F(CliEvictingTest, RunRefusesAnEvictingServerBeforeHoldingAnything) {
  for (const std::string& policy : kEvictingPolicies) {
    set_policy(policy);
    const std::string name = "evict:refused:" + policy;
    const CliResult result = run_cli(run_args(name));
    EXPECT_EQ(result.status, kUnsafeServer) << policy << ": " << result.err;
    EXPECT_EQ(result.out, "") << policy << ": the command must not run";
    EXPECT_THAT(result.err, HasSubstr("maxmemory-policy " + policy));
    EXPECT_THAT(result.err, HasSubstr("maxmemory-policy noeviction"));
    EXPECT_THAT(result.err, HasSubstr("--allow-evicting"));
    // Nothing was taken: no lock key, no fencing counter drawn.
    EXPECT_FALSE(exists(name)) << policy;
    EXPECT_FALSE(exists("redisson_lock_token:{" + name + "}")) << policy;
  }
}

TEST_F(CliEvictingTest, AllowEvictingRunsWithAWarning) {
  for (const std::string& policy : kEvictingPolicies) {
    set_policy(policy);
    const CliResult result = run_cli(run_args("evict:allowed:" + policy, {"--allow-evicting"}));
    EXPECT_EQ(result.status, 0) << policy << ": " << result.err;
    EXPECT_EQ(result.out, "ran\n") << policy;
    EXPECT_THAT(result.err, HasSubstr("warning: Redis may evict lock keys: maxmemory-policy " + policy));
    EXPECT_THAT(result.err, HasSubstr("holding anyway"));
    // Told once: the client's own report is not printed again.
    EXPECT_EQ(result.err.find("may evict"), result.err.rfind("may evict")) << result.err;
  }
}

TEST_F(CliEvictingTest, ThePolicyFileCanAllowEvictingForItsRule) {
  set_policy("allkeys-lru");
  const std::string config = scratch_.file("locks.toml");
  std::ofstream(config) << "[[rule]]\nmatch = \"evict:cache:*\"\nallow_evicting = true\n";
  const CliResult allowed = run_cli(run_args("evict:cache:job", {"--config", config}));
  EXPECT_EQ(allowed.status, 0) << allowed.err;
  EXPECT_EQ(allowed.out, "ran\n");
  EXPECT_THAT(allowed.err, HasSubstr("warning: Redis may evict lock keys"));
  const CliResult other = run_cli(run_args("evict:other:job", {"--config", config}));
  EXPECT_EQ(other.status, kUnsafeServer) << other.err;
}

TEST_F(CliEvictingTest, NoevictionRunsSilently) {
  set_policy("noeviction");
  const CliResult result = run_cli(run_args("evict:safe"));
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_EQ(result.out, "ran\n");
  EXPECT_EQ(result.err, "");
}

TEST_F(CliEvictingTest, StatusShowsThePolicyAndWarns) {
  for (const std::string& policy : kEvictingPolicies) {
    set_policy(policy);
    const CliResult text = run_cli({"status", "--redis", url(), "evict:status"});
    ASSERT_EQ(text.status, 0) << text.err;
    EXPECT_THAT(text.out, HasSubstr("memory:      " + policy + " (maxmemory " + kLimit + ") on 127.0.0.1:"));
    EXPECT_THAT(text.out, HasSubstr("(evicts-locks)"));
    EXPECT_THAT(text.out, HasSubstr("warning:     Redis may evict lock keys"));
    EXPECT_THAT(text.err, HasSubstr("warning: Redis may evict lock keys"));
    const CliResult json = run_cli({"status", "--json", "--redis", url(), "evict:status"});
    ASSERT_EQ(json.status, 0) << json.err;
    const nlohmann::json status = nlohmann::json::parse(json.out);
    EXPECT_EQ(status["server"]["risk"], "evicts-locks") << policy;
    ASSERT_EQ(status["server"]["masters"].size(), 1u);
    EXPECT_EQ(status["server"]["masters"][0]["maxmemory_policy"], policy);
    EXPECT_EQ(status["server"]["masters"][0]["maxmemory"], std::stoll(kLimit));
    EXPECT_THAT(status["warning"].get<std::string>(), HasSubstr(policy));
  }
  set_policy("noeviction");
  const CliResult safe = run_cli({"status", "--json", "--redis", url(), "evict:status"});
  ASSERT_EQ(safe.status, 0) << safe.err;
  const nlohmann::json status = nlohmann::json::parse(safe.out);
  EXPECT_EQ(status["server"]["risk"], "safe");
  EXPECT_EQ(status["server"]["masters"][0]["maxmemory_policy"], "noeviction");
  EXPECT_FALSE(status.contains("warning"));
  EXPECT_EQ(safe.err, "");
}

}  // namespace
}  // namespace turnstile::testing
