// core/script_call.h
//
// The script-calling logic both backends share: EVALSHA first, and on
// NOSCRIPT load the script and retry once; top-level error replies become
// typed exceptions. A backend supplies only "send one command".

#ifndef TURNSTILE_CORE_SCRIPT_CALL_H_
#define TURNSTILE_CORE_SCRIPT_CALL_H_

#include <functional>
#include <string>
#include <vector>

#include "turnstile/reply.h"
#include "turnstile/script.h"

namespace turnstile {

// Sends one command and returns the raw reply, error replies as values.
// Transport failures are thrown (ConnectionError, TimeoutError).
using SendCommand = std::function<Reply(const std::vector<std::string>& argv)>;

// EVALSHA <sha> <numkeys> keys... args...
std::vector<std::string> evalsha_argv(const Script& script, const std::vector<std::string>& keys,
                                      const std::vector<std::string>& args);

// Runs `script` through `send` with transparent reload on NOSCRIPT, and
// raises a top-level error reply as the matching ServerError.
Reply eval_with_reload(const Script& script, const std::vector<std::string>& keys,
                       const std::vector<std::string>& args, const SendCommand& send);

// Returns `reply`, or raises it if it is an error reply.
Reply raise_if_error(Reply reply);

}  // namespace turnstile

#endif  // TURNSTILE_CORE_SCRIPT_CALL_H_
