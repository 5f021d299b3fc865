// Server commands: PING ECHO TIME SELECT FLUSHALL.

#include "fake_redis/command_args.h"
#include "fake_redis/server.h"

namespace turnstile::sim {
namespace {

constexpr std::int64_t kUsPerSecond = 1'000'000;

Reply ping(CommandContext& context) {
  const auto& argv = context.argv;
  if (argv.size() > 2) return Reply::error(redis_errors::wrong_arity("ping"));
  // In RESP2 subscribed mode PING answers ["pong", message-or-empty].
  if (context.session.subscribed()) {
    return Reply::array({Reply::bulk("pong"), Reply::bulk(argv.size() == 2 ? argv[1] : "")});
  }
  return argv.size() == 2 ? Reply::bulk(argv[1]) : Reply::status("PONG");
}

Reply echo(CommandContext& context) { return Reply::bulk(context.argv[1]); }

// [seconds, microseconds] of the server's clock's Unix time.
Reply time(CommandContext& context) {
  std::int64_t now_us = context.server.server_clock().unix_time_us();
  return Reply::array(
      {Reply::bulk(std::to_string(now_us / kUsPerSecond)), Reply::bulk(std::to_string(now_us % kUsPerSecond))});
}

// The fake has one database; SELECT 0 is all there is.
Reply select(CommandContext& context) {
  std::optional<std::int64_t> index = parse_integer(context.argv[1]);
  if (!index) return not_integer_reply();
  if (*index != 0) return error_reply(redis_errors::kDbIndexOutOfRange);
  return ok_reply();
}

// FLUSHALL and FLUSHDB: one database here (SELECT 0 only), so the same.
Reply flushall(CommandContext& context) {
  const auto& argv = context.argv;
  if (argv.size() > 2 || (argv.size() == 2 && !option_is(argv[1], "sync") && !option_is(argv[1], "async"))) {
    return syntax_error_reply();
  }
  context.keyspace.clear();
  return ok_reply();
}

}  // namespace

void register_server_commands(CommandTable& table) {
  table.add({"ping", -1, kCommandPubSub, ping});
  table.add({"echo", 2, 0, echo});
  table.add({"time", 1, 0, time});
  table.add({"select", 2, 0, select});
  table.add({"flushall", -1, kCommandWrite, flushall});
  table.add({"flushdb", -1, kCommandWrite, flushall});
}

}  // namespace turnstile::sim
