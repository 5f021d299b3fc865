#include "cli/sim_command.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

#include "cli/duration.h"
#include "cli/exit_status.h"
#include "turnstile/errors.h"
#include "turnstile/metrics.h"
#include "turnstile/sim/buggify.h"
#include "turnstile/sim/faults.h"
#include "turnstile/sim/scenarios.h"
#include "turnstile/sim/swarm.h"

namespace turnstile::cli {
namespace {

constexpr int kExitViolation = 1;
constexpr int kExitIo = 74;
constexpr int kProgressBarWidth = 40;
constexpr double kMaxSwarmHours = 24 * 7;

std::uint64_t parse_count(const std::string& text, const char* flag) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    throw UsageError(std::string(flag) + " expects a non-negative integer, not '" + text + "'");
  }
  return value;
}

// `flag`'s value: direct or announce; empty: `fallback` (the library's).
Handoff parse_handoff(const std::string& text, const char* flag, Handoff fallback) {
  if (text.empty()) return fallback;
  if (text == "direct") return Handoff::direct;
  if (text == "announce") return Handoff::announce;
  throw UsageError(std::string(flag) + " must be direct or announce, not '" + text + "'");
}
Handoff parse_fair_handoff(const std::string& text) {
  return parse_handoff(text, "--fair-handoff", FairLockOptions{}.handoff);
}
Handoff parse_fleet_handoff(const std::string& text) {
  return parse_handoff(text, "--fleet-handoff", ClientOptions{}.fleet_handoff);
}

sim::ScenarioOptions to_scenario_options(const SimOptions& options) {
  sim::ScenarioOptions scenario;
  scenario.scenario = options.scenario;
  scenario.seed = options.seed;
  if (!options.clients.empty()) scenario.clients = parse_count(options.clients, "--clients");
  if (!options.duration.empty()) scenario.duration = parse_duration(options.duration, "--duration");
  std::optional<Flavor> flavor = parse_flavor(options.flavor);
  if (options.flavor.empty()) {
    flavor = Flavor::reentrant;
    for (const sim::ScenarioInfo& info : sim::scenario_catalog()) {
      if (info.name == options.scenario) flavor = info.default_flavor;
    }
  }
  if (!flavor) {
    throw UsageError("--flavor must be one of " + flavor_names() + ", not '" + options.flavor + "'");
  }
  scenario.flavor = *flavor;
  const std::uint64_t permits = parse_count(options.permits, "--permits");
  if (permits > static_cast<std::uint64_t>(sim::ScenarioOptions::kMaxPermits)) {
    throw UsageError("--permits must be within 1.." + std::to_string(sim::ScenarioOptions::kMaxPermits));
  }
  scenario.permits = static_cast<std::int64_t>(permits);
  scenario.nodes = parse_count(options.nodes, "--nodes");
  scenario.down_nodes = parse_count(options.down_nodes, "--down-nodes");
  scenario.replica_sync = options.replica_sync;
  if (options.wake_scope == "fleet") {
    scenario.wake_scope = WakeScope::fleet;
  } else if (options.wake_scope == "process") {
    scenario.wake_scope = WakeScope::process;
  } else if (!options.wake_scope.empty()) {
    throw UsageError("--wake-scope must be process or fleet, not '" + options.wake_scope + "'");
  }
  scenario.fair_handoff = parse_fair_handoff(options.fair_handoff);
  scenario.fleet_handoff = parse_fleet_handoff(options.fleet_handoff);
  if (!options.lock_delay.empty()) {
    scenario.lock_delay = parse_duration(options.lock_delay, "--lock-delay");
    if (scenario.lock_delay > kMaxLockDelay) {
      throw UsageError("--lock-delay must be at most " + format_duration(kMaxLockDelay) + ", got " +
                       options.lock_delay);
    }
  }
  if (!options.replica_lag.empty()) scenario.replica_lag = parse_duration(options.replica_lag, "--replica-lag");
  scenario.faults = options.faults;
  scenario.buggify = options.buggify;
  scenario.trace_path = options.trace_path;
  if (options.trace_commands && options.trace_path.empty()) throw UsageError("--trace-commands goes with --trace FILE");
  scenario.trace_commands = options.trace_commands;
  return scenario;
}

