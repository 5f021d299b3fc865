// turnstile/sim/server_options.h
//
// How a fake Redis server of a simulated world behaves beyond its
// commands: what its work costs in virtual time, when it answers BUSY, what
// survives a restart, and how its clock differs from the world's.
// WorldOptions::server gives every server of a world these options.
//
//   turnstile::sim::WorldOptions options;    // idealised: no cost
//   options.server = turnstile::sim::ServerOptions();  // the measured costs
//   options.server.persistence = turnstile::sim::Persistence::everysec;
//
// Virtual cost: each command keeps the single-threaded server busy for its
// service time, a script for a base cost plus a cost per redis.call (so an
// O(N) script costs O(N) time); commands queue behind each other, so a herd
// shows as latency in virtual time. The defaults are what redis-server 7.0
// measured on this project's machine (tools/measure_fake_cost.py,
// docs/simulation.md "Virtual cost").

#ifndef TURNSTILE_SIM_SERVER_OPTIONS_H_
#define TURNSTILE_SIM_SERVER_OPTIONS_H_

#include <chrono>
#include <cstdint>

#include "turnstile/runtime.h"

namespace turnstile::sim {

// What a server keeps across a restart, as Redis's append-only file:
// nothing (no AOF: the lock keys are gone, docs/safety.md's limit), every
// write up to the last fsync (appendfsync everysec: once a second, so up to
// the last second of writes is lost, as in a machine crash), or every
// acknowledged write (appendfsync always).
enum class Persistence : std::uint8_t { none, everysec, always };

struct ServerOptions {
  // The service time of one command that is not a script.
  Duration command_cost = std::chrono::nanoseconds(150);
  // A script's own cost (EVAL / EVALSHA), and what each redis.call /
  // redis.pcall inside it adds (with the Lua work around the call).
  Duration script_base_cost = std::chrono::nanoseconds(1'100);
  Duration script_cost_per_call = std::chrono::nanoseconds(1'200);
  // Past this much of one script's cost, other commands are answered BUSY
  // until it ends (redis.conf busy-reply-threshold, formerly lua-time-limit).
  Duration busy_script_threshold = std::chrono::milliseconds(5'000);
  // What survives a restart (World::restart_server).
  Persistence persistence = Persistence::none;
  // The server's clock against the world's: the offset (whole ms) moves
  // TIME and the *AT expiries; a drift makes its expiries run fast (+,
  // keys expire early) or slow (-), at most 100'000 ppm either way.
  Duration clock_offset{0};
  std::int64_t clock_drift_ppm = 0;

  // Every cost zero: a server that works in no time (and never BUSY).
  static ServerOptions idealised() {
    ServerOptions options;
    options.command_cost = options.script_base_cost = options.script_cost_per_call = Duration::zero();
    return options;
  }
};

}  // namespace turnstile::sim

#endif  // TURNSTILE_SIM_SERVER_OPTIONS_H_
