// End to end: `turnstile run` and `status` over rediss:// against a real
// redis-server that requires client certificates (mutual TLS), with the
// --tls-* flags and with the TURNSTILE_TLS_* variables; an untrusted server
// is status 69 naming the verification failure; a TLS option with a
// plaintext URL is a usage error.

#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/cli_process.h"
#include "redis_server.h"
#include "tls_certs.h"

namespace turnstile::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kUsage = 64;
constexpr int kUnavailable = 69;

class CliTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certificates_ = std::make_unique<TlsCertificates>();
    tls_port_ = free_loopback_port();
    server_ = std::make_unique<RedisServer>(certificates_->server_args(tls_port_, true));
  }
  static void TearDownTestSuite() {
    server_.reset();
    certificates_.reset();
  }

  static std::string tls_url() { return "rediss://127.0.0.1:" + std::to_string(tls_port_); }
  // --redis and the flags a client needs for the server.
  static std::vector<std::string> with_flags(std::vector<std::string> args) {
    for (const std::string& flag :
         {std::string("--redis"), tls_url(), std::string("--tls-ca-file"), certificates_->ca_file(),
          std::string("--tls-cert"), certificates_->client_cert_file(), std::string("--tls-key"),
          certificates_->client_key_file()}) {
      args.push_back(flag);
    }
    return args;
  }

  static inline std::unique_ptr<TlsCertificates> certificates_;
  static inline int tls_port_ = 0;
  static inline std::unique_ptr<RedisServer> server_;
};

TEST_F(CliTlsTest, RunHoldsTheLockOverTlsWithFlags) {
  const std::string probe =
      "redis-cli -p " + std::to_string(server_->port()) + " EXISTS cli:tls >" + certificates_->directory() + "/exists";
  // The command checks, over plaintext, that the lock exists while it runs.
  std::vector<std::string> args = with_flags({"run"});
  for (const std::string& rest :
       {std::string("cli:tls"), std::string("--"), std::string("sh"), std::string("-c"), probe}) {
    args.push_back(rest);
  }
  const CliResult result = run_cli(args);
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_EQ(read_file(certificates_->directory() + "/exists"), "1\n");
  EXPECT_EQ(server_->command({"EXISTS", "cli:tls"}), "(integer) 0");
}

TEST_F(CliTlsTest, StatusTakesTheFilesFromTheEnvironment) {
  const CliResult result = run_cli({"status", "--json", "--redis", tls_url(), "cli:tls-env"},
                                   {{"TURNSTILE_TLS_CA_FILE", certificates_->ca_file()},
                                    {"TURNSTILE_TLS_CERT", certificates_->client_cert_file()},
                                    {"TURNSTILE_TLS_KEY", certificates_->client_key_file()}});
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("\"flavor\": null"));
  EXPECT_THAT(result.out, HasSubstr("\"redis\": \"rediss://127.0.0.1:"));
}

TEST_F(CliTlsTest, AnUntrustedServerIsStatus69NamingTheFailure) {
  const CliResult result =
      run_cli({"status", "--redis", tls_url(), "--tls-ca-file", certificates_->other_ca_file(), "cli:tls-untrusted"});
  EXPECT_EQ(result.status, kUnavailable) << result.err;
  EXPECT_THAT(result.err, HasSubstr("certificate verify failed"));
}

TEST_F(CliTlsTest, TlsOptionsNeedARedissUrl) {
  const CliResult result = run_cli({"status", "--redis", server_->url(), "--tls-insecure", "cli:tls-plain"});
  EXPECT_EQ(result.status, kUsage) << result.err;
  EXPECT_THAT(result.err, HasSubstr("need a rediss:// URL"));
}

}  // namespace
}  // namespace turnstile::testing
