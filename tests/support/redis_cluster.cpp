#include "redis_cluster.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "tls_certs.h"

namespace turnstile::testing {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(20);
constexpr const char* kClusterNodeTimeoutMs = "2000";

// Redis before 7 has no --cluster-port: a cluster node's bus port is its
// port + 10000 (the TLS port's with --tls-cluster), so that port must leave
// room for it.
int free_tls_port() {
  if (redis_server_major_version() >= 7) return free_loopback_port();
  return free_loopback_port_with_bus_room();
}

// A server's arguments to serve TLS on a free port beside its plaintext one
// and to replicate over TLS (a sentinel: to reach servers over TLS); none
// without certificates.
std::vector<std::string> tls_args(const TlsCertificates* tls) {
  if (tls == nullptr) return {};
  std::vector<std::string> args = tls->server_args(free_tls_port(), false);
  args.insert(args.end(), {"--tls-replication", "yes"});
  return args;
}

// "127.0.0.1:p1,127.0.0.1:p2,...": the servers' TLS ports or plaintext ones.
std::string addresses(const std::vector<std::unique_ptr<RedisServer>>& servers, bool tls) {
  std::string list;
  for (const auto& server : servers) {
    if (!list.empty()) list += ",";
    list += "127.0.0.1:" + std::to_string(tls ? server->tls_port() : server->port());
  }
  return list;
}

}  // namespace

bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    try {
      if (done()) return true;
    } catch (const std::exception&) {
      // not ready yet
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(kPollInterval);
  }
}

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "turnstile-test-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

RedisCluster::RedisCluster(const TlsCertificates* tls) : tls_(tls != nullptr) {
  // redis-cli joins the nodes through their plaintext ports; each node
  // announces its bus port (a TLS one with --tls-cluster) itself. Before
  // Redis 7 a node takes the bus port of a node it meets to be the port it
  // was met on + 10000: with --tls-cluster, they meet on their TLS ports.
  const bool meet_over_tls = tls_ && redis_server_major_version() < 7;
  std::string create = "timeout 30 redis-cli";
  if (meet_over_tls) create += " --tls --cacert '" + tls->ca_file() + "'";
  create += " --cluster create";
  for (int i = 0; i < kMasters; ++i) {
    dirs_.push_back(std::make_unique<TempDir>());
    std::vector<std::string> args = {"--cluster-enabled",   "yes",   "--cluster-node-timeout",
                                     kClusterNodeTimeoutMs, "--dir", dirs_.back()->path()};
    if (tls_) {
      // The bus port defaults to the TLS port + 10000, past 65535 for many
      // free ports: set apart where the server takes it (7.0+).
      const std::vector<std::string> tls_cluster = tls_args(tls);
      args.insert(args.end(), tls_cluster.begin(), tls_cluster.end());
      args.insert(args.end(), {"--tls-cluster", "yes"});
      if (redis_server_major_version() >= 7) {
        args.insert(args.end(), {"--cluster-port", std::to_string(free_loopback_port())});
      }
    }
    nodes_.push_back(std::make_unique<RedisServer>(args));
    create += " 127.0.0.1:" + std::to_string(meet_over_tls ? nodes_.back()->tls_port() : nodes_.back()->port());
  }
  create += " --cluster-yes >/dev/null 2>&1";
  if (std::system(create.c_str()) != 0) throw std::runtime_error("redis-cli --cluster create failed");
  if (!wait_until([this] { return healthy(); }, kDeploymentTimeout)) {
    throw std::runtime_error("the cluster did not reach cluster_state:ok");
  }
}

RedisCluster::~RedisCluster() {
  for (auto& node : nodes_) node->stop();
}

RedisCluster& shared_test_cluster() {
  static RedisCluster cluster;
  return cluster;
}

std::string RedisCluster::url() const {
  return (tls_ ? "rediss+cluster://" : "redis+cluster://") + addresses(nodes_, tls_);
}

