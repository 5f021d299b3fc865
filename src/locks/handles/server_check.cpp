// check_server() and its texts (turnstile/server_check.h).

#include "turnstile/server_check.h"

#include <charconv>
#include <exception>
#include <system_error>
#include <utility>

#include "core/info_reply.h"
#include "turnstile/errors.h"

namespace turnstile {
namespace {

constexpr std::string_view kInfoMaxmemory = "maxmemory";
constexpr std::string_view kInfoPolicy = "maxmemory_policy";

std::string failure_text(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& error) {
    return error.what();
  } catch (...) {
    return "unknown failure";
  }
}

MasterSafety master_safety(const MasterReply& answer) {
  MasterSafety seen{.node = answer.node,
                    .risk = EvictionRisk::unknown,
                    .maxmemory_policy = {},
                    .maxmemory = std::nullopt,
                    .reason = {},
                    .failure = nullptr};
  if (answer.failure) {
    seen.reason = failure_text(answer.failure);
    seen.failure = answer.failure;
    return seen;
  }
  if (answer.reply.is_error()) {
    seen.reason = "INFO refused: " + answer.reply.as_string();
    return seen;
  }
  if (!answer.reply.is_bulk() && !answer.reply.is_status()) {
    seen.reason = "INFO answered " + answer.reply.to_string();
    return seen;
  }
  const std::string_view info = answer.reply.as_string();
  const std::optional<std::string_view> policy = detail::info_field(info, kInfoPolicy);
  const std::optional<std::string_view> limit = detail::info_field(info, kInfoMaxmemory);
  std::int64_t bytes = 0;
  if (!policy || !limit || std::from_chars(limit->data(), limit->data() + limit->size(), bytes).ec != std::errc()) {
    seen.reason = "INFO memory has no maxmemory and maxmemory_policy";
    return seen;
  }
  seen.maxmemory_policy = std::string(*policy);
  seen.maxmemory = bytes;
  seen.risk = eviction_risk(*policy, bytes);
  if (seen.risk == EvictionRisk::unknown) seen.reason = "a maxmemory-policy this version does not know";
  return seen;
}

std::string master_phrase(const MasterSafety& master) {
  if (master.maxmemory_policy.empty()) return "unknown (" + master.reason + ") on " + master.node;
  return master.maxmemory_policy + " (maxmemory " + std::to_string(master.maxmemory.value_or(0)) +
         (master.maxmemory.value_or(0) == 0 ? ": no limit" : "") + ") on " + master.node;
}

}  // namespace

std::string_view eviction_risk_name(EvictionRisk risk) {
  switch (risk) {
    case EvictionRisk::safe:
      return "safe";
    case EvictionRisk::evicts_locks:
      return "evicts-locks";
    case EvictionRisk::unknown:
      return "unknown";
  }
  return "unknown";
}

EvictionRisk eviction_risk(std::string_view maxmemory_policy, std::int64_t maxmemory) {
  if (maxmemory_policy == "noeviction") return EvictionRisk::safe;
  const bool evicting = maxmemory_policy.starts_with("allkeys-") || maxmemory_policy.starts_with("volatile-");
  if (!evicting) return EvictionRisk::unknown;
  return maxmemory == 0 ? EvictionRisk::safe : EvictionRisk::evicts_locks;
}

ServerSafety check_server(Backend& backend) {
  ServerSafety safety;
  for (const MasterReply& answer : backend.command_each_master({"INFO", "memory"})) {
    safety.masters.push_back(master_safety(answer));
  }
  if (safety.masters.empty()) return safety;
  safety.risk = EvictionRisk::safe;
  for (const MasterSafety& master : safety.masters) {
    if (master.risk == EvictionRisk::evicts_locks) {
      safety.risk = EvictionRisk::evicts_locks;
    } else if (master.risk == EvictionRisk::unknown && safety.risk == EvictionRisk::safe) {
      safety.risk = EvictionRisk::unknown;
    }
  }
  return safety;
}

std::string describe_policy(const ServerSafety& safety) {
  if (safety.masters.empty()) return "unknown (no master to ask)";
  std::string text;
  for (const MasterSafety& master : safety.masters) text += (text.empty() ? "" : "; ") + master_phrase(master);
  return text;
}

std::string unsafe_server_message(const ServerSafety& safety) {
  std::string evicting;
  for (const MasterSafety& master : safety.masters) {
    if (master.risk == EvictionRisk::evicts_locks) {
      evicting += (evicting.empty() ? "" : "; ") + master_phrase(master);
    }
  }
  return "Redis may evict lock keys: maxmemory-policy " + evicting +
         ". When it runs out of memory it deletes a held lock's key, another holder gets the lock while this one "
         "still holds it, and under allkeys-* the fencing counter is deleted too, so fencing tokens repeat. Set "
         "`maxmemory-policy noeviction` on that server, or keep the locks on a Redis of their own";
}

}  // namespace turnstile
