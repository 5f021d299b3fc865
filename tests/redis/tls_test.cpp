// rediss:// against a real redis-server serving TLS (--tls-port beside its
// plaintext port) with certificates made by the test: locks, a waiter woken
// by pub/sub, pipelined send_eval and a MultiLock over TLS; an untrusted CA,
// a wrong host name and a missing client certificate refused with clear
// errors; a server restart survived; the insecure option only when set;
// TLS and plaintext crossed with the wrong port failing instead of hanging;
// unreadable files refused up front.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lua_scripts.h"
#include "redis_server.h"
#include "redis_test_support.h"
#include "tls_certs.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/multi_lock.h"
#include "turnstile/redis_backend.h"

namespace turnstile {
namespace {

using ::testing::HasSubstr;
using testing::message_of;
using testing::RedisServer;
using testing::TlsCertificates;

// Generous: a TLS handshake under ThreadSanitizer on a loaded machine.
constexpr int kTlsTimeoutMs = 5000;
// For the connections expected to fail by timing out.
constexpr int kShortTimeoutMs = 1000;
constexpr auto kWaiterWait = std::chrono::seconds(20);
// send_eval calls in flight at once: below the pool size (options()).
constexpr int kPipelinedCalls = 3;

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certificates_ = new TlsCertificates();
    tls_port_ = testing::free_loopback_port();
    server_ = new RedisServer(certificates_->server_args(tls_port_, false));
    mutual_tls_port_ = testing::free_loopback_port();
    mutual_server_ = new RedisServer(certificates_->server_args(mutual_tls_port_, true));
  }
  static void TearDownTestSuite() {
    delete mutual_server_;
    delete server_;
    delete certificates_;
  }

  // rediss://127.0.0.1:<port> trusting the test CA, plus `query`.
  static RedisOptions options(int port, const std::string& query = "") {
    RedisOptions result = RedisOptions::from_url("rediss://127.0.0.1:" + std::to_string(port) +
                                                 "?tls_ca_file=" + certificates_->ca_file() + query);
    result.connect_timeout_ms = kTlsTimeoutMs;
    result.command_timeout_ms = kTlsTimeoutMs;
    result.pubsub_ping_interval_ms = testing::kTestPingIntervalMs;
    result.pool_size = 4;
    return result;
  }

  static inline TlsCertificates* certificates_ = nullptr;
  static inline int tls_port_ = 0;
  static inline RedisServer* server_ = nullptr;
  static inline int mutual_tls_port_ = 0;
  static inline RedisServer* mutual_server_ = nullptr;
};

TEST_F(TlsTest, LocksAndUnlocksThroughAClient) {
  Client client(make_redis_backend(options(tls_port_)));
  ReentrantLock lock = client.lock("tls-lock");
  lock.lock();
  EXPECT_TRUE(lock.is_held_by_current_thread());
  EXPECT_EQ(server_->command({"EXISTS", "tls-lock"}), "(integer) 1");  // seen in plaintext
  lock.unlock();
  EXPECT_EQ(server_->command({"EXISTS", "tls-lock"}), "(integer) 0");
}

TEST_F(TlsTest, AWaiterIsWokenByPubSubOverTls) {
  Client client(make_redis_backend(options(tls_port_)));
  ReentrantLock holder = client.lock("tls-wait");
  // A lease far beyond the waiter's wait: only the unlock message can let
  // the waiter in in time.
  holder.lock(std::chrono::minutes(5));
  std::atomic<int> outcome{-1};  // 1 acquired, 0 not, 2 threw
  std::thread waiter([&] {
    try {
      ReentrantLock lock = client.lock("tls-wait");
      const bool acquired = lock.try_lock_for(kWaiterWait);
      if (acquired) lock.unlock();
      outcome = acquired ? 1 : 0;
    } catch (...) {
      outcome = 2;
    }
  });
  const bool subscribed = testing::eventually([&] {
    // The waiting process's own wake channel (wake scope fleet; the lock's
    // shared channel is not heeded behind a turnstile holder).
    const std::string numsub = server_->command({"PUBSUB", "NUMSUB", holder.layout().wake_channel(client.id())});
    return numsub.find("(integer) 0") == std::string::npos;
  });
  holder.unlock();
  waiter.join();
  EXPECT_TRUE(subscribed);
  EXPECT_EQ(outcome.load(), 1);
}

