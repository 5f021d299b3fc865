// support/redis_cluster.h
//
// Test deployments of real redis-servers on free loopback ports, each in its
// own temporary directory (removed at the end), every process stopped by its
// PID:
//
//   * RedisCluster: three masters started with --cluster-enabled yes and
//     joined by `redis-cli --cluster create ... --cluster-yes`; returns once
//     every node reports cluster_state:ok.
//   * SentinelGroup: a master, one replica in sync with it, and three
//     sentinels monitoring it as "mymaster" (down-after 1 s, failover
//     timeout 3 s, so a failover takes seconds).
//
// Either deployment can also serve TLS (given TlsCertificates): every
// server keeps its plaintext port (for readiness checks and command()) and
// serves TLS on a port of its own (RedisServer::tls_port()), replicates over
// TLS (--tls-replication yes: a replica announces its TLS port, sentinels
// reach masters and replicas and each other over TLS), and a cluster's bus
// runs TLS on an explicit --cluster-port (--tls-cluster yes: CLUSTER SLOTS
// and MOVED name the TLS ports to TLS clients, the plaintext ones to
// plaintext clients). url() is then rediss+cluster:// or rediss+sentinel://
// on the TLS ports, without query options (the test adds tls_ca_file=...).
//
// Every wait is bounded (kDeploymentTimeout); a deployment that does not
// come up throws std::runtime_error.

#ifndef TURNSTILE_TESTS_SUPPORT_REDIS_CLUSTER_H_
#define TURNSTILE_TESTS_SUPPORT_REDIS_CLUSTER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "redis_server.h"

namespace turnstile::testing {

class TlsCertificates;

inline constexpr std::chrono::seconds kDeploymentTimeout{30};

// Polls `done` every few ms until it returns true; false after `timeout`.
bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout);

// Waits (bounded by kDeploymentTimeout) until `replica` is in sync with
// `master` as both see it: the replica's link is up and the master lists it
// online (ROLE, and so WAIT, count it only then).
bool wait_for_replica_online(RedisServer& master, RedisServer& replica);

// A temporary directory, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class RedisCluster {
 public:
  static constexpr int kMasters = 3;

  // Plaintext, or TLS too when `tls` is given (it must outlive the cluster).
  explicit RedisCluster(const TlsCertificates* tls = nullptr);
  ~RedisCluster();

  // redis+cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3 (rediss+cluster://
  // and the TLS ports with TLS)
  std::string url() const;
  RedisServer& node(int index) { return *nodes_[static_cast<std::size_t>(index)]; }
  // The index of the node that serves `key` (answers EXISTS without MOVED).
  int owner_of(const std::string& key);
  // The CLUSTER MYID of node `index`.
  std::string id_of(int index);
  // Starts one more node (plaintext clusters only), makes it a replica of
  // node `master_index` and returns once it is in sync and every node's
  // CLUSTER SLOTS lists it. It is node(kMasters + k) for the k-th added.
  RedisServer& add_replica(int master_index);
  // Whether every node reports cluster_state:ok.
  bool healthy();

 private:
  bool tls_ = false;
  std::vector<std::unique_ptr<TempDir>> dirs_;
  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

// One cluster per test binary (forming one takes seconds), made on first use
// and stopped at exit.
RedisCluster& shared_test_cluster();

class SentinelGroup {
 public:
  static constexpr int kSentinels = 3;
  static constexpr const char* kMasterName = "mymaster";

  // The port the replica replicates from, given the master's: the master's
  // own by default; a test can return a proxy's to cut the replication
  // link later (see tcp_proxy.h).
  using ReplicationRoute = std::function<int(int master_port)>;

  struct Options {
    ReplicationRoute route;
    // TLS too when given (it must outlive the group; `route` is then given
    // the master's TLS port).
    const TlsCertificates* tls = nullptr;
    // Above 0: the master waits this long before a diskless transfer, so
    // the replica stays attached in its first full sync (INFO replication
    // state=wait_bgsave), and the group is ready once the sentinels know
    // it, not once it is in sync.
    int first_sync_delay_s = 0;
  };
  explicit SentinelGroup(const Options& options);
  // Plaintext, or TLS too when `tls` is given (it must outlive the group;
  // `route` is then given the master's TLS port).
  explicit SentinelGroup(const ReplicationRoute& route = {}, const TlsCertificates* tls = nullptr)
      : SentinelGroup(Options{.route = route, .tls = tls}) {}
  ~SentinelGroup();

  // redis+sentinel://127.0.0.1:s1,127.0.0.1:s2,127.0.0.1:s3/mymaster
  // (rediss+sentinel:// and the TLS ports with TLS)
  std::string url() const;
  RedisServer& master() { return *master_; }
  RedisServer& replica() { return *replica_; }
  RedisServer& sentinel(int index) { return *sentinels_[static_cast<std::size_t>(index)]; }
  // The master's port as sentinel 0 names it (its TLS port with TLS).
  int master_port_by_sentinel();

 private:
  bool tls_ = false;
  TempDir dir_;
  std::unique_ptr<RedisServer> master_;
  std::unique_ptr<RedisServer> replica_;
  std::vector<std::unique_ptr<RedisServer>> sentinels_;
};

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_SUPPORT_REDIS_CLUSTER_H_