// Fails before a long run rather than after it (--trace, --metrics): the
// file goes to <path>.tmp first and is renamed into place at the end.
void check_writable(const std::string& path, const char* flag) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) {
    throw UsageError(std::string(flag) + ": " + in_quotes(path) + " is a directory, not a file to write");
  }
  const std::string temporary = path + ".tmp";
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  if (file == nullptr)
    throw Error(std::string("cannot write ") + flag + " " + in_quotes(path) + ": " + std::strerror(errno));
  std::fclose(file);
  std::remove(temporary.c_str());
}

// Every client's metrics in the Prometheus text format, labelled with the
// scenario, the seed and the client's name.
void write_metrics(const sim::ScenarioResult& result, const std::string& path) {
  std::vector<LabelledMetrics> snapshots;
  for (const auto& [client, metrics] : result.client_metrics) {
    snapshots.push_back(LabelledMetrics{
        .labels = {{"scenario", result.scenario}, {"seed", std::to_string(result.seed)}, {"client", client}},
        .snapshot = metrics});
  }
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    write_prometheus(out, snapshots);
    out.flush();
    if (!out) throw Error("cannot write --metrics " + in_quotes(path) + ": " + std::strerror(errno));
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) throw Error("cannot write --metrics " + in_quotes(path) + ": " + error.message());
}

MetricsSnapshot total_metrics(const sim::ScenarioResult& result) {
  MetricsSnapshot total;
  for (const auto& [client, metrics] : result.client_metrics) total += metrics;
  return total;
}

double mean_ms(const LatencyHistogram& histogram) {
  return histogram.count == 0 ? 0.0
                              : static_cast<double>(histogram.sum_us) / 1000.0 / static_cast<double>(histogram.count);
}

void draw_progress(double fraction) {
  const int filled = static_cast<int>(fraction * kProgressBarWidth);
  std::fprintf(stderr, "\r[%-*s] %3d%%", kProgressBarWidth, std::string(static_cast<std::size_t>(filled), '#').c_str(),
               static_cast<int>(fraction * 100));
  std::fflush(stderr);
}

nlohmann::ordered_json to_json(const sim::ScenarioResult& result, double wall_s) {
  nlohmann::ordered_json out;
  out["scenario"] = result.scenario;
  out["seed"] = result.seed;
  out["clients"] = result.clients;
  out["flavor"] = result.flavor;
  out["virtual_ms"] = result.virtual_ms;
  out["wall_ms"] = static_cast<std::int64_t>(wall_s * 1000);
  out["events"] = result.events;
  out["acquisitions"] = result.acquisitions;
  out["handoffs"] = result.handoffs;
  out["mutual_exclusion_violations"] = result.mutual_exclusion_violations;
  out["fifo_violations"] = result.fifo_violations;
  out["fencing_violations"] = result.fencing_violations;
  out["permit_violations"] = result.permit_violations;
  out["liveness_violations"] = result.liveness_violations;
  out["belief_violations"] = result.belief_violations;
  out["belief_overlaps_while_paused"] = result.belief_overlaps_while_paused;
  out["unexpected_violations"] = result.unexpected_violations;
  out["stale_writes_rejected"] = result.stale_writes_rejected;
  out["faults_injected"] = result.faults_injected;
  nlohmann::ordered_json facts = nlohmann::ordered_json::object();
  for (const auto& [name, value] : result.facts) facts[name] = value;
  out["facts"] = facts;
  nlohmann::ordered_json violations = nlohmann::ordered_json::array();
  for (const sim::Violation& violation : result.violations) violations.push_back(violation.report());
  out["violations"] = violations;
  out["summary"] = result.summary;
  out["trace_sha256"] = result.trace_sha256;
  const MetricsSnapshot metrics = total_metrics(result);
  out["metrics"] = {
      {"acquisitions", metrics.total_acquisitions()},
      {"failed_tries", metrics.failed_tries},
      {"unreplicated_grants", metrics.unreplicated_grants},
      {"handoffs_received", metrics.handoffs_received},
      {"renewals", metrics.renewals},
      {"renewal_failures", metrics.renewal_failures},
      {"locks_lost", metrics.total_locks_lost()},
      {"reconnects", metrics.reconnects},
      {"script_reloads", metrics.script_reloads},
      {"script_calls", metrics.script_round_trip.count},
      {"acquire_wait_mean_ms", mean_ms(metrics.acquire_wait)},
      {"handoff_gap_mean_ms", mean_ms(metrics.handoff_gap)},
  };
  return out;
}