TEST_F(TlsTest, PipelinesSendEval) {
  std::unique_ptr<Backend> backend = make_redis_backend(options(tls_port_));
  const std::string owner = "9f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f:1";
  // Each pending call leases a pooled connection until its reply is read:
  // fewer than the pool holds, so none waits for another.
  std::vector<std::unique_ptr<PendingReply>> pending;
  for (int i = 0; i < kPipelinedCalls; ++i) {
    pending.push_back(backend->send_eval(scripts::reentrant_lock_acquire, {"tls-pipelined-" + std::to_string(i)},
                                         {"30000", owner}, EvalSync::none));
  }
  // wait_for() reads what has arrived without blocking past its timeout (the
  // decrypted bytes OpenSSL holds must not be missed by its poll()).
  EXPECT_TRUE(testing::eventually([&] { return pending.front()->wait_for(std::chrono::milliseconds(50)); }));
  for (auto& reply : pending) EXPECT_EQ(reply->get().reply, Reply::nil());
  for (int i = 0; i < kPipelinedCalls; ++i) {
    EXPECT_EQ(server_->command({"HGET", "tls-pipelined-" + std::to_string(i), owner}), "\"1\"");
    server_->command({"DEL", "tls-pipelined-" + std::to_string(i)});
  }
}

TEST_F(TlsTest, MultiLockSendsToItsNodesAtOnce) {
  // A MultiLock's node requests go out through send_eval, all written before
  // any reply is read.
  Client client(make_redis_backend(options(tls_port_)));
  std::vector<std::unique_ptr<Lock>> nodes;
  for (const char* name : {"tls-multi-a", "tls-multi-b", "tls-multi-c"}) {
    nodes.push_back(std::make_unique<ReentrantLock>(client.lock(name)));
  }
  MultiLock lock(std::move(nodes));
  lock.lock(std::chrono::minutes(1));
  for (const char* name : {"tls-multi-a", "tls-multi-b", "tls-multi-c"}) {
    EXPECT_EQ(server_->command({"EXISTS", name}), "(integer) 1") << name;
  }
  lock.unlock();
  for (const char* name : {"tls-multi-a", "tls-multi-b", "tls-multi-c"}) {
    EXPECT_EQ(server_->command({"EXISTS", name}), "(integer) 0") << name;
  }
}

TEST_F(TlsTest, RefusesACertificateFromAnUntrustedCa) {
  RedisOptions untrusted = options(tls_port_);
  untrusted.tls.ca_file = certificates_->other_ca_file();
  std::unique_ptr<Backend> backend = make_redis_backend(untrusted);
  const std::string message = message_of<TlsVerificationError>([&] { backend->command({"PING"}); });
  EXPECT_THAT(message, HasSubstr("redis 127.0.0.1:" + std::to_string(tls_port_) +
                                 ": TLS handshake failed: certificate verify failed ("));
  // The server sends its CA with its certificate; that CA is not trusted.
  EXPECT_THAT(message, HasSubstr("self-signed certificate in certificate chain"));
}

