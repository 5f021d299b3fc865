// cli/sim_command.h
//
// `turnstile sim`: runs a simulation scenario (turnstile/sim/scenarios.h)
// on the embedded fake Redis in virtual time and prints a readable report,
// or one JSON object with --json. Exit status: 0, 1 if a checker found a
// violation the scenario does not expect, 64 for bad input, 74 if the trace
// or metrics file cannot be written (nothing half-written is left).
//
// It is its own program, turnstile-sim (cli/sim_main.cpp), which `turnstile
// sim ARGS` executes (cli/sim_dispatch.h): only turnstile-sim links
// libturnstile_sim, Lua 5.1 and Boost.Context.
//
//   turnstile sim --scenario gc-pause --seed 7 --trace gc.json
//   turnstile sim --scenario contention --clients 64 --duration 1h --json
//   turnstile sim --scenario contention --faults chaos --seed 3
//   turnstile sim --scenario failover --metrics failover.prom
//   turnstile sim --swarm 500 --seed 1        # turnstile/sim/swarm.h
//
// --swarm N prints one line per failed run (its first unexpected violation
// and the command that replays it), then a summary; exit status 1 if any
// run failed.

#ifndef TURNSTILE_CLI_SIM_COMMAND_H_
#define TURNSTILE_CLI_SIM_COMMAND_H_

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace turnstile::cli {

struct SimOptions {
  std::string scenario;
  std::uint64_t seed = 1;
  std::string clients;   // empty: the scenario's default (kept as text to reject "-3" clearly)
  std::string duration;  // "90s", "10m", "1h", "250ms"; empty: the scenario's default
  std::string flavor;    // empty: the scenario's own flavor (--flavor; --lock is its old name)
  std::string permits = "3";
  std::string nodes = "5";
  std::string down_nodes = "2";
  bool replica_sync = false;
  std::string wake_scope;      // process (default) or fleet: every client's ClientOptions::wake_scope
  std::string fair_handoff;    // direct or announce: every fair lock's FairLockOptions::handoff
  std::string fleet_handoff;   // direct or announce: every client's ClientOptions::fleet_handoff
  std::string lock_delay;      // every client's ClientOptions::lock_delay; empty: none
  std::string replica_lag;     // empty: the scenario's
  std::string faults;          // a fault mix; with --swarm: the only one drawn
  std::string swarm;           // runs; empty: no swarm (--scenario: the only one drawn)
  bool buggify = false;        // one run with BUGGIFY (a swarm always has it)
  std::string hours;           // a swarm's wall-time limit, in hours; alone: a swarm of up to kMaxRuns
  std::string failures_file;   // a swarm appends every failed run's replay line here
  std::string until_handoffs;  // a swarm stops once it simulated this many handoffs
  std::string trace_path;
  bool trace_commands = false;  // --trace-commands: a span per script or command call
  std::string metrics_path;     // --metrics: every client's metrics, Prometheus text
  bool json = false;
  bool check_determinism = false;
  bool list = false;
};

// What `turnstile --help` says of `sim`.
inline constexpr const char* kSimDescription = "Run a deterministic simulation scenario on the embedded fake Redis";

// Registers the options of `sim` on `app` (turnstile-sim's own, whose name
// is "turnstile sim"); they are filled when it is parsed.
void add_sim_options(CLI::App& app, SimOptions& options);
// Runs it; returns the exit status.
int sim_command(const SimOptions& options);

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_SIM_COMMAND_H_
