// redis/echo_script.h
//
// The script the pipelined-call tests send (send_eval_test.cpp,
// send_evals_test.cpp): increments KEYS[1] and answers ARGV[1]. A call is
// kept in flight by stopping its server (SIGSTOP), never by a busy loop:
// Redis 7.2 and Valkey freeze TIME inside a script, so a loop waiting on
// it never ends there, and a loop timed by anything else would make those
// tests wall-clock bounds.

#ifndef TURNSTILE_TESTS_REDIS_ECHO_SCRIPT_H_
#define TURNSTILE_TESTS_REDIS_ECHO_SCRIPT_H_

#include <memory>
#include <string>
#include <string_view>

#include "fake_redis/lua_engine.h"  // sha1_hex, as the build hashes scripts
#include "redis_server.h"
#include "redis_test_support.h"
#include "turnstile/redis_backend.h"
#include "turnstile/script.h"

namespace turnstile::testing {

inline constexpr std::string_view kEchoSource = R"lua(
redis.call('INCR', KEYS[1])
return ARGV[1]
)lua";

inline const Script& echo() {
  static const std::string sha1 = sim::sha1_hex(kEchoSource);
  static const Script script{"echo", kEchoSource, sha1};
  return script;
}

// A backend to `server` with `command_timeout_ms`, the echo loaded and one
// connection pooled (so that a call sent next needs no handshake).
inline std::unique_ptr<Backend> warm_backend(const RedisServer& server, int command_timeout_ms) {
  RedisOptions options = test_options(server);
  options.command_timeout_ms = command_timeout_ms;
  std::unique_ptr<Backend> backend = make_redis_backend(options);
  backend->eval(echo(), {"warm-up"}, {""});
  return backend;
}

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_REDIS_ECHO_SCRIPT_H_