// A certificate that fails verification does not fix itself: a lock
// waiting through an outage (the unreachable limit is ten minutes here)
// throws it at once instead of retrying until its wait runs out.
TEST_F(TlsTest, AWaitingLockThrowsAVerificationFailureAtOnce) {
  RedisOptions untrusted = options(tls_port_);
  untrusted.tls.ca_file = certificates_->other_ca_file();
  Client client(make_redis_backend(untrusted), {.unreachable_limit = std::chrono::minutes(10)});
  ReentrantLock lock = client.lock("tls-untrusted");
  const long long ms = testing::elapsed_ms(
      [&] { EXPECT_THROW((void)lock.try_lock({.wait = std::chrono::minutes(2)}), TlsVerificationError); });
  EXPECT_LT(ms, 60'000) << "retried as if the connection had broken";
}

TEST_F(TlsTest, RefusesACertificateForAnotherHostName) {
  std::unique_ptr<Backend> backend = make_redis_backend(options(tls_port_, "&tls_server_name=redis.example.com"));
  const std::string message = message_of<TlsVerificationError>([&] { backend->command({"PING"}); });
  EXPECT_THAT(message, HasSubstr("certificate verify failed (hostname mismatch)"));
  EXPECT_THAT(message, HasSubstr("the host name 'redis.example.com' did not match"));
  // The certificate's DNS name is accepted in place of the address.
  EXPECT_EQ(make_redis_backend(options(tls_port_, "&tls_server_name=localhost"))->command({"PING"}),
            Reply::status("PONG"));
}

TEST_F(TlsTest, MutualTlsNeedsTheClientCertificate) {
  std::unique_ptr<Backend> without = make_redis_backend(options(mutual_tls_port_));
  const std::string message = message_of<ConnectionError>([&] { without->command({"PING"}); });
  EXPECT_THAT(message, HasSubstr("redis 127.0.0.1:" + std::to_string(mutual_tls_port_)));
  // The server's alert ("certificate required") or, when the server closed
  // before it was read, the reset: either way the hint names the options.
  EXPECT_THAT(message, HasSubstr("does the server require a client certificate, tls_cert_file and tls_key_file"));

  std::unique_ptr<Backend> with =
      make_redis_backend(options(mutual_tls_port_, "&tls_cert_file=" + certificates_->client_cert_file() +
                                                       "&tls_key_file=" + certificates_->client_key_file()));
  EXPECT_EQ(with->command({"PING"}), Reply::status("PONG"));
}

TEST_F(TlsTest, WorksAgainAfterAServerRestart) {
  const int tls_port = testing::free_loopback_port();
  RedisServer server(certificates_->server_args(tls_port, false));
  std::unique_ptr<Backend> backend = make_redis_backend(options(tls_port));
  EXPECT_EQ(backend->command({"SET", "k", "before"}), Reply::status("OK"));
  server.stop();
  EXPECT_THROW(backend->command({"GET", "k"}), ConnectionError);
  server.start();
  EXPECT_TRUE(testing::eventually([&] {
    try {
      return backend->command({"SET", "k", "after"}) == Reply::status("OK");
    } catch (const ConnectionError&) {
      return false;
    }
  }));
  EXPECT_EQ(server.command({"GET", "k"}), "\"after\"");
}

TEST_F(TlsTest, InsecureAcceptsAServerWhoseCaIsNotGiven) {
  const std::string url = "rediss://127.0.0.1:" + std::to_string(tls_port_);
  auto with_timeouts = [](RedisOptions options) {
    options.connect_timeout_ms = kTlsTimeoutMs;
    options.command_timeout_ms = kTlsTimeoutMs;
    return options;
  };
  const RedisOptions insecure = with_timeouts(RedisOptions::from_url(url + "?tls_insecure=on"));
  EXPECT_TRUE(insecure.tls.insecure_skip_verify);
  EXPECT_EQ(make_redis_backend(insecure)->command({"PING"}), Reply::status("PONG"));
  // Verification is the default: the system's CAs do not know the test CA.
  const RedisOptions by_default = with_timeouts(RedisOptions::from_url(url));
  EXPECT_FALSE(by_default.tls.insecure_skip_verify);
  EXPECT_THAT(message_of<ConnectionError>([&] { make_redis_backend(by_default)->command({"PING"}); }),
              HasSubstr("certificate verify failed"));
  const RedisOptions off = with_timeouts(RedisOptions::from_url(url + "?tls_insecure=off"));
  EXPECT_THAT(message_of<ConnectionError>([&] { make_redis_backend(off)->command({"PING"}); }),
              HasSubstr("certificate verify failed"));
}

TEST_F(TlsTest, TlsToThePlaintextPortFailsWithinTheTimeout) {
  RedisOptions crossed = options(server_->port());
  crossed.connect_timeout_ms = kShortTimeoutMs;
  crossed.command_timeout_ms = kShortTimeoutMs;
  const std::string message = message_of<ConnectionError>([&] { make_redis_backend(crossed)->command({"PING"}); });
  EXPECT_THAT(message, HasSubstr("TLS handshake"));
  EXPECT_THAT(message, HasSubstr("is the port serving TLS?"));
}

TEST_F(TlsTest, PlaintextToTheTlsPortFailsWithinTheTimeout) {
  RedisOptions crossed = RedisOptions::from_url("redis://127.0.0.1:" + std::to_string(tls_port_));
  crossed.connect_timeout_ms = kShortTimeoutMs;
  crossed.command_timeout_ms = kShortTimeoutMs;
  const std::string message = message_of<ConnectionError>([&] { make_redis_backend(crossed)->command({"PING"}); });
  EXPECT_THAT(message, HasSubstr("redis 127.0.0.1:" + std::to_string(tls_port_)));
}

TEST_F(TlsTest, UnreadableFilesAreRefusedUpFront) {
  RedisOptions missing = options(tls_port_);
  missing.tls.ca_file = certificates_->directory() + "/missing-ca.crt";
  EXPECT_THAT(message_of<InvalidArgumentError>([&] { make_redis_backend(missing); }),
              HasSubstr("TLS CA file '" + missing.tls.ca_file + "' cannot be read"));
  RedisOptions bad_key = options(tls_port_);
  bad_key.tls.cert_file = certificates_->client_cert_file();
  bad_key.tls.key_file = certificates_->server_key_file();  // another certificate's key
  EXPECT_THAT(message_of<InvalidArgumentError>([&] { make_redis_backend(bad_key); }),
              HasSubstr("TLS key file '" + bad_key.tls.key_file + "'"));
  RedisOptions not_a_certificate = options(tls_port_);
  not_a_certificate.tls.cert_file = certificates_->client_key_file();
  not_a_certificate.tls.key_file = certificates_->client_key_file();
  EXPECT_THAT(message_of<InvalidArgumentError>([&] { make_redis_backend(not_a_certificate); }),
              HasSubstr("TLS certificate file '" + not_a_certificate.tls.cert_file + "'"));
}

}  // namespace
}  // namespace turnstile
