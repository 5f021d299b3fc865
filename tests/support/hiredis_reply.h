// support/hiredis_reply.h
//
// A minimal synchronous hiredis path for tests that talk to a real
// redis-server directly, below turnstile's own backend (the differential
// test, the server fixture): send argv, get a turnstile::Reply with error
// replies as values.

#ifndef TURNSTILE_TESTS_SUPPORT_HIREDIS_REPLY_H_
#define TURNSTILE_TESTS_SUPPORT_HIREDIS_REPLY_H_

#include <hiredis/hiredis.h>

#include <string>
#include <vector>

#include "turnstile/reply.h"

namespace turnstile::testing {

// Converts a hiredis reply tree (RESP2 types) to a Reply.
Reply from_hiredis(const redisReply* reply);

// Sends argv over `context` and returns the reply; throws std::runtime_error
// on a transport failure.
Reply hiredis_command(redisContext* context, const std::vector<std::string>& argv);

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_SUPPORT_HIREDIS_REPLY_H_
