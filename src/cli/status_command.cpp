// `turnstile status`: text or JSON.

#include "cli/status_command.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "cli/command_common.h"
#include "cli/duration.h"
#include "cli/exit_status.h"
#include "cli/holder_identity.h"
#include "cli/signals.h"
#include "turnstile/errors.h"

namespace turnstile::cli {
namespace {

nlohmann::json optional_integer(const std::optional<std::int64_t>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

std::string optional_text(const std::optional<std::int64_t>& value, std::string_view unit = "") {
  return value ? std::to_string(*value) + std::string(unit) : "none";
}

// An instant for JSON: ISO 8601 in UTC, or null.
nlohmann::json optional_instant(const std::optional<std::int64_t>& epoch_ms) {
  return epoch_ms ? nlohmann::json(iso8601_utc(*epoch_ms)) : nlohmann::json(nullptr);
}

// An instant for people: this host's local time, or "none".
std::string instant_text(const std::optional<std::int64_t>& epoch_ms) {
  return epoch_ms ? local_time_text(*epoch_ms) : "none";
}

// Moves the cursor home and clears the terminal (ANSI), as watch(1) does.
constexpr std::string_view kClearScreen = "\x1b[H\x1b[2J";

std::chrono::milliseconds watch_interval(const StatusOptions& options) {
  if (!options.interval) return kDefaultWatchInterval;
  const std::chrono::milliseconds interval = parse_duration(*options.interval, "--interval");
  if (interval < kMinWatchInterval) {
    throw UsageError("--interval: " + *options.interval + " is shorter than the minimum, " +
                     format_duration(kMinWatchInterval));
  }
  return interval;
}

bool is_lock(std::optional<Flavor> flavor) { return flavor && !is_semaphore(*flavor); }

// The flavor line: the flavor ("free" when nothing is at the name), and
// the others that fit as well.
std::string flavor_text(const Inspection& inspection) {
  std::string text = inspection.flavor ? std::string(flavor_name(*inspection.flavor)) : std::string("free");
  if (inspection.could_be.size() <= 1) return text;
  std::string others;
  for (std::size_t i = 1; i < inspection.could_be.size(); ++i) {
    others += (i == 1 ? "" : ", ") + std::string(flavor_name(inspection.could_be[i]));
  }
  return text + " (or " + others + ": Redis alone cannot tell; --flavor or --config says which)";
}

// The name as it is, or in_quotes() form if it has a byte a terminal line
// should not carry.
nlohmann::ordered_json server_object(const ServerSafety& server) {
  nlohmann::ordered_json masters = nlohmann::ordered_json::array();
  for (const MasterSafety& master : server.masters) {
    nlohmann::ordered_json entry = {
        {"node", master.node},
        {"risk", std::string(eviction_risk_name(master.risk))},
        {"maxmemory_policy", master.maxmemory_policy.empty() ? nlohmann::ordered_json(nullptr)
                                                             : nlohmann::ordered_json(master.maxmemory_policy)},
        {"maxmemory", optional_integer(master.maxmemory)}};
    if (!master.reason.empty()) entry["reason"] = master.reason;
    masters.push_back(std::move(entry));
  }
  return {{"risk", std::string(eviction_risk_name(server.risk))}, {"masters", std::move(masters)}};
}

// A holder's identity for JSON: {host, pid, command, started_at, label},
// or null (none: foreign, older, a reader).
nlohmann::ordered_json identity_object(const std::optional<HolderIdentity>& identity) {
  if (!identity) return nullptr;
  return {
      {"host", identity->host},
      {"pid", identity->pid},
      {"command", identity->command},
      {"started_at", iso8601_utc(identity->started_at_epoch_ms)},
      {"started_at_epoch_ms", identity->started_at_epoch_ms},
      {"label", identity->label.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(identity->label)},
      {"lock_delay_ms", identity->lock_delay_ms}};
}

std::string dump_json(const nlohmann::ordered_json& object, int indent) {
  return object.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace

void fill_status_object(nlohmann::ordered_json& out, const Inspection& inspection, const std::string& redis,
                        const ServerSafety* server) {
  out["name"] = inspection.name;
  out["redis"] = redis;
  if (server != nullptr) {
    out["server"] = server_object(*server);
    if (server->evicts_locks()) out["warning"] = unsafe_server_message(*server);
  }
  out["flavor"] = inspection.flavor ? nlohmann::ordered_json(flavor_name(*inspection.flavor)) : nullptr;
  nlohmann::ordered_json could_be = nlohmann::ordered_json::array();
  for (const Flavor flavor : inspection.could_be) could_be.push_back(flavor_name(flavor));
  out["could_be"] = std::move(could_be);
  out["remaining_lease_ms"] =
      inspection.remaining_lease ? nlohmann::ordered_json(inspection.remaining_lease->count()) : nullptr;
  nlohmann::ordered_json holders = nlohmann::ordered_json::array();
  for (const LockHolder& holder : inspection.holders) {
    nlohmann::ordered_json entry = {
        {"owner", holder.owner}, {"hold_count", holder.hold_count}, {"foreign", holder.foreign}};
    if (inspection.mode) entry["writes"] = holder.writes;
    entry["holder"] = identity_object(holder.identity);
    holders.push_back(std::move(entry));
  }
  if (inspection.mode) out["mode"] = *inspection.mode;
  out["holder_count"] = inspection.holder_count;
  out["holders"] = std::move(holders);
  out["queue_length"] = inspection.queue_length;
  nlohmann::ordered_json queue = nlohmann::ordered_json::array();
  for (const QueuedWaiter& waiter : inspection.queue) {
    queue.push_back({{"position", waiter.position},
                     {"owner", waiter.owner},
                     {"deadline_epoch_ms", optional_integer(waiter.deadline_epoch_ms)},
                     {"deadline_at", optional_instant(waiter.deadline_epoch_ms)},
                     {"holder", identity_object(waiter.identity)}});
  }
  out["queue"] = std::move(queue);
  out["last_fencing_token"] = optional_integer(inspection.last_fencing_token);
  out["permits_available"] = optional_integer(inspection.permits_available);
  out["permits_held"] = inspection.permits_held;
  nlohmann::ordered_json permits = nlohmann::ordered_json::array();
  for (const PermitSeen& permit : inspection.permits) {
    permits.push_back({{"id", permit.id},
                       {"expiry_epoch_ms", optional_integer(permit.expiry_epoch_ms)},
                       {"expiry_at", optional_instant(permit.expiry_epoch_ms)},
                       {"holder", identity_object(permit.identity)}});
  }
  out["permits"] = std::move(permits);
  out["notes"] = inspection.notes;
  // JSON strings are UTF-8; a name that is not is carried with U+FFFD in
  // place of each bad byte, and exactly in "name_escaped".
  if (printable(inspection.name) != inspection.name) out["name_escaped"] = in_quotes(inspection.name);
}

std::string status_json(const Inspection& inspection, const std::string& redis, const ServerSafety* server) {
  nlohmann::ordered_json out;
  fill_status_object(out, inspection, redis, server);
  return dump_json(out, 2);
}

std::string status_json_line(const Inspection& inspection, const std::string& redis, std::int64_t observed_at_epoch_ms,
                             const ServerSafety* server) {
  nlohmann::ordered_json out;
  out["observed_at_epoch_ms"] = observed_at_epoch_ms;
  out["observed_at"] = iso8601_utc(observed_at_epoch_ms);
  fill_status_object(out, inspection, redis, server);
  return dump_json(out, -1);
}

std::string status_text(const Inspection& inspection, const std::string& redis, const ServerSafety* server) {
  std::string out;
  auto line = [&out](std::string_view key, const std::string& value) {
    out += std::string(key) + ":" + std::string(key.size() < 12 ? 12 - key.size() : 1, ' ') + value + "\n";
  };
  line("name", printable(inspection.name));
  line("redis", redis);
  if (server != nullptr) {
    line("memory", describe_policy(*server) + " (" + std::string(eviction_risk_name(server->risk)) + ")");
    if (server->evicts_locks()) line("warning", unsafe_server_message(*server));
  }
  line("flavor", flavor_text(inspection));
  if (is_lock(inspection.flavor)) {
    line("lease left", inspection.remaining_lease ? readable_duration(*inspection.remaining_lease) : "none");
    if (inspection.mode) line("mode", *inspection.mode);
    line("holders", std::to_string(inspection.holder_count));
    for (const LockHolder& holder : inspection.holders) {
      const std::string half = inspection.mode ? (holder.writes ? "writes, " : "reads, ") : "";
      const std::string foreign = holder.foreign ? ", foreign owner" : "";
      line("  holder",
           printable(holder.owner) + " (" + half + "hold count " + std::to_string(holder.hold_count) + foreign + ")");
      line("    by", holder_identity_text(holder.identity));
    }
    if (inspection.last_fencing_token)
      line("fencing", "last token issued " + optional_text(inspection.last_fencing_token));
  }
  if ((inspection.flavor && queues_waiters(*inspection.flavor)) || inspection.queue_length > 0) {
    line("queue", std::to_string(inspection.queue_length) + " waiting");
    for (const QueuedWaiter& waiter : inspection.queue) {
      line("  #" + std::to_string(waiter.position),
           printable(waiter.owner) + " (queue deadline " + instant_text(waiter.deadline_epoch_ms) + ")");
      line("    by", holder_identity_text(waiter.identity));
    }
  }
  if (inspection.permits_available) {
    line("available", std::to_string(*inspection.permits_available) + " permits");
    if (inspection.flavor && has_leased_permits(*inspection.flavor) && inspection.could_be.size() == 1) {
      line("held", std::to_string(inspection.permits_held) + " permits");
      for (const PermitSeen& permit : inspection.permits) {
        line("  permit", permit.id + " (expires at " + instant_text(permit.expiry_epoch_ms) + ")");
        line("    by", holder_identity_text(permit.identity));
      }
    }
  }
  for (const std::string& note : inspection.notes) line("note", note);
  return out;
}

CLI::App* add_status_command(CLI::App& app, StatusOptions& options) {
  CLI::App* status = app.add_subcommand("status", "Show what is at NAME: flavor, holders, lease left, queue, permits");
  add_redis_option(*status, options.redis);
  add_flavor_options(*status, options.flavor);
  add_name_argument(*status, options.name);
  status->add_flag("--json", options.json, "print one JSON object (with --watch: one per line)");
  CLI::Option* watch =
      status->add_flag("--watch", options.watch, "show it again every --interval until interrupted (Ctrl-C)");
  status
      ->add_option("--interval", options.interval, "with --watch: time between snapshots (default 1s, at least 100ms)")
      ->needs(watch);
  status->add_option("--count", options.count, "with --watch: stop after this many snapshots")
      ->check(CLI::Range(std::int64_t{1}, kMaxWatchCount))
      ->needs(watch);
  return status;
}

namespace {

std::int64_t now_epoch_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "2026-11-25 07:10:03 UTC".
std::string utc_time_text(std::int64_t epoch_ms) {
  const std::time_t seconds = static_cast<std::time_t>(epoch_ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S UTC", &utc);
  return text;
}

// One snapshot of a watch, as printed. A Redis that cannot be reached is a
// snapshot too; any other error ends the watch (rethrown).
std::string watch_snapshot(Backend& backend, const StatusOptions& options, const InspectOptions& inspect_options,
                           const std::string& redis, bool terminal) {
  const std::int64_t observed_at_epoch_ms = now_epoch_ms();
  std::string header;
  if (!options.json) {
    header = terminal ? std::string(kClearScreen) + "every " + format_duration(watch_interval(options)) + ", " +
                            utc_time_text(observed_at_epoch_ms) + " (Ctrl-C to stop)\n\n"
                      : "--- " + utc_time_text(observed_at_epoch_ms) + "\n";
  }
  try {
    const Inspection inspection = inspect(backend, options.name, inspect_options);
    const ServerSafety server = check_server(backend);
    if (options.json) return status_json_line(inspection, redis, observed_at_epoch_ms, &server);
    return header + status_text(inspection, redis, &server);
  } catch (const ConnectionError& unreachable) {
    const std::string error = "cannot reach Redis at " + redis + ": " + unreachable.what();
    if (options.json) {
      const nlohmann::ordered_json line = {
          {"observed_at_epoch_ms", observed_at_epoch_ms}, {"name", options.name}, {"redis", redis}, {"error", error}};
      return dump_json(line, -1);
    }
    return header + "error:       " + error + " (trying again)\n";
  }
}

// Waits `interval` or until a handled signal arrives; returns whether one
// did.
bool interrupted_within(SignalFd& signals, std::chrono::milliseconds interval) {
  const auto deadline = std::chrono::steady_clock::now() + interval;
  for (;;) {
    if (signals.read()) return true;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd readable{signals.fd(), POLLIN, 0};
    if (poll(&readable, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) {
      throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    }
  }
}

int watch_status(const StatusOptions& options, const InspectOptions& inspect_options, Backend& backend,
                 const std::string& redis) {
  const bool terminal = !options.json && isatty(STDOUT_FILENO) == 1;
  SignalFd signals;
  for (std::int64_t shown = 0; !options.count || shown < *options.count; ++shown) {
    if (shown > 0 && interrupted_within(signals, watch_interval(options))) break;
    const std::string snapshot = watch_snapshot(backend, options, inspect_options, redis, terminal);
    std::fputs(snapshot.c_str(), stdout);
    std::fflush(stdout);
    if (std::ferror(stdout)) break;  // the reader went away (a closed pipe)
  }
  return kExitSuccess;
}

}  // namespace

int status_command(const StatusOptions& options) {
  ErrorContext context{.redis = {}, .name = options.name};
  try {
    check_name(options.name);
    if (options.watch) {
      watch_interval(options);  // a bad --interval is a usage error before anything is sent
      // Before anything could start a thread: the signals reach only the
      // signalfd the watch waits on.
      block_handled_signals();
    }
    const InspectOptions inspect_options{.flavor = target_flavor(options.flavor, options.name)};
    std::shared_ptr<Backend> backend = make_backend(options.redis);
    context.redis = backend->describe();
    if (options.watch) return watch_status(options, inspect_options, *backend, context.redis);
    const Inspection inspection = inspect(*backend, options.name, inspect_options);
    const ServerSafety server = check_server(*backend);
    const std::string text = options.json ? status_json(inspection, context.redis, &server)
                                          : status_text(inspection, context.redis, &server);
    std::fputs(text.c_str(), stdout);
    if (server.evicts_locks()) {
      std::fprintf(stderr, "turnstile: warning: %s\n", unsafe_server_message(server).c_str());
    }
    return kExitSuccess;
  } catch (...) {
    return report_error(std::current_exception(), context);
  }
}

}  // namespace turnstile::cli
