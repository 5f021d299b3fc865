// redis/reply_conversion.h
//
// Turns a hiredis reply tree into a turnstile::Reply. Pure data conversion:
// it knows nothing about connections or sockets (hiredis keeps its protocol
// reader separate from I/O in the same way).

#ifndef TURNSTILE_REDIS_REPLY_CONVERSION_H_
#define TURNSTILE_REDIS_REPLY_CONVERSION_H_

#include <hiredis/hiredis.h>

#include "turnstile/reply.h"

namespace turnstile::redis {

// Converts `reply` (RESP2: nil, integer, bulk, status, error, array, nested
// to any depth) into a Reply; error replies become Reply::error values.
// Binary-safe: bulk strings keep embedded NUL bytes. Throws ProtocolError for
// a reply type turnstile never asks for (RESP3 types).
Reply convert_reply(const redisReply& reply);

}  // namespace turnstile::redis

#endif  // TURNSTILE_REDIS_REPLY_CONVERSION_H_
