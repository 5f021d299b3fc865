// Options and set-up shared by the subcommands.

#include "cli/command_common.h"

#include "cli/exit_status.h"
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
  if (name.empty()) throw UsageError("the lock name must not be empty");
}

std::shared_ptr<Backend> make_backend(const std::string& url) {
  try {
    return make_redis_backend(RedisOptions::from_url(url));
  } catch (const InvalidArgumentError& invalid) {
    throw UsageError(std::string("--redis: ") + invalid.what());
  }
}

}  // namespace turnstile::cli