void print_report(const sim::ScenarioResult& result, const SimOptions& options, const sim::ScenarioOptions& scenario,
                  double wall_s) {
  std::printf("scenario      %s (flavor %s, seed %llu, %zu clients)\n", result.scenario.c_str(), result.flavor.c_str(),
              static_cast<unsigned long long>(result.seed), result.clients);
  std::printf("result        %s\n", result.summary.c_str());
  std::printf("time          %lld virtual ms in %.3f s wall, %llu events\n", static_cast<long long>(result.virtual_ms),
              wall_s, static_cast<unsigned long long>(result.events));
  std::printf("acquisitions  %llu (%llu handoffs)\n", static_cast<unsigned long long>(result.acquisitions),
              static_cast<unsigned long long>(result.handoffs));
  for (const auto& [name, value] : result.facts)
    std::printf("  %-24s %lld\n", name.c_str(), static_cast<long long>(value));
  std::printf(
      "checkers      mutual exclusion %llu, fifo %llu, fencing %llu, permits %llu, liveness %llu, "
      "belief overlap %llu (%llu more with a paused holder)\n",
      static_cast<unsigned long long>(result.mutual_exclusion_violations),
      static_cast<unsigned long long>(result.fifo_violations),
      static_cast<unsigned long long>(result.fencing_violations),
      static_cast<unsigned long long>(result.permit_violations),
      static_cast<unsigned long long>(result.liveness_violations),
      static_cast<unsigned long long>(result.belief_violations),
      static_cast<unsigned long long>(result.belief_overlaps_while_paused));
  for (const sim::Violation& violation : result.violations) std::printf("  %s\n", violation.report().c_str());
  const MetricsSnapshot metrics = total_metrics(result);
  std::printf(
      "metrics       %llu script calls, %llu renewals (%llu failed), %llu locks lost, %llu reconnects, "
      "%llu script reloads; acquire wait mean %.1f ms, handoff gap mean %.1f ms\n",
      static_cast<unsigned long long>(metrics.script_round_trip.count),
      static_cast<unsigned long long>(metrics.renewals), static_cast<unsigned long long>(metrics.renewal_failures),
      static_cast<unsigned long long>(metrics.total_locks_lost()), static_cast<unsigned long long>(metrics.reconnects),
      static_cast<unsigned long long>(metrics.script_reloads), mean_ms(metrics.acquire_wait),
      mean_ms(metrics.handoff_gap));
  std::printf("trace         sha256 %s\n", result.trace_sha256.c_str());
  if (!result.trace_tail.empty()) {
    std::printf("last events\n");
    for (const std::string& line : result.trace_tail) std::printf("  %s\n", line.c_str());
  }
  if (!options.trace_path.empty())
    std::printf("timeline      %s (open in https://ui.perfetto.dev)\n", options.trace_path.c_str());
  if (!options.metrics_path.empty())
    std::printf("client metrics %s (Prometheus text, one series per client)\n", options.metrics_path.c_str());
  // The swarm's replay line (one builder), with the clients the run had.
  sim::ScenarioOptions replayed = scenario;
  replayed.clients = result.clients;
  std::printf("replay        %s\n", sim::replay_command(replayed).c_str());
  std::printf("verdict       %s\n", result.unexpected_violations == 0 ? "ok" : "UNEXPECTED VIOLATION");
}

