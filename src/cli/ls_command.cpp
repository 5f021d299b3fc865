// `turnstile ls`: every lock under a pattern (cli/ls_command.h).

#include "cli/ls_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/duration.h"
#include "cli/exit_status.h"
#include "cli/holder_identity.h"
#include "cli/status_command.h"
#include "turnstile/errors.h"

namespace turnstile::cli {
namespace {

// Where the holders are: "host:pid" each ("?" without an identity), at
// most kMaxHoldersShown of them; "-" when none.
constexpr std::size_t kMaxHoldersShown = 3;
std::string holders_of(const Inspection& seen) {
  if (seen.holders.empty()) return "-";
  std::string text;
  for (std::size_t i = 0; i < seen.holders.size() && i < kMaxHoldersShown; ++i) {
    text += (i == 0 ? "" : ",") + holder_host_pid(seen.holders[i].identity);
  }
  if (seen.holders.size() > kMaxHoldersShown) text += ",+" + std::to_string(seen.holders.size() - kMaxHoldersShown);
  return text;
}

// The LEASE cell: the time left on it, and the holders' lock-delay it includes (the
// longest, when several holders name one): "44.9s (lock-delay 15s)".
std::string lease_of(const Inspection& seen) {
  if (!seen.remaining_lease) return "-";
  std::int64_t delay_ms = 0;
  for (const LockHolder& holder : seen.holders) {
    if (holder.identity) delay_ms = std::max(delay_ms, holder.identity->lock_delay_ms);
  }
  const std::string lease = readable_duration(*seen.remaining_lease);
  return delay_ms > 0 ? lease + " (lock-delay " + format_duration(std::chrono::milliseconds(delay_ms)) + ")" : lease;
}

// One row of the table, as printed.
std::vector<std::string> row_of(const Inspection& seen) {
  const bool semaphore = seen.permits_available.has_value();
  const std::string flavor = seen.flavor ? std::string(flavor_name(*seen.flavor)) : "free";
  return {printable(seen.name),
          flavor + (seen.could_be.size() > 1 ? "?" : ""),
          std::to_string(semaphore ? seen.permits_held : seen.holder_count),
          std::to_string(seen.queue_length),
          semaphore ? std::to_string(*seen.permits_available) : "-",
          lease_of(seen),
          holders_of(seen)};
}

}  // namespace

std::string ls_text(const LockListing& listing) {
  std::vector<std::vector<std::string>> rows = {{"NAME", "FLAVOR", "HELD", "WAITING", "AVAILABLE", "LEASE", "HOLDER"}};
  for (const Inspection& seen : listing.locks) rows.push_back(row_of(seen));
  std::vector<std::size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (std::size_t column = 0; column < row.size(); ++column) {
      widths[column] = std::max(widths[column], row[column].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t column = 0; column < row.size(); ++column) {
      line += row[column];
      if (column + 1 < row.size()) line += std::string(widths[column] - row[column].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string ls_json(const LockListing& listing, const std::string& redis, const std::string& pattern) {
  nlohmann::ordered_json out;
  out["redis"] = redis;
  out["pattern"] = pattern;
  out["complete"] = listing.complete;
  nlohmann::ordered_json locks = nlohmann::ordered_json::array();
  for (const Inspection& seen : listing.locks) {
    nlohmann::ordered_json entry;
    fill_status_object(entry, seen, redis, nullptr);
    entry.erase("redis");  // once, above
    locks.push_back(std::move(entry));
  }
  out["locks"] = std::move(locks);
  return out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

CLI::App* add_ls_command(CLI::App& app, LsOptions& options) {
  CLI::App* ls = app.add_subcommand(
      "ls",
      "turnstile ls [PATTERN]\nList every lock, semaphore and fair queue whose name matches PATTERN (a Redis glob, "
      "default *), on every master: SCAN with a bounded COUNT, never KEYS. A kind ending in ? is the first that fits "
      "where Redis alone cannot tell (status NAME names the others)");
  add_redis_option(*ls, options.redis);
  ls->add_option("pattern", options.pattern, "a glob over names: * ? [abc] \\x (default: *)");
  ls->add_flag("--json", options.json, "print one JSON object: \"locks\" as `status --json` shows each");
  ls->add_option("--limit", options.limit,
                 "list at most N locks (default 1000; other keys at matching names do not count)")
      ->check(CLI::Range(std::size_t{1}, kMaxListedNames));
  return ls;
}

int ls_command(const LsOptions& options) {
  ErrorContext context{.redis = {}, .name = options.pattern};
  try {
    if (options.pattern.empty()) throw UsageError("the pattern must not be empty (every name: '*')");
    std::shared_ptr<Backend> backend = make_backend(options.redis);
    context.redis = backend->describe();
    const LockListing listing = list_locks(*backend, {.pattern = options.pattern, .max_names = options.limit});
    const std::string out = options.json ? ls_json(listing, context.redis, options.pattern) : ls_text(listing);
    std::fwrite(out.data(), 1, out.size(), stdout);
    if (!listing.complete) {
      std::fprintf(stderr, "turnstile: more locks match %s than --limit %zu lists\n",
                   in_quotes(options.pattern).c_str(), options.limit);
    }
    return kExitSuccess;
  } catch (...) {
    return report_error(std::current_exception(), context);
  }
}

}  // namespace turnstile::cli
