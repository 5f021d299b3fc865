// fake_redis/double_text.h
//
// How each release prints a double where the text reaches a client: a
// sorted set's scores, ZINCRBY's reply and a script's {double=x} (Redis's
// addReplyDouble), and a Lua number a script passes to redis.call.
//
// Redis 6.2 and 7.0 use printf's "%.17g" ("0.10000000000000001"); 7.2 on
// print integers up to 2^62 as integers and anything else with
// fpconv_dtoa: the digits of Florian Loitsch's Grisu2 (short, but not
// always the shortest: 1e23 gives 99999999999999990000000), without an
// exponent when it is small ("0.000025", "-2.5e-7").

#ifndef TURNSTILE_FAKE_REDIS_DOUBLE_TEXT_H_
#define TURNSTILE_FAKE_REDIS_DOUBLE_TEXT_H_

#include <string>

#include "fake_redis/server_profile.h"

namespace turnstile::sim {

// fpconv_dtoa's text of `value` (Redis 7.2's deps/fpconv): "-" for a set
// sign bit, "0", "nan", "inf", else Grisu2's digits laid out as fpconv
// lays them out.
std::string grisu_text(double value);

// addReplyDouble's RESP2 text of `value` under `profile`.
std::string double_reply_text(const ServerProfile& profile, double value);

// A Lua number passed to redis.call, as `profile` turns it into the
// command's argument, into `text` (its buffer reused).
void assign_number_argument(const ServerProfile& profile, double value, std::string& text);

}  // namespace turnstile::sim

#endif  // TURNSTILE_FAKE_REDIS_DOUBLE_TEXT_H_
