// URL parsing and validation of RedisOptions (no server needed).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "turnstile/errors.h"
#include "turnstile/redis_backend.h"

namespace turnstile {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string error_of(std::string_view url) {
  try {
    RedisOptions::from_url(url);
  } catch (const InvalidArgumentError& error) {
    return error.what();
  }
  ADD_FAILURE() << url << " was accepted";
  return {};
}

TEST(RedisOptionsTest, ParsesAFullTcpUrl) {
  const RedisOptions options = RedisOptions::from_url("redis://app:p%40ss%3Aword@cache.example:6380/3");
  EXPECT_EQ(options.host, "cache.example");
  EXPECT_EQ(options.port, 6380);
  EXPECT_EQ(options.user, "app");
  EXPECT_EQ(options.password, "p@ss:word");
  EXPECT_EQ(options.db, 3);
  EXPECT_TRUE(options.unix_socket_path.empty());
  EXPECT_EQ(options.endpoint(), "cache.example:6380");
  EXPECT_EQ(options.describe(), "redis://app@cache.example:6380/3");
}

TEST(RedisOptionsTest, FillsInDefaults) {
  const RedisOptions options = RedisOptions::from_url("redis://localhost");
  EXPECT_EQ(options.host, "localhost");
  EXPECT_EQ(options.port, kDefaultRedisPort);
  EXPECT_EQ(options.db, 0);
  EXPECT_TRUE(options.user.empty());
  EXPECT_TRUE(options.password.empty());
  EXPECT_EQ(options.command_timeout_ms, kDefaultCommandTimeoutMs);
  EXPECT_EQ(options.connect_timeout_ms, kDefaultConnectTimeoutMs);
  EXPECT_EQ(options.pool_size, kDefaultPoolSize);
  EXPECT_EQ(RedisOptions::from_url("redis://h/").db, 0);
}

TEST(RedisOptionsTest, PasswordWithoutUserIsTheDefaultUser) {
  const RedisOptions options = RedisOptions::from_url("redis://:secret@h:1");
  EXPECT_TRUE(options.user.empty());
  EXPECT_EQ(options.password, "secret");
  EXPECT_EQ(options.describe(), "redis://h:1/0");
}

TEST(RedisOptionsTest, ParsesIpv6Hosts) {
  const RedisOptions options = RedisOptions::from_url("redis://[::1]:7000/1");
  EXPECT_EQ(options.host, "::1");
  EXPECT_EQ(options.port, 7000);
  EXPECT_EQ(options.endpoint(), "[::1]:7000");
  EXPECT_EQ(RedisOptions::from_url("redis://[::1]").port, kDefaultRedisPort);
}

TEST(RedisOptionsTest, ParsesUnixSocketUrls) {
  const RedisOptions plain = RedisOptions::from_url("unix:///run/redis/redis.sock");
  EXPECT_EQ(plain.unix_socket_path, "/run/redis/redis.sock");
  EXPECT_EQ(plain.db, 0);
  EXPECT_EQ(plain.endpoint(), "/run/redis/redis.sock");

  const RedisOptions full = RedisOptions::from_url("unix://app:secret@/tmp/r.sock?db=5");
  EXPECT_EQ(full.unix_socket_path, "/tmp/r.sock");
  EXPECT_EQ(full.user, "app");
  EXPECT_EQ(full.password, "secret");
  EXPECT_EQ(full.db, 5);
  EXPECT_EQ(full.describe(), "unix://app@/tmp/r.sock?db=5");
}

TEST(RedisOptionsTest, RejectsBadUrlsNamingTheProblem) {
  EXPECT_THAT(error_of("rediss+unix:///s.sock"), HasSubstr("unsupported scheme 'rediss+unix'"));
  EXPECT_THAT(error_of("http://h"), HasSubstr("unsupported scheme 'http'"));
  EXPECT_THAT(error_of("localhost:6379"), HasSubstr("missing scheme"));
  EXPECT_THAT(error_of("redis://"), HasSubstr("missing host"));
  EXPECT_THAT(error_of("redis://:6379"), HasSubstr("missing host"));
  EXPECT_THAT(error_of("redis://h:"), HasSubstr("empty port"));
  EXPECT_THAT(error_of("redis://h:0"), HasSubstr("port '0'"));
  EXPECT_THAT(error_of("redis://h:65536"), HasSubstr("port '65536'"));
  EXPECT_THAT(error_of("redis://h:abc"), HasSubstr("port 'abc'"));
  EXPECT_THAT(error_of("redis://h/x"), HasSubstr("database 'x'"));
  EXPECT_THAT(error_of("redis://h/-1"), HasSubstr("database '-1'"));
  EXPECT_THAT(error_of("redis://h/1/2"), HasSubstr("database '1/2'"));
  EXPECT_THAT(error_of("redis://h?db=1"), HasSubstr("unknown query parameter 'db' (redis:// takes the tls_*"));
  EXPECT_THAT(error_of("redis://[::1"), HasSubstr("unterminated '['"));
  EXPECT_THAT(error_of("redis://user@h"), HasSubstr("has no password"));
  EXPECT_THAT(error_of("redis://u:%zz@h"), HasSubstr("%-escape in the password"));
  EXPECT_THAT(error_of("unix://relative.sock"), HasSubstr("absolute socket path"));
  EXPECT_THAT(error_of("unix:///s.sock?timeout=1"), HasSubstr("unknown query parameter 'timeout'"));
  EXPECT_THAT(error_of("unix:///s.sock?db=two"), HasSubstr("database 'two'"));
}

TEST(RedisOptionsTest, ParsesTlsUrls) {
  const RedisOptions plain = RedisOptions::from_url("rediss://cache.example:6380/2");
  EXPECT_TRUE(plain.tls.enabled);
  EXPECT_FALSE(plain.tls.insecure_skip_verify);  // verification is the default
  EXPECT_EQ(plain.port, 6380);
  EXPECT_EQ(plain.db, 2);
  EXPECT_EQ(plain.describe(), "rediss://cache.example:6380/2");
  EXPECT_EQ(RedisOptions::from_url("rediss://h").port, kDefaultRedisPort);
  EXPECT_FALSE(RedisOptions::from_url("redis://h").tls.enabled);

  const RedisOptions full = RedisOptions::from_url(
      "rediss://app:pw@h:6380/1?tls_ca_file=/etc/ca%20file.pem&tls_ca_dir=/etc/certs&tls_cert_file=/c.pem"
      "&tls_key_file=/k.pem&tls_server_name=redis.example&tls_insecure=off");
  EXPECT_EQ(full.tls.ca_file, "/etc/ca file.pem");
  EXPECT_EQ(full.tls.ca_dir, "/etc/certs");
  EXPECT_EQ(full.tls.cert_file, "/c.pem");
  EXPECT_EQ(full.tls.key_file, "/k.pem");
  EXPECT_EQ(full.tls.server_name, "redis.example");
  EXPECT_FALSE(full.tls.insecure_skip_verify);
  EXPECT_THAT(full.describe(), Not(HasSubstr("pw")));
  const RedisOptions again = RedisOptions::parse_url(full.describe());  // no password: not validated
  EXPECT_EQ(again.tls.ca_file, full.tls.ca_file);
  EXPECT_EQ(again.tls.server_name, full.tls.server_name);
  EXPECT_TRUE(RedisOptions::from_url("rediss://h?tls_insecure=on").tls.insecure_skip_verify);

  const RedisOptions cluster = RedisOptions::from_url("rediss+cluster://h1:7000,h2:7001?tls_ca_file=/ca.pem");
  EXPECT_EQ(cluster.mode, RedisMode::cluster);
  EXPECT_TRUE(cluster.tls.enabled);
  EXPECT_EQ(cluster.tls.ca_file, "/ca.pem");
  EXPECT_EQ(cluster.describe(), "rediss+cluster://h1:7000,h2:7001?tls_ca_file=%2Fca.pem");
  const RedisOptions sentinel =
      RedisOptions::from_url("rediss+sentinel://s1,s2:26380/mymaster?db=1&tls_server_name=redis.example");
  EXPECT_EQ(sentinel.mode, RedisMode::sentinel);
  EXPECT_TRUE(sentinel.tls.enabled);
  EXPECT_EQ(sentinel.tls.server_name, "redis.example");
  EXPECT_EQ(sentinel.describe(), "rediss+sentinel://s1:26379,s2:26380/mymaster?db=1&tls_server_name=redis.example");
  EXPECT_EQ(RedisOptions::from_url(sentinel.describe()).tls.server_name, "redis.example");
}

TEST(RedisOptionsTest, RefusesBadTlsOptions) {
  EXPECT_THAT(error_of("redis://h?tls_ca_file=/ca.pem"), HasSubstr("TLS options given without TLS"));
  EXPECT_THAT(error_of("redis+cluster://h?tls_insecure=on"), HasSubstr("TLS options given without TLS"));
  EXPECT_THAT(error_of("rediss://h?tls_insecure=yes"), HasSubstr("tls_insecure must be on or off"));
  EXPECT_THAT(error_of("rediss://h?tls_ca_file="), HasSubstr("tls_ca_file is empty"));
  EXPECT_THAT(error_of("rediss://h?tls_cert_file=/c.pem"), HasSubstr("without its key"));
  EXPECT_THAT(error_of("rediss://h?tls_key_file=/k.pem"), HasSubstr("without its certificate"));
  EXPECT_THAT(error_of("rediss://h?tls_verify=off"), HasSubstr("unknown query parameter 'tls_verify'"));
  EXPECT_THAT(error_of("rediss://u:hunter2@h?tls_ca_file=%zz"), Not(HasSubstr("hunter2")));
  RedisOptions unix_tls = RedisOptions::from_url("unix:///s.sock");
  unix_tls.tls.enabled = true;
  EXPECT_THROW(unix_tls.validate(), InvalidArgumentError);
}

TEST(RedisOptionsTest, NeverEchoesThePassword) {
  // Unencoded '/', '?' and ':' in a password must not leak into the error
  // about the part that follows.
  for (const char* url : {"redis://u:hun/ter2@h:bad", "redis://u:hun?ter2@h/x", "redis://u:hunter2@h:99999",
                          "unix://u:hun?ter2@relative", "redis://:hun%ter2@h"}) {
    EXPECT_THAT(error_of(url), Not(HasSubstr("ter2"))) << url;
  }
  RedisOptions options = RedisOptions::from_url("redis://u:hunter2@h");
  EXPECT_THAT(options.describe(), Not(HasSubstr("hunter2")));
}

TEST(RedisOptionsTest, ValidatesLimits) {
  RedisOptions options;
  EXPECT_NO_THROW(options.validate());
  options.pool_size = 0;
  EXPECT_THROW(make_redis_backend(options), InvalidArgumentError);
  options = RedisOptions();
  options.command_timeout_ms = 0;
  EXPECT_THROW(options.validate(), InvalidArgumentError);
  options = RedisOptions();
  options.connect_timeout_ms = -1;
  EXPECT_THROW(options.validate(), InvalidArgumentError);
  options = RedisOptions();
  options.port = 70000;
  EXPECT_THROW(options.validate(), InvalidArgumentError);
}

TEST(RedisOptionsTest, MakingABackendDoesNotConnect) {
  // Nothing listens on port 1; connections are made by the first call.
  const auto backend = make_redis_backend(RedisOptions::from_url("redis://127.0.0.1:1/0"));
  EXPECT_EQ(backend->describe(), "redis://127.0.0.1:1/0");
}

}  // namespace
}  // namespace turnstile

