// Options and set-up shared by the subcommands.

#include "cli/command_common.h"

#include <algorithm>
#include <cstdint>

#include "cli/exit_status.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/redis_backend.h"

namespace turnstile::cli {

void add_redis_option(CLI::App& command, std::string& url) {
  url = std::string(kDefaultRedisUrl);
  command
      .add_option("--redis", url,
                  "Redis URL: redis://[user[:password]@]host[:port][/db] or unix:///path[?db=N]")
      ->envname(std::string(kRedisUrlVariable))
      ->capture_default_str();
}

void add_name_argument(CLI::App& command, std::string& name) {
  command.add_option("name", name, "the lock (or semaphore) name: its Redis key")->required();
}

void check_name(std::string_view name) {
  try {
    check_lock_name(name, name, "the lock name");
  } catch (const InvalidArgumentError& invalid) {
    throw UsageError(invalid.what());
  }
}

std::shared_ptr<Backend> make_backend(const std::string& url, std::optional<std::chrono::milliseconds> max_timeout) {
  try {
    RedisOptions options = RedisOptions::from_url(url);
    if (max_timeout) {
      const int cap_ms = static_cast<int>(std::min<std::int64_t>(max_timeout->count(), INT32_MAX));
      options.command_timeout_ms = std::min(options.command_timeout_ms, cap_ms);
      options.connect_timeout_ms = std::min(options.connect_timeout_ms, cap_ms);
      // WAIT's reply must come within the command timeout (redis_backend.h).
      options.replica_sync_timeout_ms = std::max(1, std::min(options.replica_sync_timeout_ms, cap_ms / 2));
    }
    return make_redis_backend(options);
  } catch (const InvalidArgumentError& invalid) {
    throw UsageError(std::string("--redis: ") + invalid.what());
  }
}

}  // namespace turnstile::cli
