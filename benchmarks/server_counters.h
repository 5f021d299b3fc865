// benchmarks/server_counters.h
//
// What a benchmark reads of the servers it measures and of itself, around
// a measured window: every master's CPU and commands (INFO cpu,
// commandstats), summed, and this process's CPU. Deltas of two readings
// are the window's cost.

#ifndef TURNSTILE_BENCHMARKS_SERVER_COUNTERS_H_
#define TURNSTILE_BENCHMARKS_SERVER_COUNTERS_H_

#include <map>
#include <string>

#include "turnstile/backend.h"

namespace turnstile::benchmarks {

// The number after `field` in `text` ("used_cpu_sys:" in
// "used_cpu_sys:1.5", ":calls=" in "cmdstat_get:calls=12,..."); 0 if
// absent.
double info_number(const std::string& text, const std::string& field);

// Every master's counters, summed: CPU seconds (user + system), and per
// command name (INFO commandstats: a script's own commands count too) the
// calls, the microseconds they ran and the calls refused (MOVED, ASK...).
struct ServerCounters {
  double cpu_s = 0;
  std::map<std::string, double> calls;
  std::map<std::string, double> usec;
  std::map<std::string, double> rejected;
};

// Of two readings of one counter by command (calls, usec or rejected):
// the sum of `after` - `before` over every command but INFO (the
// readings' own), and `name`'s alone.
double command_delta(const std::map<std::string, double>& before, const std::map<std::string, double>& after);
double delta_of(const std::map<std::string, double>& before, const std::map<std::string, double>& after,
                const std::string& name);

// Reads every master of `backend` (Backend::command_each_master); a master
// that does not answer counts nothing.
ServerCounters server_counters(Backend& backend);

// This process's CPU seconds so far (user + system).
double process_cpu_s();

}  // namespace turnstile::benchmarks

#endif  // TURNSTILE_BENCHMARKS_SERVER_COUNTERS_H_
