// Fuzz target: the fake Redis's Lua bridge (src/fake_redis/lua_*.cpp,
// cmd_scripting.cpp): redis.call / redis.pcall argument conversion, the
// conversion of replies to Lua values and of Lua values back to replies,
// errors, the sandbox.
//
// Input: a Lua script. It runs through EVAL with KEYS = {"s", "h"} and
// ARGV = {"1", "x"} on a server holding a key of every type, then once more
// through EVALSHA (the cached function, no keys). A runaway script is
// stopped by the engine's own instruction limit, a greedy one by its
// memory limit.
// Properties: EVAL and EVALSHA never throw, and every reply is one a real
// server could send (check_reply); ASan and UBSan watch the rest.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fake_redis.h"
#include "fuzz_check.h"
#include "fake_redis/lua_engine.h"

namespace {

// A key of every type, one with a ttl.
const std::vector<std::vector<std::string>> kSetup = {
    {"SET", "s", "10", "PX", "5000"},
    {"HSET", "h", "owner:1", "2", "field", "value"},
    {"RPUSH", "l", "a", "b", "c"},
    {"ZADD", "z", "1.5", "m", "-inf", "n"},
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  turnstile::fuzz::FakeRedis redis;
  for (const std::vector<std::string>& command : kSetup) redis.server.execute(*redis.first, command);
  const std::string script(turnstile::fuzz::as_text(data, size));
  turnstile::fuzz::check_reply(redis.server.execute(*redis.first, {"EVAL", script, "2", "s", "h", "1", "x"}));
  turnstile::fuzz::check_reply(redis.server.execute(*redis.first, {"EVALSHA", turnstile::sim::sha1_hex(script), "0"}));
  return 0;
}