std::string kind_counts(const std::array<std::uint64_t, sim::kViolationKinds>& counts) {
  std::string text;
  for (std::size_t kind = 0; kind < counts.size(); ++kind) {
    if (counts[kind] == 0) continue;
    if (!text.empty()) text += ", ";
    text +=
        std::string(sim::violation_name(static_cast<sim::ViolationKind>(kind))) + " " + std::to_string(counts[kind]);
  }
  return text.empty() ? "none" : text;
}

// --hours: a positive number of hours, at most a week.
double parse_hours(const std::string& text) {
  std::size_t used = 0;
  double hours = 0;
  try {
    hours = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(hours > 0 && hours <= kMaxSwarmHours)) {
    throw UsageError("--hours must be a number of hours within 0..168, not " + in_quotes(text));
  }
  return hours;
}

// The flavor x fault kind table ("-": never drawn, fault_kind_left_out()
// says why, below it), the scenarios and the BUGGIFY points.
void print_swarm_draws(const sim::SwarmSummary& summary) {
  std::vector<std::string_view> kinds = sim::fault_kind_names();
  kinds.insert(kinds.begin(), "none");
  const auto width = [](std::string_view kind) { return static_cast<int>(std::max<std::size_t>(kind.size(), 4)); };
  std::printf("drawn         runs by flavor x fault kind (a run counts once per kind in its plan; - never drawn)\n");
  std::printf("  %-20s %6s", "flavor", "runs");
  for (const std::string_view kind : kinds) std::printf(" %*s", width(kind), std::string(kind).c_str());
  std::printf("\n");
  for (const auto& [flavor, runs] : summary.runs_by_flavor) {
    std::printf("  %-20s %6llu", flavor.c_str(), static_cast<unsigned long long>(runs));
    const auto found = summary.runs_by_flavor_and_fault.find(flavor);
    const std::optional<Flavor> parsed = parse_flavor(flavor);
    for (const std::string_view kind : kinds) {
      std::uint64_t count = 0;
      if (found != summary.runs_by_flavor_and_fault.end()) {
        const auto cell = found->second.find(std::string(kind));
        if (cell != found->second.end()) count = cell->second;
      }
      if (count == 0 && parsed && sim::fault_kind_left_out(*parsed, kind)) {
        std::printf(" %*s", width(kind), "-");
      } else {
        std::printf(" %*llu", width(kind), static_cast<unsigned long long>(count));
      }
    }
    std::printf("\n");
  }
  // Why each "-": the fault kinds left out for the same flavors and reason
  // on one line, in the table's order.
  std::vector<std::tuple<std::string_view, std::string, std::string>> left_out;  // reason, flavors, kinds
  for (const std::string_view kind : kinds) {
    std::map<std::string_view, std::pair<std::size_t, std::string>> flavors_by_reason;
    for (const FlavorTraits& traits : kFlavorTable) {
      const std::optional<std::string_view> reason = sim::fault_kind_left_out(traits.flavor, kind);
      if (!reason) continue;
      auto& [count, flavors] = flavors_by_reason[*reason];
      ++count;
      flavors += (flavors.empty() ? "" : ", ") + std::string(flavor_name(traits.flavor));
    }
    for (const auto& [reason, flavors] : flavors_by_reason) {
      const std::string who = flavors.first == kFlavorTable.size() ? "every flavor" : flavors.second;
      // `reason` captured by name: Clang 14 captures no structured binding.
      const auto same = std::find_if(left_out.begin(), left_out.end(), [&, &reason = reason](const auto& line) {
        return std::get<0>(line) == reason && std::get<1>(line) == who;
      });
      if (same == left_out.end()) {
        left_out.emplace_back(reason, who, std::string(kind));
      } else {
        std::get<2>(*same) += ", " + std::string(kind);
      }
    }
  }
  for (const auto& [reason, who, left_out_kinds] : left_out) {
    std::printf("  - %s (%s): %s\n", left_out_kinds.c_str(), who.c_str(), std::string(reason).c_str());
  }
  std::string scenarios;
  for (const auto& [scenario, runs] : summary.runs_by_scenario) {
    scenarios += (scenarios.empty() ? "" : ", ") + scenario + " " + std::to_string(runs);
  }
  std::printf("scenarios     %s\n", scenarios.c_str());
  std::printf("lock-delay    %llu runs (ScenarioOptions::lock_delay; the composite locks draw none)\n",
              static_cast<unsigned long long>(summary.runs_with_lock_delay));
  std::printf("buggify       runs enabled / reached / fired (times fired)\n");
  for (const sim::SwarmBuggify& point : summary.buggify) {
    std::printf("  %-32s %llu / %llu / %llu (%llu)\n", std::string(point.point).c_str(),
                static_cast<unsigned long long>(point.runs_enabled),
                static_cast<unsigned long long>(point.runs_reached), static_cast<unsigned long long>(point.runs_fired),
                static_cast<unsigned long long>(point.fired));
  }
}

