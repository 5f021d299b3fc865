#include "locks/semaphore_common.h"

#include <chrono>

#include "turnstile/errors.h"

namespace turnstile::detail {

void check_permit_count(std::int64_t permits, std::string_view operation) {
  if (permits < 0) {
    throw InvalidArgumentError(std::string(operation) + ": permit count must not be negative, got " +
                               std::to_string(permits));
  }
}

std::int64_t lease_ms_of(Duration lease) {
  const std::int64_t lease_ms = std::chrono::duration_cast<std::chrono::milliseconds>(lease).count();
  if (lease_ms < 1) {
    throw InvalidArgumentError("lease must be at least 1 ms, got " +
                               std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(lease).count()) +
                               " us");
  }
  return lease_ms;
}

std::string suffix_key(std::string_view name, std::string_view suffix) {
  std::string key;
  if (name.find('{') != std::string_view::npos) {
    key = name;
  } else {
    key = "{";
    key += name;
    key += '}';
  }
  key += ':';
  key += suffix;
  return key;
}

}  // namespace turnstile::detail