namespace turnstile {
namespace {

TEST(RedisOptionsTest, ParsesAClusterUrl) {
  const RedisOptions options =
      RedisOptions::from_url("redis+cluster://app:se%40cret@10.0.0.1:7000,10.0.0.2,[::1]:7002?replica_sync=off");
  EXPECT_EQ(options.mode, RedisMode::cluster);
  ASSERT_EQ(options.seeds.size(), 3u);
  EXPECT_EQ(options.seeds[0], (RedisEndpoint{"10.0.0.1", 7000}));
  EXPECT_EQ(options.seeds[1], (RedisEndpoint{"10.0.0.2", kDefaultRedisPort}));
  EXPECT_EQ(options.seeds[2], (RedisEndpoint{"::1", 7002}));
  EXPECT_EQ(options.password, "se@cret");
  EXPECT_FALSE(options.replica_sync);
  EXPECT_EQ(options.describe(), "redis+cluster://app@10.0.0.1:7000,10.0.0.2:6379,[::1]:7002");
}

TEST(RedisOptionsTest, ParsesASentinelUrl) {
  const RedisOptions options = RedisOptions::from_url(
      "redis+sentinel://:masterpw@s1,s2:26380/mymaster?db=2&sentinel_password=s%26pw&replica_sync_timeout_ms=50");
  EXPECT_EQ(options.mode, RedisMode::sentinel);
  ASSERT_EQ(options.seeds.size(), 2u);
  EXPECT_EQ(options.seeds[0], (RedisEndpoint{"s1", kDefaultSentinelPort}));
  EXPECT_EQ(options.seeds[1], (RedisEndpoint{"s2", 26380}));
  EXPECT_EQ(options.sentinel_master_name, "mymaster");
  EXPECT_EQ(options.db, 2);
  EXPECT_EQ(options.password, "masterpw");
  EXPECT_EQ(options.sentinel_password, "s&pw");
  EXPECT_EQ(options.replica_sync_timeout_ms, 50);
  const std::string described = options.describe();
  EXPECT_EQ(described, "redis+sentinel://s1:26379,s2:26380/mymaster?db=2");
  EXPECT_EQ(described.find("pw"), std::string::npos);
}

TEST(RedisOptionsTest, RefusesBadClusterAndSentinelUrls) {
  EXPECT_THAT(error_of("redis+cluster://"), HasSubstr("missing host"));
  EXPECT_THAT(error_of("redis+cluster://h:1,"), HasSubstr("empty host after ','"));
  EXPECT_THAT(error_of("redis+cluster://h:1/2"), HasSubstr("only database 0"));
  EXPECT_THAT(error_of("redis+cluster://h:1?db=2"), HasSubstr("unknown query parameter 'db'"));
  EXPECT_THAT(error_of("redis+sentinel://h:1"), HasSubstr("master's name"));
  EXPECT_THAT(error_of("redis+sentinel://h:1/m?replica_sync=maybe"), HasSubstr("on or off"));
  EXPECT_THAT(error_of("redis+sentinel://h:1/m?sentinel_user=u"), HasSubstr("has no password"));
  EXPECT_THAT(error_of("redis+sentinel://u:topsecret@h:99999/m"), Not(HasSubstr("topsecret")));
}

// Found by fuzz/redis_url_fuzzer.cpp (fuzz/corpus/redis_url/regression_query_in_host):
// a trailing '?' left the real options, NUL bytes and all, in a host name.
TEST(RedisOptionsTest, RefusesHostsWithCharactersNoHostHas) {
  EXPECT_THAT(error_of("redis+cluster://h1:7000,h2?replica_sync=off?"), HasSubstr("invalid character in the host"));
  EXPECT_THAT(error_of(std::string_view("redis://h\0st:1", 14)), HasSubstr("invalid character in the host"));
  EXPECT_THAT(error_of("redis://ho st"), HasSubstr("invalid character in the host"));
  EXPECT_THAT(error_of("redis://::1:6379"), HasSubstr("IPv6 hosts go in brackets"));
  EXPECT_THAT(error_of("redis://[::1]x]:1"), HasSubstr("unexpected text after the IPv6 host"));
  EXPECT_THAT(error_of("redis://[::1 ]:1"), HasSubstr("invalid character in the IPv6 host"));
  // regression_bracketed_name: brackets around what is no IPv6 address.
  EXPECT_THAT(error_of("redis://[%40]:380/1"), HasSubstr("invalid character in the IPv6 host"));
  EXPECT_EQ(RedisOptions::from_url("redis://cache_1.example-host:1").host, "cache_1.example-host");
  EXPECT_EQ(RedisOptions::from_url("redis://[fe80::1%eth0]:1").host, "fe80::1%eth0");
}

// fuzz/corpus/redis_url/regression_master_name_escape: describe() wrote a
// decoded "%40" back as '@', a URL naming another place.
// Grant sync (replica_sync, aof_sync) on every URL form: each one's
// deployment may have replicas or an append-only file.
TEST(RedisOptionsTest, EveryFormTakesTheGrantSyncOptions) {
  const RedisOptions tcp = RedisOptions::from_url("redis://h?aof_sync=on&aof_sync_timeout_ms=250&replica_sync=off");
  EXPECT_TRUE(tcp.aof_sync);
  EXPECT_EQ(tcp.aof_sync_timeout_ms, 250);
  EXPECT_FALSE(tcp.replica_sync);
  EXPECT_FALSE(RedisOptions::from_url("redis://h").aof_sync);
  EXPECT_EQ(RedisOptions::from_url("redis://h").aof_sync_timeout_ms, kDefaultAofSyncTimeoutMs);
  const RedisOptions unix_socket = RedisOptions::from_url("unix:///s.sock?db=3&aof_sync=on");
  EXPECT_TRUE(unix_socket.aof_sync);
  EXPECT_EQ(unix_socket.db, 3);
  EXPECT_TRUE(RedisOptions::from_url("redis+cluster://a:1,b:2?aof_sync=on").aof_sync);
  EXPECT_TRUE(RedisOptions::from_url("redis+sentinel://s1/m?aof_sync=on").aof_sync);
  // Said back by describe(), so that it parses to the same.
  EXPECT_EQ(tcp.describe(), "redis://h:6379/0?aof_sync=on&aof_sync_timeout_ms=250");
  EXPECT_TRUE(RedisOptions::from_url(unix_socket.describe()).aof_sync);
  EXPECT_THAT(error_of("redis://h?aof_sync=maybe"), HasSubstr("aof_sync"));
  EXPECT_THAT(error_of("redis://h?aof_sync_timeout_ms=0"), HasSubstr("aof_sync_timeout_ms must be a positive integer"));
  RedisOptions zero;
  zero.aof_sync_timeout_ms = 0;
  EXPECT_THROW(zero.validate(), InvalidArgumentError);
}

TEST(RedisOptionsTest, DescribeEncodesWhatTheUrlEncoded) {
  const RedisOptions sentinel = RedisOptions::from_url("redis+sentinel://h/my%40master%2Fx");
  EXPECT_EQ(sentinel.sentinel_master_name, "my@master/x");
  EXPECT_EQ(sentinel.describe(), "redis+sentinel://h:26379/my%40master%2Fx?db=0");
  EXPECT_EQ(RedisOptions::from_url(sentinel.describe()).sentinel_master_name, "my@master/x");
  EXPECT_EQ(RedisOptions::from_url("redis://us%3Aer:pw@h").describe(), "redis://us%3Aer@h:6379/0");
  EXPECT_THAT(error_of(std::string_view("unix:///tmp/a\0b", 16)), HasSubstr("NUL byte in the socket path"));
}

}  // namespace
}  // namespace turnstile
