// sim/replication.h
//
// A lagging replica of one fake server, for the failover fault. The
// master's write stream (every write command's effect, scripts included:
// Redis replicates scripts by their effects) is recorded as key snapshots:
// after each write, the touched keys' values and absolute deadlines. The
// replica applies a snapshot once it is `lag` old, so at a failover at time
// T it has everything written up to T - lag and nothing after: the last
// writes within the lag are lost, exactly what a promoted asynchronous
// replica loses.
//
// Snapshots (not replayed commands) keep relative expiries exact: a PEXPIRE
// applied late would otherwise extend the key. The replica is configured
// as its master (ServerOptions: costs, persistence, clock skew).
//
// Not thread-safe: one world's thread.

#ifndef TURNSTILE_SIM_REPLICATION_H_
#define TURNSTILE_SIM_REPLICATION_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fake_redis/append_only_file.h"
#include "fake_redis/keyspace.h"
#include "fake_redis/server.h"
#include "fake_redis/virtual_clock.h"

namespace turnstile::sim {

class Replication {
 public:
  // Snapshots queued but not yet applied; beyond it the oldest are applied
  // early (a replica cannot buffer forever either).
  static constexpr std::size_t kMaxBacklog = 1'000'000;

  // Starts replicating `master` into a new replica server. The master's
  // effect hook is taken; the replica starts as a full copy of the master.
  Replication(Server& master, const VirtualClock& clock, Duration lag);
  ~Replication();
  Replication(const Replication&) = delete;
  Replication& operator=(const Replication&) = delete;

  Duration lag() const { return lag_; }
  // Applies every snapshot at least `lag` old.
  void catch_up();
  // For a failover: catches up, detaches from the master, drops what is
  // left (the lost writes) and hands over the replica. Returns how many
  // snapshots were lost.
  std::size_t promote(std::unique_ptr<Server>& replica_out);

  Server& replica() { return *replica_; }
  std::size_t backlog() const { return backlog_.size(); }

 private:
  void record(const std::vector<std::string>& argv);

  Server& master_;
  const VirtualClock& clock_;
  Duration lag_;
  std::unique_ptr<Server> replica_;
  std::deque<KeySnapshot> backlog_;
};

}  // namespace turnstile::sim

#endif  // TURNSTILE_SIM_REPLICATION_H_
