// RedisBackend: the Backend over a connection pool (commands and scripts)
// and a subscriber (pub/sub). See turnstile/redis_backend.h.

#include "turnstile/redis_backend.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>
#include <utility>

#include "core/script_call.h"
#include "redis/connection_pool.h"
#include "redis/subscriber.h"
#include "turnstile/errors.h"

namespace turnstile {
namespace {

// Commands that change the state of the connection they run on. On a pooled
// connection they would leak into the next borrower's calls (another
// database, a half-open transaction, subscriber mode, RESP3), so command()
// refuses them.
constexpr std::array<std::string_view, 17> kConnectionStateCommands = {
    "AUTH",     "DISCARD",    "EXEC",        "HELLO",     "MONITOR", "MULTI",
    "PSUBSCRIBE", "PUNSUBSCRIBE", "QUIT",    "RESET",     "SELECT",  "SSUBSCRIBE",
    "SUBSCRIBE", "SUNSUBSCRIBE", "UNSUBSCRIBE", "UNWATCH", "WATCH"};

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::toupper(static_cast<unsigned char>(x)) == std::toupper(static_cast<unsigned char>(y));
         });
}

void check_command(const std::vector<std::string>& argv) {
  if (argv.empty()) throw InvalidArgumentError("command(): empty argv (argv[0] is the command name)");
  for (const std::string_view refused : kConnectionStateCommands) {
    if (equals_ignoring_case(argv[0], refused)) {
      throw InvalidArgumentError("command(): " + std::string(refused) +
                                 " changes the state of a pooled connection; use subscribe() for "
                                 "pub/sub and a URL for the database and credentials");
    }
  }
}

class RedisBackend final : public Backend {
 public:
  explicit RedisBackend(const RedisOptions& options)
      : options_(options), pool_(options), subscriber_(options) {}

  Reply eval(const Script& script, const std::vector<std::string>& keys,
             const std::vector<std::string>& args) override {
    // One connection for EVALSHA and, on NOSCRIPT, SCRIPT LOAD and the retry.
    return pool_.with_connection([&](redis::Connection& connection) {
      return eval_with_reload(script, keys, args,
                              [&connection](const std::vector<std::string>& argv) { return connection.command(argv); });
    });
  }

  Reply command(const std::vector<std::string>& argv) override {
    check_command(argv);
    return pool_.with_connection(
        [&](redis::Connection& connection) { return raise_if_error(connection.command(argv)); });
  }

  Subscription subscribe(std::string_view channel, PubSubHandler handler) override {
    return Subscription(this, subscriber_.subscribe(channel, std::move(handler)));
  }

  std::string describe() const override { return options_.describe(); }

 protected:
  void unsubscribe(std::uint64_t id) noexcept override { subscriber_.unsubscribe(id); }

 private:
  const RedisOptions options_;
  redis::ConnectionPool pool_;
  redis::Subscriber subscriber_;
};

}  // namespace

std::unique_ptr<Backend> make_redis_backend(const RedisOptions& options) {
  options.validate();
  return std::make_unique<RedisBackend>(options);
}

}  // namespace turnstile
