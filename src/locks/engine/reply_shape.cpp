#include "locks/engine/reply_shape.h"

#include <string>

#include "turnstile/errors.h"

namespace turnstile::detail {

void throw_unexpected(const Script& script, const Reply& reply, const char* expected) {
  throw ProtocolError("script " + std::string(script.name) + " answered " + reply.to_string() + ", expected " +
                      expected);
}

std::vector<std::int64_t> integer_array_reply(const Script& script, const Reply& reply, std::size_t size) {
  return integer_array_reply(script, reply, size, size);
}

std::vector<std::int64_t> integer_array_reply(const Script& script, const Reply& reply, std::size_t min_size,
                                              std::size_t max_size) {
  if (!reply.is_array() || reply.as_array().size() < min_size || reply.as_array().size() > max_size) {
    const std::string sizes =
        min_size == max_size ? std::to_string(min_size) : std::to_string(min_size) + " to " + std::to_string(max_size);
    throw_unexpected(script, reply, ("an array of " + sizes + " integers").c_str());
  }
  std::vector<std::int64_t> values;
  values.reserve(reply.as_array().size());
  for (const Reply& element : reply.as_array()) values.push_back(integer_reply(script, element));
  return values;
}

}  // namespace turnstile::detail
