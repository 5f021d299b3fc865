// core/script_call.h
//
// The script-calling logic both backends share: EVALSHA first, and on
// NOSCRIPT load the script and retry once; top-level error replies become
// typed exceptions. A backend supplies only "send one command"
// (eval_with_reload, public in turnstile/script_call.h), or, when it drives
// the round trips itself (a pipelined call, redis/pending_eval.h), uses the
// steps below in the same order.

#ifndef TURNSTILE_CORE_SCRIPT_CALL_H_
#define TURNSTILE_CORE_SCRIPT_CALL_H_

#include <functional>
#include <string>
#include <vector>

#include "turnstile/reply.h"
#include "turnstile/script.h"
#include "turnstile/script_call.h"

namespace turnstile {

// EVALSHA <sha> <numkeys> keys... args...
std::vector<std::string> evalsha_argv(const Script& script, const std::vector<std::string>& keys,
                                      const std::vector<std::string>& args);

// Sends the call's EVALSHA <sha> <numkeys> keys... args..., written by the
// transport from those parts (nothing copied into an argv first).
using SendEvalsha = std::function<Reply()>;

// eval_with_reload() with its EVALSHA sent by `send_evalsha`; the other
// commands it may need (SCRIPT LOAD, TYPE) go through `send`.
Reply eval_parts_with_reload(const Script& script, const std::vector<std::string>& keys,
                             const SendEvalsha& send_evalsha, const SendCommand& send,
                             const std::function<void(const Script&)>& on_load);

// The steps of eval_with_reload, for a caller that sends and reads itself:
// whether the server did not know the script (then send
// script_load_argv(), check its reply with check_script_loaded(), and send
// the EVALSHA once more), and the final reply through raise_if_error().
bool is_noscript(const Reply& reply);
// SCRIPT LOAD <source>
std::vector<std::string> script_load_argv(const Script& script);
// Raises the error SCRIPT LOAD answered, or ProtocolError if the server
// hashed the source to another SHA-1 than the build did.
void check_script_loaded(const Script& script, const Reply& loaded);

}  // namespace turnstile

#endif  // TURNSTILE_CORE_SCRIPT_CALL_H_
