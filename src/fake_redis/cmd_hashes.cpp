// Hash commands: HSET HGET HMGET HDEL HEXISTS HINCRBY HLEN HGETALL HKEYS.

#include "core/check.h"
#include "fake_redis/command_args.h"
#include "fake_redis/server.h"

namespace turnstile::sim {
namespace {

Reply hset(CommandContext& context) {
  const auto& argv = context.argv;
  // Field-value pairs: an odd count of them is an arity error, as in Redis.
  if (argv.size() % 2 == 1) return Reply::error(redis_errors::wrong_arity("hset"));
  Typed<Hash> hash = context.keyspace.find_or_create<Hash>(argv[1]);
  if (hash.wrong_type) return wrong_type_reply();
  std::int64_t added = 0;
  for (std::size_t i = 2; i < argv.size(); i += 2) {
    if (hash.value->set(argv[i], argv[i + 1])) ++added;
  }
  TURNSTILE_CHECK(!hash.value->empty());  // the arity asks for one pair at least
  return Reply::integer(added);
}

Reply hget(CommandContext& context) {
  Typed<Hash> hash = context.keyspace.find_as<Hash>(context.argv[1]);
  if (hash.wrong_type) return wrong_type_reply();
  const std::string* value = hash.value ? hash.value->find(context.argv[2]) : nullptr;
  return value ? Reply::bulk(*value) : Reply::nil();
}

Reply hmget(CommandContext& context) {
  Typed<Hash> hash = context.keyspace.find_as<Hash>(context.argv[1]);
  if (hash.wrong_type) return wrong_type_reply();
  std::vector<Reply> values;
  for (std::size_t i = 2; i < context.argv.size(); ++i) {
    const std::string* value = hash.value ? hash.value->find(context.argv[i]) : nullptr;
    values.push_back(value ? Reply::bulk(*value) : Reply::nil());
  }
  return Reply::array(std::move(values));
}

Reply hexists(CommandContext& context) {
  Typed<Hash> hash = context.keyspace.find_as<Hash>(context.argv[1]);
  if (hash.wrong_type) return wrong_type_reply();
  return Reply::integer(hash.value && hash.value->find(context.argv[2]) ? 1 : 0);
}

Reply hincrby(CommandContext& context) {
  const auto& argv = context.argv;
  std::optional<std::int64_t> increment = parse_integer(argv[3]);
  if (!increment) return not_integer_reply();
  Typed<Hash> hash = context.keyspace.find_or_create<Hash>(argv[1]);
  if (hash.wrong_type) return wrong_type_reply();
  const std::string* current = hash.value->find(argv[2]);
  std::optional<std::int64_t> value = current ? parse_integer(*current) : 0;
  Reply answer;
  if (!value) {
    answer = error_reply(redis_errors::kHashValueNotInteger);
  } else if (std::optional<std::int64_t> sum = checked_add(*value, *increment); !sum) {
    answer = error_reply(redis_errors::kIncrDecrOverflow);
  } else {
    hash.value->set(argv[2], std::to_string(*sum));
    answer = Reply::integer(*sum);
  }
  context.keyspace.erase_if_empty(argv[1]);  // find_or_create must not leave an empty hash
  return answer;
}

// HGETALL (fields and values) and HKEYS (fields only), in insertion order.
Reply list_hash(CommandContext& context, bool with_values) {
  Typed<Hash> hash = context.keyspace.find_as<Hash>(context.argv[1]);
  if (hash.wrong_type) return wrong_type_reply();
  std::vector<Reply> elements;
  if (hash.value) {
    for (const auto& [field, value] : hash.value->entries()) {
      elements.push_back(Reply::bulk(field));
      if (with_values) elements.push_back(Reply::bulk(value));
    }
  }
  return Reply::array(std::move(elements));
}

Reply hgetall(CommandContext& context) { return list_hash(context, true); }
Reply hkeys(CommandContext& context) { return list_hash(context, false); }

}  // namespace

void register_hash_commands(CommandTable& table) {
  table.add({"hset", -4, kCommandWrite, hset});
  table.add({"hget", 3, kCommandReadOnly, hget});
  table.add({"hmget", -3, kCommandReadOnly, hmget});
  table.add({"hdel", -3, kCommandWrite, erase_members<Hash>});
  table.add({"hexists", 3, kCommandReadOnly, hexists});
  table.add({"hincrby", 4, kCommandWrite, hincrby});
  table.add({"hlen", 2, kCommandReadOnly, aggregate_size<Hash>});
  table.add({"hgetall", 2, kCommandReadOnly, hgetall});
  table.add({"hkeys", 2, kCommandReadOnly, hkeys});
}

}  // namespace turnstile::sim