int swarm_command(const SimOptions& options) {
  sim::SwarmOptions swarm;
  swarm.runs = options.swarm.empty() ? sim::SwarmOptions::kMaxRuns : parse_count(options.swarm, "--swarm");
  swarm.seed = options.seed;
  swarm.fair_handoff = parse_fair_handoff(options.fair_handoff);
  swarm.fleet_handoff = parse_fleet_handoff(options.fleet_handoff);
  if (!options.faults.empty()) swarm.fault_mixes = {options.faults};
  if (!options.scenario.empty()) swarm.scenarios = {options.scenario};
  if (!options.until_handoffs.empty()) swarm.until_handoffs = parse_count(options.until_handoffs, "--until-handoffs");
  const auto started = std::chrono::steady_clock::now();
  if (!options.hours.empty()) {
    const auto limit = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double, std::ratio<3600>>(parse_hours(options.hours)));
    swarm.keep_going = [started, limit] { return std::chrono::steady_clock::now() - started < limit; };
  }
  std::FILE* failures_file = nullptr;
  if (!options.failures_file.empty()) {
    failures_file = std::fopen(options.failures_file.c_str(), "a");
    if (failures_file == nullptr) {
      throw Error("--failures-file: cannot append to " + in_quotes(options.failures_file) + ": " +
                  std::strerror(errno));
    }
  }
  const bool show_progress = isatty(STDERR_FILENO) != 0 && options.hours.empty() && options.until_handoffs.empty();
  swarm.on_run = [&](const sim::SwarmRun& run) {
    if (run.failed()) {
      if (show_progress) std::fprintf(stderr, "\r%*s\r", kProgressBarWidth + 8, "");
      std::string what = run.error;
      for (const sim::Violation& violation : run.result.violations) {
        if (what.empty() && !violation.expected) what = violation.report();
      }
      std::printf("FAIL run %llu: %s\n  replay: %s\n", static_cast<unsigned long long>(run.index), what.c_str(),
                  run.replay.c_str());
      std::fflush(stdout);
      if (failures_file != nullptr) {
        // One line per failed run, flushed at once: an unattended swarm
        // killed later loses nothing it found.
        std::fprintf(failures_file, "%s  # %s\n", run.replay.c_str(), what.c_str());
        std::fflush(failures_file);
      }
    }
    if (show_progress) draw_progress(static_cast<double>(run.index + 1) / static_cast<double>(swarm.runs));
  };
  sim::SwarmSummary summary;
  try {
    summary = sim::run_swarm(swarm);
  } catch (...) {
    if (failures_file != nullptr) std::fclose(failures_file);
    throw;
  }
  if (failures_file != nullptr) std::fclose(failures_file);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (show_progress) std::fprintf(stderr, "\r%*s\r", kProgressBarWidth + 8, "");
  const std::uint64_t done = summary.runs + summary.skipped;
  std::printf("swarm         %llu runs (%llu refused combinations skipped), seeds %llu..%llu, faults %s\n",
              static_cast<unsigned long long>(summary.runs), static_cast<unsigned long long>(summary.skipped),
              static_cast<unsigned long long>(swarm.seed),
              static_cast<unsigned long long>(swarm.seed + std::max<std::uint64_t>(done, 1) - 1),
              options.faults.empty() ? "any mix" : options.faults.c_str());
  print_swarm_draws(summary);
  std::printf("simulated     %llu handoffs, %llu acquisitions, %llu events, %.1f virtual hours, %llu faults injected\n",
              static_cast<unsigned long long>(summary.handoffs), static_cast<unsigned long long>(summary.acquisitions),
              static_cast<unsigned long long>(summary.events), static_cast<double>(summary.virtual_ms) / 3.6e6,
              static_cast<unsigned long long>(summary.faults_injected));
  std::printf("violations    unexpected: %s; expected: %s; belief overlaps with a paused holder: %llu\n",
              kind_counts(summary.unexpected).c_str(), kind_counts(summary.expected).c_str(),
              static_cast<unsigned long long>(summary.belief_overlaps_while_paused));
  std::printf("wall          %.3f s, %.0f handoffs per wall second\n", wall_s,
              wall_s > 0 ? static_cast<double>(summary.handoffs) / wall_s : 0.0);
  std::printf("verdict       %s\n",
              summary.failed == 0 ? "ok" : (std::to_string(summary.failed) + " FAILED RUN(S)").c_str());
  return summary.failed == 0 ? 0 : kExitViolation;
}

}  // namespace

