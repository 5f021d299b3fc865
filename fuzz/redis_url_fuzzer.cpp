// Fuzz target: Redis URLs (RedisOptions::from_url, src/redis/redis_options.cpp).
//
// Input: any bytes, as the URL given to --redis or from_url().
// Properties: from_url() returns options that validate() accepts, or throws
// InvalidArgumentError (nothing else); endpoint() and describe() of what
// it returns do not throw, and describe() of options without credentials
// is a URL that parses back to the same place (mode, host, port, socket,
// database, seeds, master name).

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "turnstile/errors.h"
#include "turnstile/redis_backend.h"

using turnstile::fuzz::fuzz_check;

namespace {

bool same_place(const turnstile::RedisOptions& a, const turnstile::RedisOptions& b) {
  return a.mode == b.mode && a.host == b.host && a.port == b.port && a.unix_socket_path == b.unix_socket_path &&
         a.db == b.db && a.seeds == b.seeds && a.sentinel_master_name == b.sentinel_master_name;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  turnstile::RedisOptions options;
  try {
    options = turnstile::RedisOptions::from_url(turnstile::fuzz::as_text(data, size));
  } catch (const turnstile::InvalidArgumentError&) {
    return 0;
  }
  options.validate();
  const std::string endpoint = options.endpoint();
  const std::string described = options.describe();
  fuzz_check(!endpoint.empty(), "empty endpoint");
  if (!options.user.empty()) return 0;  // describe() leaves the password out
  turnstile::RedisOptions again;
  try {
    again = turnstile::RedisOptions::from_url(described);
  } catch (const turnstile::InvalidArgumentError& error) {
    std::fprintf(stderr, "describe() gave '%s': %s\n", described.c_str(), error.what());
    fuzz_check(false, "describe() is not a valid URL");
  }
  fuzz_check(same_place(options, again), "describe() parses back to another place");
  return 0;
}