bool RedisCluster::healthy() {
  for (auto& node : nodes_) {
    if (node->command({"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos) return false;
    // Every node must also agree on the whole map before tests route by it.
    if (node->command({"CLUSTER", "COUNTKEYSINSLOT", "0"}).find("ERR") != std::string::npos) return false;
  }
  return true;
}

int RedisCluster::owner_of(const std::string& key) {
  for (int i = 0; i < kMasters; ++i) {
    if (node(i).command({"EXISTS", key}).find("MOVED") == std::string::npos) return i;
  }
  return -1;
}

namespace {

// The CLUSTER MYID of `server`, without redis-cli's quotes.
std::string node_id_of(RedisServer& server) {
  std::string id = server.command({"CLUSTER", "MYID"});
  if (id.size() >= 2 && id.front() == '"') id = id.substr(1, id.size() - 2);
  return id;
}

}  // namespace

std::string RedisCluster::id_of(int index) { return node_id_of(node(index)); }

RedisServer& RedisCluster::add_replica(int master_index) {
  if (tls_) throw std::runtime_error("add_replica: plaintext clusters only");
  const std::string master_id = id_of(master_index);
  RedisServer& master = node(master_index);
  dirs_.push_back(std::make_unique<TempDir>());
  nodes_.push_back(std::make_unique<RedisServer>(std::vector<std::string>{
      "--cluster-enabled", "yes", "--cluster-node-timeout", kClusterNodeTimeoutMs, "--dir", dirs_.back()->path()}));
  RedisServer& replica = *nodes_.back();
  replica.command({"CLUSTER", "MEET", "127.0.0.1", std::to_string(master.port())});
  if (!wait_until(
          [&] {
            return replica.command({"CLUSTER", "NODES"}).find(master_id) != std::string::npos;
          },
          kDeploymentTimeout)) {
    throw std::runtime_error("the new node did not meet the cluster");
  }
  const std::string replicate = replica.command({"CLUSTER", "REPLICATE", master_id});
  if (replicate.find("OK") == std::string::npos) throw std::runtime_error("CLUSTER REPLICATE: " + replicate);
  if (!wait_for_replica_online(master, replica)) throw std::runtime_error("the replica did not sync");
  const std::string replica_id = node_id_of(replica);
  if (!wait_until(
          [&] {
            for (int i = 0; i < kMasters; ++i) {
              if (node(i).command({"CLUSTER", "SLOTS"}).find(replica_id) == std::string::npos) return false;
            }
            return healthy();
          },
          kDeploymentTimeout)) {
    throw std::runtime_error("the masters did not list the new replica");
  }
  return replica;
}

bool wait_for_replica_online(RedisServer& master, RedisServer& replica) {
  return wait_until(
      [&] {
        return replica.command({"INFO", "replication"}).find("master_link_status:up") != std::string::npos &&
               master.command({"INFO", "replication"}).find("state=online") != std::string::npos;
      },
      kDeploymentTimeout);
}

SentinelGroup::SentinelGroup(const Options& options) : tls_(options.tls != nullptr) {
  const ReplicationRoute& route = options.route;
  const TlsCertificates* tls = options.tls;
  std::vector<std::string> master_args = tls_args(tls);
  if (options.first_sync_delay_s > 0) {
    master_args.insert(master_args.end(), {"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay",
                                           std::to_string(options.first_sync_delay_s)});
  }
  master_ = std::make_unique<RedisServer>(master_args);
  // Replicas and sentinels reach the master where clients do.
  const int master_port = tls_ ? master_->tls_port() : master_->port();
  const int upstream_port = route ? route(master_port) : master_port;
  std::vector<std::string> replica_args = tls_args(tls);
  replica_args.insert(replica_args.end(), {"--replicaof", "127.0.0.1", std::to_string(upstream_port)});
  replica_ = std::make_unique<RedisServer>(replica_args);
  const bool attached =
      options.first_sync_delay_s > 0
          ? wait_until(
                [&] {
                  return master_->command({"INFO", "replication"}).find("state=wait_bgsave") != std::string::npos;
                },
                kDeploymentTimeout)
          : wait_for_replica_online(*master_, *replica_);
  if (!attached) throw std::runtime_error("the replica did not attach to its master");
  for (int i = 0; i < kSentinels; ++i) {
    const std::string config = dir_.path() + "/sentinel-" + std::to_string(i) + ".conf";
    std::ofstream(config) << "sentinel monitor " << kMasterName << " 127.0.0.1 " << master_port << " 2\n"
                          << "sentinel down-after-milliseconds " << kMasterName << " 1000\n"
                          << "sentinel failover-timeout " << kMasterName << " 3000\n"
                          << "sentinel parallel-syncs " << kMasterName << " 1\n";
    std::vector<std::string> sentinel_args = {"--sentinel", "--dir", dir_.path()};
    const std::vector<std::string> sentinel_tls = tls_args(tls);
    sentinel_args.insert(sentinel_args.end(), sentinel_tls.begin(), sentinel_tls.end());
    sentinels_.push_back(std::make_unique<RedisServer>(config, sentinel_args));
  }
  // Each sentinel must know the replica (from the master's INFO) before it
  // can fail over to it.
  for (auto& sentinel : sentinels_) {
    if (!wait_until(
            [&] {
              return sentinel->command({"SENTINEL", "REPLICAS", kMasterName}).find("slave") != std::string::npos;
            },
            kDeploymentTimeout)) {
      throw std::runtime_error("a sentinel did not discover the replica");
    }
  }
}

SentinelGroup::~SentinelGroup() {
  for (auto& sentinel : sentinels_) sentinel->stop();
  replica_->stop();
  master_->stop();
}

std::string SentinelGroup::url() const {
  return (tls_ ? "rediss+sentinel://" : "redis+sentinel://") + addresses(sentinels_, tls_) + "/" + kMasterName;
}

int SentinelGroup::master_port_by_sentinel() {
  const std::string reply = sentinels_[0]->command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", kMasterName});
  // ["127.0.0.1", "6380"]
  const std::size_t comma = reply.find(", \"");
  return std::stoi(reply.substr(comma + 3));
}

}  // namespace turnstile::testing