void add_sim_options(CLI::App& app, SimOptions& options) {
  CLI::App* sim = &app;
  std::string scenario_names;
  for (const sim::ScenarioInfo& info : sim::scenario_catalog()) {
    scenario_names += (scenario_names.empty() ? "" : ", ") + std::string(info.name);
  }
  sim->add_option("--scenario", options.scenario, scenario_names + " (--list describes them)");
  sim->add_option("--seed", options.seed, "Random seed; the same seed replays the same run")
      ->check(CLI::Validator(
          [](const std::string& text) {
            return !text.empty() && text.front() == '-' ? std::string("must not be negative") : std::string();
          },
          "NON-NEGATIVE"));
  sim->add_option("--clients", options.clients, "Simulated clients (default: the scenario's)");
  sim->add_option("--duration", options.duration, "Virtual time, e.g. 90s, 10m, 1h (default: the scenario's)");
  sim->add_option("--flavor,--lock", options.flavor,
                  "One of " + flavor_names() +
                      " (default: the scenario's; read-write: writers take the write half, the read-write "
                      "scenarios mix in readers)");
  sim->add_option("--permits", options.permits, "Permits of the semaphores");
  sim->add_option("--nodes", options.nodes, "Independent servers of the RedLock (odd; default 5)");
  sim->add_option("--down-nodes", options.down_nodes, "nodes-down: unreachable servers (default 2)");
  sim->add_flag("--replica-sync", options.replica_sync,
                "failover: acquisitions wait for the replica (WAIT) and are undone if it does not acknowledge");
  sim->add_option("--replica-lag", options.replica_lag, "failover: the replica's lag, e.g. 200ms (default 6s)");
  sim->add_option("--wake-scope", options.wake_scope,
                  "fleet (default) or process: every simulated client's wake scope (fleet: one release wakes "
                  "one waiter of all the clients)");
  sim->add_option("--fair-handoff", options.fair_handoff,
                  "direct or announce: how every fair lock's waiters take a released lock (default: the "
                  "library's; FairLockOptions::handoff)");
  sim->add_option("--fleet-handoff", options.fleet_handoff,
                  "direct or announce: how every client's reentrant locks and crash-safe semaphores hand a "
                  "release on to a registered process with --wake-scope fleet (default: the library's "
                  "ClientOptions::fleet_handoff, for both; ClientOptions::permit_handoff)");
  sim->add_option(
      "--lock-delay", options.lock_delay,
      "every simulated client's lock-delay (per client or per lock, alternately), e.g. 45s: gc-pause shows the "
      "overlaps it removes (default: none)");
  sim->add_option("--faults", options.faults,
                  "Random faults: none, lossy, crashes, partitions, chaos or random (a mix drawn from the seed)");
  sim->add_option("--swarm", options.swarm,
                  "Run this many random scenario x flavor x fault runs (seeds --seed, --seed + 1, ...), "
                  "with BUGGIFY");
  sim->add_option("--hours", options.hours,
                  "Swarm: stop after this many hours of wall time (e.g. 8 or 0.5); without --swarm, runs "
                  "until then");
  sim->add_option("--failures-file", options.failures_file,
                  "Swarm: append each failed run's replay command and first report to this file");
  sim->add_option("--until-handoffs", options.until_handoffs,
                  "Swarm: stop after the run that brings the handoffs simulated to this many");
  sim->add_flag("--buggify", options.buggify,
                "Enable BUGGIFY: fault points inside the library and the fake Redis, drawn from the seed");
  sim->add_option("--trace", options.trace_path, "Write a Chrome trace-event JSON timeline (Perfetto) here");
  sim->add_flag("--trace-commands", options.trace_commands,
                "With --trace: a span per script or command call (client, script, keys, reply kind)");
  sim->add_option("--metrics", options.metrics_path,
                  "Write every simulated client's metrics here, in the Prometheus text format");
  sim->add_flag("--json", options.json, "Print one JSON object instead of the report");
  sim->add_flag("--check-determinism", options.check_determinism, "Run twice and compare the trace hashes");
  sim->add_flag("--list", options.list, "List the scenarios");
}

