// `turnstile status`: text or JSON.

#include "cli/status_command.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/command_common.h"
#include "cli/exit_status.h"
#include "turnstile/errors.h"

namespace turnstile::cli {
namespace {

nlohmann::json optional_integer(const std::optional<std::int64_t>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

std::string optional_text(const std::optional<std::int64_t>& value, std::string_view unit = "") {
  return value ? std::to_string(*value) + std::string(unit) : "none";
}

bool is_lock(std::optional<Flavor> flavor) { return flavor && !is_semaphore(*flavor); }

// The name as it is, or in_quotes() form if it has a byte a terminal line
// should not carry.
std::string printable_name(const std::string& name) {
  std::string quoted = in_quotes(name);
  return quoted.size() == name.size() + 2 ? name : quoted;
}

}  // namespace

std::string status_json(const Inspection& inspection, const std::string& redis) {
  nlohmann::ordered_json out;
  out["name"] = inspection.name;
  out["redis"] = redis;
  out["kind"] = status_kind_name(inspection.flavor);
  out["pttl_ms"] = optional_integer(inspection.pttl_ms);
  nlohmann::ordered_json holders = nlohmann::ordered_json::array();
  for (const Holder& holder : inspection.holders) {
    nlohmann::ordered_json entry = {{"owner", holder.owner}, {"hold_count", holder.hold_count}};
    if (inspection.mode) entry["writes"] = holder.writes;
    holders.push_back(std::move(entry));
  }
  if (inspection.mode) out["mode"] = *inspection.mode;
  out["holder_count"] = inspection.holder_count;
  out["holders"] = std::move(holders);
  out["queue_length"] = inspection.queue_length;
  nlohmann::ordered_json queue = nlohmann::ordered_json::array();
  for (const Waiter& waiter : inspection.queue) {
    queue.push_back({{"position", waiter.position},
                     {"owner", waiter.owner},
                     {"deadline_epoch_ms", optional_integer(waiter.deadline_epoch_ms)}});
  }
  out["queue"] = std::move(queue);
  out["last_fencing_token"] = optional_integer(inspection.last_fencing_token);
  out["permits_available"] = optional_integer(inspection.permits_available);
  out["permits_held"] = inspection.permits_held;
  nlohmann::ordered_json permits = nlohmann::ordered_json::array();
  for (const Permit& permit : inspection.permits) {
    permits.push_back({{"id", permit.id}, {"expiry_epoch_ms", optional_integer(permit.expiry_epoch_ms)}});
  }
  out["permits"] = std::move(permits);
  // JSON strings are UTF-8; a name that is not is carried with U+FFFD in
  // place of each bad byte, and exactly in "name_escaped".
  if (printable_name(inspection.name) != inspection.name) out["name_escaped"] = in_quotes(inspection.name);
  return out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string status_text(const Inspection& inspection, const std::string& redis) {
  std::string out;
  auto line = [&out](std::string_view key, const std::string& value) {
    out += std::string(key) + ":" + std::string(key.size() < 12 ? 12 - key.size() : 1, ' ') + value + "\n";
  };
  line("name", printable_name(inspection.name));
  line("redis", redis);
  line("kind", std::string(status_kind_name(inspection.flavor)));
  if (is_lock(inspection.flavor)) {
    line("ttl", optional_text(inspection.pttl_ms, " ms"));
    if (inspection.mode) line("mode", *inspection.mode);
    line("holders", std::to_string(inspection.holder_count));
    for (const Holder& holder : inspection.holders) {
      const std::string half = inspection.mode ? (holder.writes ? "writes, " : "reads, ") : "";
      line("  holder", holder.owner + " (" + half + "hold count " + std::to_string(holder.hold_count) + ")");
    }
    if (inspection.last_fencing_token)
      line("fencing", "last token issued " + optional_text(inspection.last_fencing_token));
  }
  if (inspection.flavor == Flavor::fair || inspection.queue_length > 0) {
    line("queue", std::to_string(inspection.queue_length) + " waiting");
    for (const Waiter& waiter : inspection.queue) {
      line("  #" + std::to_string(waiter.position),
           waiter.owner + " (queue deadline " + optional_text(waiter.deadline_epoch_ms, " ms since epoch") + ")");
    }
  }
  if (inspection.permits_available) {
    line("available", std::to_string(*inspection.permits_available) + " permits");
    if (inspection.flavor == Flavor::semaphore) {
      line("held", std::to_string(inspection.permits_held) + " permits");
      for (const Permit& permit : inspection.permits) {
        line("  permit", permit.id + " (expires at " + optional_text(permit.expiry_epoch_ms, " ms since epoch") + ")");
      }
    }
  }
  return out;
}

CLI::App* add_status_command(CLI::App& app, StatusOptions& options) {
  CLI::App* status = app.add_subcommand("status", "Show what is at NAME: kind, holders, ttl, queue, permits");
  add_redis_option(*status, options.redis);
  add_name_argument(*status, options.name);
  status->add_flag("--json", options.json, "print one JSON object");
  return status;
}

int status_command(const StatusOptions& options) {
  ErrorContext context{.redis = {}, .name = options.name};
  try {
    check_name(options.name);
    std::shared_ptr<Backend> backend = make_backend(options.redis);
    context.redis = backend->describe();
    const Inspection inspection = inspect(*backend, options.name);
    const std::string text =
        options.json ? status_json(inspection, context.redis) : status_text(inspection, context.redis);
    std::fputs(text.c_str(), stdout);
    return kExitSuccess;
  } catch (...) {
    return report_error(std::current_exception(), context);
  }
}

}  // namespace turnstile::cli
