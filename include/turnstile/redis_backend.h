// turnstile/redis_backend.h
//
// The production Backend: a real redis-server (or anything speaking RESP2)
// reached over hiredis (plaintext), or over OpenSSL with hiredis's reply
// parser (TLS, rediss://).
//
//   auto backend = turnstile::make_redis_backend(
//       turnstile::RedisOptions::from_url("redis://app:secret@10.0.0.5:6379/2"));
//
// What it does behind the Backend interface:
//
//   * Commands and scripts go over a bounded pool of connections, created on
//     first use. Every new connection sends AUTH (password, or ACL user and
//     password), SELECT and INFO server (the server's run_id: a new run_id
//     behind the same endpoint is a restart, told to watch_restarts()
//     handlers; a server refusing INFO is never found restarted) before it
//     is used. A connection that broke is
//     dropped; when one breaks with an I/O error (server gone), the idle ones
//     are dropped too, since they almost certainly share its fate.
//   * eval() sends EVALSHA and transparently loads the script on NOSCRIPT.
//   * Pub/sub uses one dedicated connection with one reader thread, started by
//     the first subscribe(). If that connection breaks it is re-established
//     with bounded backoff, every live channel is subscribed again, and every
//     handler of such a channel receives a PubSubEvent::Kind::resubscribed
//     event (messages published meanwhile may have been missed). A server
//     that hangs without closing the connection is noticed by a PING sent
//     after `pubsub_ping_interval_ms` of silence.
//   * A failed call is never retried by the backend (a command that timed out
//     may still have run); the caller decides.
//
// Time bounds: connecting plus the AUTH/SELECT/INFO handshake waits at most
// `connect_timeout_ms`; each network read or write of a call at most
// `command_timeout_ms`; waiting for a free pooled connection at most
// `command_timeout_ms`. While the server is unreachable, calls fail at once
// with ConnectionError (after one failed attempt, reconnection attempts are
// spaced by a backoff of at most kMaxReconnectBackoffMs). Every transport
// error names the endpoint ("127.0.0.1:6379" or the socket path), never a
// password.

#ifndef TURNSTILE_REDIS_BACKEND_H_
#define TURNSTILE_REDIS_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/export.h"
#include "turnstile/backend.h"

namespace turnstile {

inline constexpr int kDefaultRedisPort = 6379;
inline constexpr int kDefaultConnectTimeoutMs = 2000;
inline constexpr int kDefaultCommandTimeoutMs = 2000;
inline constexpr int kDefaultPoolSize = 16;
inline constexpr int kDefaultPubSubPingIntervalMs = 1000;
// Reconnection attempts after a failure are spaced by a delay that starts at
// the first value and doubles up to the second.
inline constexpr int kInitialReconnectBackoffMs = 10;
inline constexpr int kMaxReconnectBackoffMs = 1000;
inline constexpr int kDefaultSentinelPort = 26379;
// A cluster call is sent at most this many times (redirections, TRYAGAIN,
// CLUSTERDOWN included) before ClusterRedirectError.
inline constexpr int kMaxClusterAttempts = 8;
inline constexpr int kDefaultReplicaSyncTimeoutMs = 500;
// How long a grant waits for the master's AOF fsync (RedisOptions::aof_sync):
// one appendfsync everysec period, the server's cron tick (100 ms at hz 10,
// when a blocked WAITAOF is looked at again) and room to spare.
inline constexpr int kDefaultAofSyncTimeoutMs = 1500;
// How long a master's replica count (INFO replication's connected_slaves,
// every attached replica whatever its state) is trusted.
inline constexpr int kReplicaCountRefreshMs = 1000;

enum class RedisMode : std::uint8_t { standalone, cluster, sentinel };

// TLS (rediss://) for every connection of a backend: to the server, and in
// sentinel and cluster mode to every sentinel and node. The server's
// certificate is verified by default, against the system's CAs or
// ca_file / ca_dir, and must name the host connected to (or server_name);
// a host name (not an IP address) is also sent as SNI. cert_file and
// key_file (PEM, both or neither) present a client certificate for servers
// that require one (tls-auth-clients yes). insecure_skip_verify accepts any
// certificate: for tests only, it makes the connection open to a
// man-in-the-middle. A file that cannot be read raises InvalidArgumentError
// naming it, from make_redis_backend().
struct TURNSTILE_EXPORT TlsOptions {
  bool enabled = false;
  std::string ca_file = {};
  std::string ca_dir = {};
  std::string cert_file = {};
  std::string key_file = {};
  // The name the certificate must carry and the SNI sent, if not the host.
  std::string server_name = {};
  bool insecure_skip_verify = false;
};

// A TCP address of a cluster node or sentinel.
struct TURNSTILE_EXPORT RedisEndpoint {
  std::string host = {};
  int port = kDefaultRedisPort;
  bool operator==(const RedisEndpoint&) const = default;
};

struct TURNSTILE_EXPORT RedisOptions {
  // Where the server is: TCP host and port, or (if `unix_socket_path` is not
  // empty) a Unix domain socket, in which case host and port are unused.
  std::string host = "127.0.0.1";
  int port = kDefaultRedisPort;
  std::string unix_socket_path = {};

