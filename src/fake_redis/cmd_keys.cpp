// Generic key commands: DEL EXISTS TYPE EXPIRE PEXPIRE EXPIREAT PEXPIREAT
// PERSIST TTL PTTL DBSIZE.

#include <limits>

#include "fake_redis/command_args.h"
#include "fake_redis/server.h"

namespace turnstile::sim {
namespace {

constexpr std::int64_t kMsPerSecond = 1000;
constexpr std::int64_t kMaxInt64 = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMinInt64 = std::numeric_limits<std::int64_t>::min();

Reply del(CommandContext& context) {
  std::int64_t deleted = 0;
  for (std::size_t i = 1; i < context.argv.size(); ++i) {
    if (context.keyspace.erase(context.argv[i])) ++deleted;
  }
  return Reply::integer(deleted);
}

Reply exists(CommandContext& context) {
  std::int64_t found = 0;  // a key named twice counts twice, as in Redis
  for (std::size_t i = 1; i < context.argv.size(); ++i) {
    if (context.keyspace.find(context.argv[i]) != nullptr) ++found;
  }
  return Reply::integer(found);
}

Reply type(CommandContext& context) {
  std::optional<ValueType> found = context.keyspace.type(context.argv[1]);
  return Reply::status(found ? std::string(type_name(*found)) : "none");
}

// The NX / XX / GT / LT options of the EXPIRE family.
struct ExpireConditions {
  bool nx = false, xx = false, gt = false, lt = false;
};

enum class ExpireUnit { seconds, milliseconds };
enum class ExpireBase { relative, unix_epoch };

// EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT, following Redis's
// expireGenericCommand step by step (checks in the same order, so the same
// error wins). Deadlines are compared in Unix ms, as Redis does, then stored
// on the virtual clock.
Reply expire_generic(CommandContext& context, ExpireUnit unit, ExpireBase base) {
  const auto& argv = context.argv;
  ExpireConditions conditions;
  for (std::size_t i = 3; i < argv.size(); ++i) {
    if (option_is(argv[i], "nx")) {
      conditions.nx = true;
    } else if (option_is(argv[i], "xx")) {
      conditions.xx = true;
    } else if (option_is(argv[i], "gt")) {
      conditions.gt = true;
    } else if (option_is(argv[i], "lt")) {
      conditions.lt = true;
    } else {
      return Reply::error(redis_errors::unsupported_option(argv[i]));
    }
  }
  if (conditions.nx && (conditions.xx || conditions.gt || conditions.lt)) {
    return error_reply(redis_errors::kExpireNxXxGtLt);
  }
  if (conditions.gt && conditions.lt) return error_reply(redis_errors::kExpireGtLt);

  std::optional<std::int64_t> when = parse_integer(argv[2]);
  if (!when) return not_integer_reply();
  const std::string command = lower_case(argv[0]);
  if (unit == ExpireUnit::seconds) {
    if (*when > kMaxInt64 / kMsPerSecond || *when < kMinInt64 / kMsPerSecond) {
      return Reply::error(redis_errors::invalid_expire_time(context.server.profile(), command));
    }
    *when *= kMsPerSecond;
  }
  const std::int64_t unix_now_ms = context.server.server_clock().unix_time_ms();
  const std::int64_t base_ms = base == ExpireBase::relative ? unix_now_ms : 0;
  if (*when > kMaxInt64 - base_ms)
    return Reply::error(redis_errors::invalid_expire_time(context.server.profile(), command));
  const std::int64_t deadline_unix_ms = *when + base_ms;

  Keyspace& keyspace = context.keyspace;
  if (keyspace.find(argv[1]) == nullptr) return Reply::integer(0);
  // The virtual clock's ms and Unix ms differ by a constant.
  const std::int64_t unix_offset_ms = unix_now_ms - keyspace.now_ms();
  std::optional<std::int64_t> current_ms = keyspace.deadline_ms(argv[1]);
  std::optional<std::int64_t> current_unix_ms;
  if (current_ms) current_unix_ms = *current_ms + unix_offset_ms;
  if (conditions.nx && current_unix_ms) return Reply::integer(0);
  if (conditions.xx && !current_unix_ms) return Reply::integer(0);
  // A key without expiry counts as an infinite TTL for GT and LT.
  if (conditions.gt && (!current_unix_ms || deadline_unix_ms <= *current_unix_ms)) {
    return Reply::integer(0);
  }
  if (conditions.lt && current_unix_ms && deadline_unix_ms >= *current_unix_ms) {
    return Reply::integer(0);
  }
  if (deadline_unix_ms <= unix_now_ms) {
    keyspace.erase(argv[1]);
  } else {
    keyspace.set_deadline_ms(argv[1], deadline_unix_ms - unix_offset_ms);
  }
  return Reply::integer(1);
}

Reply expire(CommandContext& context) { return expire_generic(context, ExpireUnit::seconds, ExpireBase::relative); }
Reply pexpire(CommandContext& context) {
  return expire_generic(context, ExpireUnit::milliseconds, ExpireBase::relative);
}
Reply expireat(CommandContext& context) { return expire_generic(context, ExpireUnit::seconds, ExpireBase::unix_epoch); }
Reply pexpireat(CommandContext& context) {
  return expire_generic(context, ExpireUnit::milliseconds, ExpireBase::unix_epoch);
}

Reply persist(CommandContext& context) {
  if (!context.keyspace.deadline_ms(context.argv[1])) return Reply::integer(0);
  context.keyspace.set_deadline_ms(context.argv[1], std::nullopt);
  return Reply::integer(1);
}

// TTL and PTTL: -2 for no key, -1 for no expiry, else the time left.
Reply ttl_generic(CommandContext& context, ExpireUnit unit) {
  Keyspace& keyspace = context.keyspace;
  if (keyspace.find(context.argv[1]) == nullptr) return Reply::integer(-2);
  std::optional<std::int64_t> deadline_ms = keyspace.deadline_ms(context.argv[1]);
  if (!deadline_ms) return Reply::integer(-1);
  std::int64_t left_ms = std::max<std::int64_t>(*deadline_ms - keyspace.now_ms(), 0);
  // TTL rounds to the nearest second, as Redis's (ttl+500)/1000.
  return Reply::integer(unit == ExpireUnit::milliseconds ? left_ms : (left_ms + kMsPerSecond / 2) / kMsPerSecond);
}

Reply ttl(CommandContext& context) { return ttl_generic(context, ExpireUnit::seconds); }
Reply pttl(CommandContext& context) { return ttl_generic(context, ExpireUnit::milliseconds); }

Reply dbsize(CommandContext& context) { return Reply::integer(static_cast<std::int64_t>(context.keyspace.size())); }

}  // namespace

void register_key_commands(CommandTable& table) {
  table.add({"del", -2, kCommandWrite, del});
  table.add({"exists", -2, kCommandReadOnly, exists});
  table.add({"type", 2, kCommandReadOnly, type});
  table.add({"expire", -3, kCommandWrite | kCommandExpireOptions, expire});
  table.add({"pexpire", -3, kCommandWrite | kCommandExpireOptions, pexpire});
  table.add({"expireat", -3, kCommandWrite | kCommandExpireOptions, expireat});
  table.add({"pexpireat", -3, kCommandWrite | kCommandExpireOptions, pexpireat});
  table.add({"persist", 2, kCommandWrite, persist});
  table.add({"ttl", 2, kCommandReadOnly, ttl});
  table.add({"pttl", 2, kCommandReadOnly, pttl});
  table.add({"dbsize", 1, kCommandReadOnly, dbsize});
}

}  // namespace turnstile::sim
