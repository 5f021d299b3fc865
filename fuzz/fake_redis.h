// fuzz/fake_redis.h
//
// The fake Redis as the command and Lua targets drive it: a server on its
// own virtual clock (time moves only when the input says so) with two
// sessions, and the checks every reply must pass.

#ifndef TURNSTILE_FUZZ_FAKE_REDIS_H_
#define TURNSTILE_FUZZ_FAKE_REDIS_H_

#include <memory>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "fake_redis/server.h"
#include "fake_redis/virtual_clock.h"
#include "turnstile/reply.h"

namespace turnstile::fuzz {

struct FakeRedis {
  sim::VirtualClock clock;
  sim::Server server{clock};
  std::unique_ptr<sim::Session> first = server.connect();
  std::unique_ptr<sim::Session> second = server.connect();
};

// A reply a real server could send: status and error texts are one line
// (RESP2 cannot carry CR or LF in them), at any depth. (An empty error is
// possible: a script's {err = '\n'} gives one, as in Redis.)
inline void check_reply(const Reply& reply) {
  switch (reply.type()) {
    case Reply::Type::error:
    case Reply::Type::status:
      fuzz_check(reply.as_string().find_first_of("\r\n") == std::string::npos,
                 "status or error reply with a line break");
      return;
    case Reply::Type::array:
      for (const Reply& element : reply.as_array()) check_reply(element);
      return;
    default:
      return;
  }
}

}  // namespace turnstile::fuzz

#endif  // TURNSTILE_FUZZ_FAKE_REDIS_H_