  // Credentials. An empty `user` with a password authenticates as the default
  // user (AUTH <password>); a user needs a password (AUTH <user> <password>).
  std::string user = {};
  std::string password = {};

  // The logical database, selected on every new connection.
  int db = 0;

  int connect_timeout_ms = kDefaultConnectTimeoutMs;
  int command_timeout_ms = kDefaultCommandTimeoutMs;
  // At most this many command connections exist at once (the pub/sub
  // connection is extra).
  int pool_size = kDefaultPoolSize;
  // The subscriber connection sends PING after this much silence, and gives
  // the server `command_timeout_ms` to answer before reconnecting.
  int pubsub_ping_interval_ms = kDefaultPubSubPingIntervalMs;

  // The deployment (see the file comment). For cluster and sentinel, `seeds`
  // lists the nodes / sentinels to ask; host, port and unix_socket_path are
  // then unused. A cluster has only database 0.
  RedisMode mode = RedisMode::standalone;
  std::vector<RedisEndpoint> seeds = {};
  // Sentinel mode: the master's name, and the sentinels' own credentials
  // (`user` and `password` above are the master's).
  std::string sentinel_master_name = {};
  std::string sentinel_user = {};
  std::string sentinel_password = {};

  // Replica-sync safety (file comment): wait up to replica_sync_timeout_ms
  // (capped at half of command_timeout_ms, so the reply of WAIT always
  // arrives within the command timeout) for one replica after each
  // acquisition.
  bool replica_sync = true;
  int replica_sync_timeout_ms = kDefaultReplicaSyncTimeoutMs;

  // Durable grants (Redis 7.2 or later with appendonly yes): after each
  // acquisition that replica sync covers, WAITAOF 1 0 (sent once the
  // script answered) waits up to aof_sync_timeout_ms (capped at three
  // quarters of command_timeout_ms, so that its reply arrives within it)
  // for the master to fsync the grant to its append-only file, so that a
  // restart of the master does not forget it (docs/safety.md, "A restart
  // without persistence"). A grant not fsynced in time is undone and
  // refused (AofSyncError); a server that cannot confirm it (older than
  // 7.2, appendonly no) refuses every acquisition (UnsafeServerError).
  // With appendfsync always the fsync is done before WAITAOF is read; with
  // everysec a grant waits for the next second's fsync.
  bool aof_sync = false;
  int aof_sync_timeout_ms = kDefaultAofSyncTimeoutMs;

  // TLS for every connection (not with unix_socket_path).
  TlsOptions tls = {};

  // Parses
  //   redis://[user[:password]@]host[:port][/db]
  //   unix://[user[:password]@]/path/to/socket[?db=N]
  //   redis+cluster://[user[:password]@]host:port[,host:port...][?options]
  //   redis+sentinel://[user[:password]@]host:port[,host:port...]/mastername[?options]
  // where options (joined by '&') are db=N (sentinel), sentinel_user=U,
  // sentinel_password=P; and on every form replica_sync=on|off,
  // replica_sync_timeout_ms=N, aof_sync=on|off, aof_sync_timeout_ms=N.
  // rediss://, rediss+cluster:// and rediss+sentinel:// are the same over
  // TLS, and take (rediss:// too) the options tls_ca_file=PATH,
  // tls_ca_dir=PATH, tls_cert_file=PATH, tls_key_file=PATH,
  // tls_server_name=NAME and tls_insecure=on|off (percent-encoded).
  // Sentinel ports default to 26379. User and password may (and '@', '/',
  // '?', '&' in them must) be percent-encoded; an IPv6 host is written in
  // brackets ("redis://[::1]:6379"). Everything not in the URL keeps its
  // default. Throws InvalidArgumentError naming what is wrong (never echoing
  // the password).
  static RedisOptions from_url(std::string_view url);
  // from_url() without the final validate(): for a caller that completes
  // the options first (a password read from a file for "redis://user@host")
  // and validates them itself (make_redis_backend() does).
  static RedisOptions parse_url(std::string_view url);

  // "127.0.0.1:6379" or "/path/to/socket": how errors name the server; the
  // seeds joined by ',' for cluster and sentinel.
  std::string endpoint() const;

  // The options as a URL without the passwords (the user and the master's
  // name percent-encoded, so it parses back): "redis://app@10.0.0.5:6379/2",
  // "unix:///run/redis.sock?db=1", "redis+cluster://h1:7000,h2:7001",
  // "redis+sentinel://s1:26379/mymaster?db=0", "rediss://h:6380/0?tls_ca_file=...".
  std::string describe() const;

  // Throws InvalidArgumentError if a field is out of range (non-positive
  // timeout or pool size, port outside 1..65535, negative db, user without
  // password, no seeds for cluster/sentinel, no master name for sentinel,
  // non-positive replica_sync_timeout_ms, TLS with a Unix socket, a TLS
  // option without TLS enabled, a client certificate without its key or the
  // reverse).
  void validate() const;
};

// A Backend for `options` (validated first; throws InvalidArgumentError) in
// its mode. Does not connect: the first call does. Destroy every Subscription before
// the backend.
TURNSTILE_EXPORT std::unique_ptr<Backend> make_redis_backend(const RedisOptions& options);

}  // namespace turnstile

#endif  // TURNSTILE_REDIS_BACKEND_H_
