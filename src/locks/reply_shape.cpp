#include "locks/reply_shape.h"

#include <string>

#include "turnstile/errors.h"

namespace turnstile::detail {

void throw_unexpected(const Script& script, const Reply& reply, const char* expected) {
  throw ProtocolError("script " + std::string(script.name) + " answered " + reply.to_string() + ", expected " +
                      expected);
}

std::vector<std::int64_t> integer_array_reply(const Script& script, const Reply& reply, std::size_t size) {
  if (!reply.is_array() || reply.as_array().size() != size) {
    throw_unexpected(script, reply, ("an array of " + std::to_string(size) + " integers").c_str());
  }
  std::vector<std::int64_t> values;
  values.reserve(size);
  for (const Reply& element : reply.as_array()) values.push_back(integer_reply(script, element));
  return values;
}

}  // namespace turnstile::detail
