// List commands: LPUSH RPUSH LPOP RPOP LINDEX LRANGE LREM LLEN LPOS.

#include <limits>

#include "core/check.h"
#include "fake_redis/command_args.h"
#include "fake_redis/server.h"

namespace turnstile::sim {
namespace {

enum class End { head, tail };

Reply push(CommandContext& context, End end) {
  Typed<List> list = context.keyspace.find_or_create<List>(context.argv[1]);
  if (list.wrong_type) return wrong_type_reply();
  for (std::size_t i = 2; i < context.argv.size(); ++i) {
    if (end == End::head) {
      list.value->push_front(context.argv[i]);
    } else {
      list.value->push_back(context.argv[i]);
    }
  }
  TURNSTILE_CHECK(!list.value->empty());  // the arity asks for one element at least
  return Reply::integer(static_cast<std::int64_t>(list.value->size()));
}

Reply lpush(CommandContext& context) { return push(context, End::head); }
Reply rpush(CommandContext& context) { return push(context, End::tail); }

// LPOP / RPOP key [count]: without a count one element or nil; with a count
// an array (nil for a missing key, empty for count 0).
Reply pop(CommandContext& context, End end) {
  const auto& argv = context.argv;
  if (argv.size() > 3) return Reply::error(redis_errors::wrong_arity(lower_case(argv[0])));
  std::optional<std::int64_t> count;
  if (argv.size() == 3) {
    count = parse_integer(argv[2]);
    if (!count || *count < 0) return error_reply(redis_errors::kMustBePositive);
  }
  Typed<List> list = context.keyspace.find_as<List>(argv[1]);
  if (!list.value && !list.wrong_type) return Reply::nil();
  if (list.wrong_type) return wrong_type_reply();
  auto pop_one = [&] {
    TURNSTILE_CHECK(!list.value->empty());
    std::string element;
    if (end == End::head) {
      element = std::move(list.value->front());
      list.value->pop_front();
    } else {
      element = std::move(list.value->back());
      list.value->pop_back();
    }
    return Reply::bulk(std::move(element));
  };
  Reply answer;
  if (!count) {
    answer = pop_one();
  } else {
    std::vector<Reply> popped;
    while (static_cast<std::int64_t>(popped.size()) < *count && !list.value->empty()) {
      popped.push_back(pop_one());
    }
    answer = Reply::array(std::move(popped));
  }
  context.keyspace.erase_if_empty(argv[1]);
  return answer;
}

Reply lpop(CommandContext& context) { return pop(context, End::head); }
Reply rpop(CommandContext& context) { return pop(context, End::tail); }

Reply lindex(CommandContext& context) {
  // Redis looks the key up before it parses the index.
  Typed<List> list = context.keyspace.find_as<List>(context.argv[1]);
  if (list.wrong_type) return wrong_type_reply();
  if (!list.value) return Reply::nil();
  std::optional<std::int64_t> index = parse_integer(context.argv[2]);
  if (!index) return not_integer_reply();
  const auto length = static_cast<std::int64_t>(list.value->size());
  if (*index < 0) *index += length;
  if (*index < 0 || *index >= length) return Reply::nil();
  return Reply::bulk((*list.value)[static_cast<std::size_t>(*index)]);
}

Reply lrange(CommandContext& context) {
  std::optional<std::int64_t> start = parse_integer(context.argv[2]);
  std::optional<std::int64_t> stop = parse_integer(context.argv[3]);
  if (!start || !stop) return not_integer_reply();
  Typed<List> list = context.keyspace.find_as<List>(context.argv[1]);
  if (list.wrong_type) return wrong_type_reply();
  std::vector<Reply> elements;
  if (!list.value) return Reply::array({});
  const auto length = static_cast<std::int64_t>(list.value->size());
  if (*start < 0) *start += length;
  if (*stop < 0) *stop += length;
  if (*start < 0) *start = 0;
  if (*start > *stop || *start >= length) return Reply::array({});
  if (*stop >= length) *stop = length - 1;
  TURNSTILE_CHECK(0 <= *start && *start <= *stop && *stop < length);
  for (std::int64_t i = *start; i <= *stop; ++i) {
    elements.push_back(Reply::bulk((*list.value)[static_cast<std::size_t>(i)]));
  }
  return Reply::array(std::move(elements));
}

// LREM key count element: count > 0 from the head, < 0 from the tail, 0 all.
Reply lrem(CommandContext& context) {
  std::optional<std::int64_t> count = parse_integer(context.argv[2]);
  if (!count) return not_integer_reply();
  Typed<List> list = context.keyspace.find_as<List>(context.argv[1]);
  if (list.wrong_type) return wrong_type_reply();
  if (!list.value) return Reply::integer(0);
  const std::string& element = context.argv[3];
  // Walks from one end, erasing matches, until `limit` were removed.
  const std::uint64_t limit =
      *count == 0 ? std::numeric_limits<std::uint64_t>::max()
                  : (*count > 0 ? static_cast<std::uint64_t>(*count) : 0 - static_cast<std::uint64_t>(*count));
  std::uint64_t removed = 0;
  List& items = *list.value;
  if (*count >= 0) {
    for (auto it = items.begin(); it != items.end() && removed < limit;) {
      if (*it == element) {
        it = items.erase(it);
        ++removed;
      } else {
        ++it;
      }
    }
  } else {
    for (std::size_t i = items.size(); i > 0 && removed < limit; --i) {
      if (items[i - 1] == element) {
        items.erase(items.begin() + static_cast<std::ptrdiff_t>(i - 1));
        ++removed;
      }
    }
  }
  TURNSTILE_CHECK(removed <= limit);
  context.keyspace.erase_if_empty(context.argv[1]);
  return Reply::integer(static_cast<std::int64_t>(removed));
}

// LPOS key element [RANK rank] [COUNT count] [MAXLEN len], as Redis's
// lposCommand: options first, then the key.
Reply lpos(CommandContext& context) {
  const auto& argv = context.argv;
  std::int64_t rank = 1;
  std::optional<std::int64_t> count;  // none: reply with one index, not an array
  std::int64_t max_length = 0;        // 0: the whole list
  for (std::size_t i = 3; i < argv.size(); ++i) {
    const bool has_value = i + 1 < argv.size();
    if (option_is(argv[i], "rank") && has_value) {
      std::optional<std::int64_t> value = parse_integer(argv[++i]);
      if (!value) return not_integer_reply();
      constexpr std::int64_t kLowest = std::numeric_limits<std::int64_t>::min();
      if (*value == kLowest && context.server.profile().lpos_rank_range_checked) {
        return Reply::error(redis_errors::value_out_of_range(-std::numeric_limits<std::int64_t>::max(),
                                                             std::numeric_limits<std::int64_t>::max()));
      }
      if (*value == 0) return error_reply(redis_errors::lpos_rank_zero(context.server.profile()));
      rank = *value;
    } else if (option_is(argv[i], "count") && has_value) {
      count = parse_integer(argv[++i]);
      if (!count || *count < 0) return error_reply(redis_errors::kLposCountNegative);
    } else if (option_is(argv[i], "maxlen") && has_value) {
      std::optional<std::int64_t> value = parse_integer(argv[++i]);
      if (!value || *value < 0) return error_reply(redis_errors::kLposMaxlenNegative);
      max_length = *value;
    } else {
      return syntax_error_reply();
    }
  }
  Typed<List> list = context.keyspace.find_as<List>(argv[1]);
  if (list.wrong_type) return wrong_type_reply();
  if (!list.value) return count ? Reply::array({}) : Reply::nil();

  const List& items = *list.value;
  const auto length = static_cast<std::int64_t>(items.size());
  const bool from_tail = rank < 0;
  // Redis 6.2 and 7.0 negate RANK in place, so INT64_MIN stays negative and every
  // match qualifies: the same as rank 1 from the tail.
  const std::int64_t wanted_rank = rank == std::numeric_limits<std::int64_t>::min() ? 1 : (from_tail ? -rank : rank);
  std::vector<Reply> positions;
  std::int64_t matches = 0;
  for (std::int64_t scanned = 0; scanned < length && (max_length == 0 || scanned < max_length); ++scanned) {
    const std::int64_t index = from_tail ? length - 1 - scanned : scanned;
    TURNSTILE_CHECK(0 <= index && index < length);
    if (items[static_cast<std::size_t>(index)] != argv[2]) continue;
    if (++matches < wanted_rank) continue;
    if (!count) return Reply::integer(index);
    positions.push_back(Reply::integer(index));
    if (*count != 0 && matches - wanted_rank + 1 >= *count) break;
  }
  return count ? Reply::array(std::move(positions)) : Reply::nil();
}

}  // namespace

void register_list_commands(CommandTable& table) {
  table.add({"lpush", -3, kCommandWrite, lpush});
  table.add({"rpush", -3, kCommandWrite, rpush});
  table.add({"lpop", -2, kCommandWrite, lpop});
  table.add({"rpop", -2, kCommandWrite, rpop});
  table.add({"lindex", 3, kCommandReadOnly, lindex});
  table.add({"lrange", 4, kCommandReadOnly, lrange});
  table.add({"lrem", 4, kCommandWrite, lrem});
  table.add({"llen", 2, kCommandReadOnly, aggregate_size<List>});
  table.add({"lpos", -3, kCommandReadOnly, lpos});
}

}  // namespace turnstile::sim
