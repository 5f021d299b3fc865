// fake_redis/command_args.h
//
// Argument parsing and reply formatting shared by the command families,
// replicating the exact rules of redis-server 7.0 (string2ll, strtod with
// Redis's checks, "%.17g" scores, strcasecmp option names).

#ifndef TURNSTILE_FAKE_REDIS_COMMAND_ARGS_H_
#define TURNSTILE_FAKE_REDIS_COMMAND_ARGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/check.h"
#include "fake_redis/command_table.h"
#include "fake_redis/keyspace.h"
#include "fake_redis/redis_errors.h"
#include "turnstile/reply.h"

namespace turnstile::sim {

// Redis's string2ll: an optional '-', no '+', no spaces, no leading zeros,
// within int64. "-0" is refused, as by Redis.
std::optional<std::int64_t> parse_integer(std::string_view text);

// A plain decimal integer ("-"? digits, at most 15 of them, leading zeros
// allowed) as the double strtod would read it, without strtod (every such
// integer is exact in a double). nullopt for any other text.
std::optional<double> parse_short_integer_float(std::string_view text);

// Redis's getDoubleFromObject: strtod over the whole text, no leading space,
// no NaN, no overflow to +-HUGE_VAL or underflow to 0. Accepts "inf",
// "-inf", hex floats, as strtod does.
std::optional<double> parse_float(std::string_view text);

// An argument as strcasecmp sees it: up to the first NUL byte.
bool option_is(std::string_view argument, std::string_view lower_case_option);

// "%.17g" of `value` (how Redis prints a double), into `text` (its buffer
// reused).
void assign_g17(double value, std::string& text);

// The table's name for a command (lower case), for error texts.
std::string lower_case(std::string_view text);

inline Reply error_reply(std::string_view text) { return Reply::error(std::string(text)); }
inline Reply ok_reply() { return Reply::status("OK"); }
inline Reply wrong_type_reply() { return error_reply(redis_errors::kWrongType); }
inline Reply not_integer_reply() { return error_reply(redis_errors::kNotInteger); }
inline Reply syntax_error_reply() { return error_reply(redis_errors::kSyntax); }

// Adds `increment` to `value` unless it would overflow int64 (Redis's check).
std::optional<std::int64_t> checked_add(std::int64_t value, std::int64_t increment);

// HLEN, LLEN, ZCARD: the size of the T at argv[1], 0 if absent.
template <class T>
Reply aggregate_size(CommandContext& context) {
  Typed<T> found = context.keyspace.find_as<T>(context.argv[1]);
  if (found.wrong_type) return wrong_type_reply();
  return Reply::integer(found.value ? static_cast<std::int64_t>(found.value->size()) : 0);
}

// HDEL, ZREM: erases argv[2..] from the T at argv[1], counting what was
// there, and drops the key once it is empty.
template <class T>
Reply erase_members(CommandContext& context) {
  Typed<T> found = context.keyspace.find_as<T>(context.argv[1]);
  if (found.wrong_type) return wrong_type_reply();
  if (!found.value) return Reply::integer(0);
  std::int64_t erased = 0;
  for (std::size_t i = 2; i < context.argv.size(); ++i) {
    if (found.value->erase(context.argv[i])) ++erased;
  }
  TURNSTILE_CHECK(erased <= static_cast<std::int64_t>(context.argv.size() - 2));
  context.keyspace.erase_if_empty(context.argv[1]);
  return Reply::integer(erased);
}

}  // namespace turnstile::sim

#endif  // TURNSTILE_FAKE_REDIS_COMMAND_ARGS_H_
