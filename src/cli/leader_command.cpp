// `turnstile leader`: who leads an election.

#include "cli/leader_command.h"

#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/duration.h"
#include "cli/exit_status.h"
#include "cli/holder_identity.h"
#include "turnstile/client.h"

namespace turnstile::cli {

std::string leader_json(const std::string& name, const std::optional<Leader>& leader, const std::string& redis) {
  nlohmann::ordered_json out = {{"name", name}, {"redis", redis}, {"leads", leader.has_value()}};
  if (leader) {
    out["value"] = leader->value;
    out["term"] = leader->term;
    out["owner"] = leader->owner;
    out["since"] = iso8601_utc(leader->since_epoch_ms);
    out["since_epoch_ms"] = leader->since_epoch_ms;
    out["lease_left_ms"] = leader->remaining.count();
  }
  return out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string leader_text(const std::string& name, const std::optional<Leader>& leader, const std::string& redis) {
  std::string out;
  auto line = [&out](std::string_view key, const std::string& value) {
    out += std::string(key) + ":" + std::string(key.size() < 12 ? 12 - key.size() : 1, ' ') + value + "\n";
  };
  line("name", printable(name));
  line("redis", redis);
  if (!leader) {
    line("leader", "none (nobody was elected, or the last leader ended and its successor is not proclaimed yet)");
    return out;
  }
  line("leader", printable(leader->value));
  line("term", std::to_string(leader->term));
  line("owner", printable(leader->owner));
  line("since", iso8601_utc(leader->since_epoch_ms));
  line("lease left", readable_duration(leader->remaining));
  return out;
}

CLI::App* add_leader_command(CLI::App& app, LeaderOptions& options) {
  CLI::App* leader = app.add_subcommand(
      "leader",
      "turnstile leader [OPTIONS] NAME\n"
      "Show who leads the election NAME (turnstile elect): its value, term, owner, since when, the lease left.\n"
      "Exit 0 when somebody leads, 1 when nobody does.");
  add_redis_option(*leader, options.redis);
  add_name_argument(*leader, options.name);
  leader->add_flag("--json", options.json, "print one JSON object");
  return leader;
}

int leader_command(const LeaderOptions& options) {
  ErrorContext context{.redis = {}, .name = options.name};
  try {
    check_name(options.name);
    std::shared_ptr<Backend> backend = make_backend(options.redis);
    context.redis = backend->describe();
    // Nothing is held: no server check, no watchdog work.
    Client client(backend, ClientOptions{.server_check = ServerCheck::off});
    const std::optional<Leader> leader = client.election(options.name).leader();
    const std::string text = options.json ? leader_json(options.name, leader, context.redis)
                                          : leader_text(options.name, leader, context.redis);
    std::fputs(text.c_str(), stdout);
    return leader ? kExitSuccess : kExitDefaultConflict;
  } catch (...) {
    return report_error(std::current_exception(), context);
  }
}

}  // namespace turnstile::cli
