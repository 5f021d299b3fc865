// turnstile/script_call.h
//
// For Backend implementations: running a Script the way both of turnstile's
// backends do. EVALSHA first; on NOSCRIPT, SCRIPT LOAD and the EVALSHA once
// more; top-level error replies raised as typed exceptions. A backend
// supplies only "send one command and return its raw reply":
//
//   Reply MyBackend::eval(const Script& script, const std::vector<std::string>& keys,
//                         const std::vector<std::string>& args) {
//     return eval_with_reload(script, keys, args, [&](const auto& argv) { return send(argv); });
//   }
//
// The hiredis backend and the simulator's fake backend both go through
// eval_with_reload, so a script behaves the same on either.

#ifndef TURNSTILE_SCRIPT_CALL_H_
#define TURNSTILE_SCRIPT_CALL_H_

#include <functional>
#include <string>
#include <vector>

#include "turnstile/reply.h"
#include "turnstile/script.h"

namespace turnstile {

// Sends one command and returns the raw reply, error replies as values.
// Transport failures are thrown (ConnectionError, TimeoutError).
using SendCommand = std::function<Reply(const std::vector<std::string>& argv)>;

// Runs `script` through `send` with transparent reload on NOSCRIPT, and
// raises a top-level error reply as the matching ServerError. A WRONGTYPE
// raised inside the script (by redis.call on a key of another type) is
// raised as one line naming the keys and the types they hold (one TYPE per
// key, at most 8, sent through `send`), not the script's SHA and line.
Reply eval_with_reload(const Script& script, const std::vector<std::string>& keys, const std::vector<std::string>& args,
                       const SendCommand& send);

// Returns `reply`, or raises it (throw_server_error) if it is an error reply.
Reply raise_if_error(Reply reply);

}  // namespace turnstile

#endif  // TURNSTILE_SCRIPT_CALL_H_