int sim_command(const SimOptions& options) {
  if (options.list) {
    for (const sim::ScenarioInfo& info : sim::scenario_catalog()) {
      std::printf("%-20s %s (default %zu clients)\n", std::string(info.name).c_str(),
                  std::string(info.description).c_str(), info.default_clients);
    }
    return 0;
  }
  try {
    if (!options.swarm.empty() || !options.hours.empty()) return swarm_command(options);
    if (!options.failures_file.empty() || !options.until_handoffs.empty()) {
      throw UsageError("--failures-file and --until-handoffs go with --swarm or --hours");
    }
    if (options.scenario.empty()) throw UsageError("--scenario is required (see turnstile sim --list)");
    sim::ScenarioOptions scenario = to_scenario_options(options);
    if (!scenario.trace_path.empty()) check_writable(scenario.trace_path, "--trace");
    if (!options.metrics_path.empty()) check_writable(options.metrics_path, "--metrics");
    const bool show_progress = !options.json && isatty(STDERR_FILENO) != 0;
    if (show_progress) scenario.progress = draw_progress;
    const auto started = std::chrono::steady_clock::now();
    sim::ScenarioResult result;
    if (options.check_determinism) {
      if (!sim::check_determinism(scenario, &result)) {
        std::fprintf(stderr, "turnstile sim: NOT deterministic: two runs of seed %llu made different traces\n",
                     static_cast<unsigned long long>(scenario.seed));
        return kExitViolation;
      }
    }
    result = sim::run_scenario(scenario);
    if (!options.metrics_path.empty()) write_metrics(result, options.metrics_path);
    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (show_progress) std::fprintf(stderr, "\r%*s\r", kProgressBarWidth + 8, "");
    if (options.json) {
      nlohmann::ordered_json out = to_json(result, wall_s);
      if (options.check_determinism) out["deterministic"] = true;
      std::printf("%s\n", out.dump().c_str());
    } else {
      if (options.check_determinism) std::printf("determinism   two runs, same trace hash\n");
      print_report(result, options, scenario, wall_s);
    }
    return result.unexpected_violations == 0 ? 0 : kExitViolation;
  } catch (const UsageError& error) {
    std::fprintf(stderr, "turnstile sim: %s\n", error.what());
    return kExitUsage;
  } catch (const InvalidArgumentError& error) {
    std::fprintf(stderr, "turnstile sim: %s\n", error.what());
    return kExitUsage;
  } catch (const Error& error) {
    std::fprintf(stderr, "turnstile sim: %s\n", error.what());
    return kExitIo;
  }
}

}  // namespace turnstile::cli
