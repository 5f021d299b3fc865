// scenarios/redlock_scenarios.h
//
// Seeded simulation scenarios that show when a lock keeps its promise and
// when it does not: a failover that loses the lock's key, nodes down, a
// client paused past its validity, a client clock drifting beyond the
// allowance, and contention with leases shorter than waits. Each builds its
// own sim::World, runs it to the end in virtual time and returns counts
// found by one checker: holders "write" to a protected resource (a write
// takes 10 ms), each write stamped with world time, and two acquisitions
// overlap when their spans (from the acquisition to the last write)
// intersect. A careful holder starts a write only while the lock's
// remaining validity exceeds the time one write takes.
//
// For the tests (tests/locks/multi_lock_test.cpp) and for `turnstile sim`:
// the same seed gives the same result and trace hash.
//
//   ScenarioResult r = failover_scenario({.lock = ScenarioLock::redlock, .nodes = 5}, 2);
//   // r.overlapping_holders == 0: a minority of nodes losing the key is harmless

#ifndef TURNSTILE_SCENARIOS_REDLOCK_SCENARIOS_H_
#define TURNSTILE_SCENARIOS_REDLOCK_SCENARIOS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "turnstile/multi_lock.h"
#include "turnstile/runtime.h"

namespace turnstile::sim::redlock_scenarios {

enum class ScenarioLock {
  reentrant,  // one ReentrantLock on server 0
  redlock,    // a RedLock of one ReentrantLock per server
};

struct ScenarioOptions {
  ScenarioLock lock = ScenarioLock::redlock;
  // Servers in the world (the reentrant lock uses server 0 only).
  std::size_t nodes = 5;
  std::uint64_t seed = 1;
  // The RedLock's options (retry delays, drift allowance, node timeout).
  CompositeLockOptions redlock;
};

struct ScenarioResult {
  std::uint64_t acquisitions = 0;         // try_lock calls that returned true
  std::uint64_t refusals = 0;             // try_lock calls that returned false
  std::uint64_t acquire_errors = 0;       // try_lock calls that threw (too many nodes unreachable)
  std::uint64_t unlock_errors = 0;        // unlock calls that threw (lease ran out, lock taken over)
  std::uint64_t writes = 0;               // protected writes
  std::uint64_t late_writes = 0;          // writes made when the writer's own validity had run out
  std::uint64_t overlapping_holders = 0;  // pairs of acquisitions whose spans intersect
  std::uint64_t keys_left = 0;            // servers still holding the lock's key at the end
  std::int64_t virtual_ms = 0;            // world time at the end
  std::uint64_t events = 0;               // scheduler events dispatched
  std::uint64_t trace_hash = 0;
  std::string trace;
};

// Alice holds the lock (lease 10 s) and writes for 3 s; at 500 ms the first
// `restarted_servers` servers restart without persistence (their keyspace is
// lost, as in a failover to a replica that missed the write); at 1 s Bob
// tries for 1.5 s (giving up before Alice is done). Reentrant, one restart: two holders. RedLock of 5, two
// restarts: none.
ScenarioResult failover_scenario(const ScenarioOptions& options, std::size_t restarted_servers);

// The first `down_servers` servers are unreachable; one client acquires,
// writes once and unlocks. With a RedLock of 5: acquired with up to 2 down,
// an error with 3 (and no key left behind either way).
ScenarioResult nodes_down_scenario(const ScenarioOptions& options, std::size_t down_servers);

// Alice holds the lock with a 2 s lease and writes every 10 ms; at 555 ms,
// between a validity check and the write it allows, she is paused for
// `pause`. Bob waits for the lock from 100 ms. A pause longer than the
// validity left makes her write after Bob took over: RedLock cannot prevent
// it (fencing tokens could, and are not available across masters).
ScenarioResult client_pause_scenario(const ScenarioOptions& options, Duration pause);

// Alice's clock runs `drift_ppm` fast or slow against the servers'; she
// holds the lock with a 10 s lease and writes while its validity lasts; Bob
// waits for it from 1 s. Within the drift allowance (1%, -10'000 ppm):
// nothing; a slower clock: Alice writes after the servers expired her lock.
ScenarioResult clock_drift_scenario(const ScenarioOptions& options, std::int64_t drift_ppm);

// `clients` clients each take the lock `rounds` times with `wait` and
// `lease`, working `work` per hold (longer than the lease: the validity
// stops them), requests delayed at random by up to `jitter` per node.
// The Redisson bug cases: lease < wait, and wait 0 with a lease.
struct ContentionOptions {
  std::size_t clients = 3;
  int rounds = 5;
  Duration wait = std::chrono::seconds(5);
  Duration lease = std::chrono::milliseconds(300);
  Duration work = std::chrono::milliseconds(500);
  Duration jitter = std::chrono::milliseconds(20);
};
ScenarioResult contention_scenario(const ScenarioOptions& options, const ContentionOptions& contention);

}  // namespace turnstile::sim::redlock_scenarios

#endif  // TURNSTILE_SCENARIOS_REDLOCK_SCENARIOS_H_
