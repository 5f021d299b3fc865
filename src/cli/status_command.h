// cli/status_command.h
//
// `turnstile status NAME [--json]`: what is at NAME (turnstile/inspection.h):
// flavor, holders and hold counts, the lease left, the fair queue with
// positions, permits available and held. Exit 0 whatever the state (a free
// name included); 65 if NAME holds something that is not a turnstile lock
// (or not one of the flavor given).
//
// The flavor is shown by its own name (flavor.h: reentrant, fair, token,
// semaphore = the crash-safe one, counting-semaphore, read-write, ...).
// With --flavor FLAVOR or --config FILE (the policy file's rule for NAME) it
// is that flavor, the same whatever NAME holds now ("free" is never shown
// then: holders 0). Without, it is read from Redis, which cannot always
// tell: a lock hash without queue keys is reentrant, fair, or a composite's
// node; a permit count without held permits either semaphore. Then the
// flavor shown is the first that fits and the text says which others do
// ("could_be" in JSON, every flavor that fits). Holders whose owner
// is not "<uuid>:<n>" (another Redisson-layout client, e.g. node-redisson)
// are shown as foreign.
//
// `--watch [--interval 1s] [--count N]` shows it again once per interval
// until interrupted (SIGINT, SIGTERM, SIGHUP: exit 0, the normal end of a
// watch) or after N snapshots. On a terminal each snapshot replaces the
// last (clear screen, a header with the time); into a pipe, snapshots
// follow one another, each headed by a line "--- <UTC time>"; with --json,
// one compact JSON object per line with "observed_at_epoch_ms". Redis
// being unreachable does not end a watch: the snapshot says so ("error")
// and the next one tries again. Anything else ends it with the exit status
// a single `status` would give.
//
// Every status also shows the memory policy of the server (every master:
// turnstile/server_check.h), "memory" in text, "server" in JSON, and warns
// ("warning") when it may evict lock keys.

#ifndef TURNSTILE_CLI_STATUS_COMMAND_H_
#define TURNSTILE_CLI_STATUS_COMMAND_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command_common.h"

#include "turnstile/inspection.h"
#include "turnstile/server_check.h"

namespace turnstile::cli {

// The shortest --interval: more often than this is load on Redis, not
// information for a human.
inline constexpr std::chrono::milliseconds kMinWatchInterval{100};
inline constexpr std::chrono::milliseconds kDefaultWatchInterval{1000};
// The most snapshots --count asks for (a year of one per second).
inline constexpr std::int64_t kMaxWatchCount = 366LL * 24 * 3600;

struct StatusOptions {
  RedisTarget redis;
  FlavorTarget flavor;
  std::string name;
  bool json = false;
  bool watch = false;
  std::optional<std::string> interval;  // --interval, parsed with parse_duration
  std::optional<std::int64_t> count;    // --count: stop after this many snapshots
};

CLI::App* add_status_command(CLI::App& app, StatusOptions& options);
int status_command(const StatusOptions& options);

// The renderings, separate for tests: one JSON object; "key: value" lines.
// `server`, if given, is the server's memory policy (check_server()):
// a "memory" line (JSON: "server") and, when it may evict lock keys, a
// "warning" line (JSON: "warning").
std::string status_json(const Inspection& inspection, const std::string& redis, const ServerSafety* server = nullptr);
// status_json()'s object, added to `out` (which may already hold fields
// that go first); for `ls --json` too.
void fill_status_object(nlohmann::ordered_json& out, const Inspection& inspection, const std::string& redis,
                        const ServerSafety* server);
std::string status_text(const Inspection& inspection, const std::string& redis, const ServerSafety* server = nullptr);
// One line of `status --watch --json`: status_json() compact, with
// "observed_at_epoch_ms" first.
std::string status_json_line(const Inspection& inspection, const std::string& redis, std::int64_t observed_at_epoch_ms,
                             const ServerSafety* server = nullptr);

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_STATUS_COMMAND_H_
