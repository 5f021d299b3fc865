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

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/export.h"
#include "turnstile/mutex.h"
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
// `on_load`, if given, is told each time the script had to be loaded.
TURNSTILE_EXPORT Reply eval_with_reload(const Script& script, const std::vector<std::string>& keys,
                                        const std::vector<std::string>& args, const SendCommand& send,
                                        const std::function<void(const Script&)>& on_load = {});

// Tells a script's first load on a server from a reload (after a restart
// or SCRIPT FLUSH emptied that server's script cache; on a new master
// after a failover, loads are first loads), for
// BackendCounters::script_reloads. Thread-safe; remembers at most
// kMaxRemembered (server, script) pairs, then starts afresh (a later
// first load may then count as a reload).
class TURNSTILE_EXPORT ScriptLoadCounter {
 public:
  static constexpr std::size_t kMaxRemembered = 4096;

  // `script` was loaded on `server` (any name that tells servers apart).
  void loaded(std::string_view server, const Script& script);
  // Loads of a script already loaded on the same server before.
  std::uint64_t reloads() const { return reloads_.load(std::memory_order_relaxed); }

 private:
  Mutex mutex_;
  std::set<std::string, std::less<>> loaded_ TURNSTILE_GUARDED_BY(mutex_);  // "<sha1> <server>"
  std::atomic<std::uint64_t> reloads_{0};
};

// Returns `reply`, or raises it (throw_server_error) if it is an error reply.
TURNSTILE_EXPORT Reply raise_if_error(Reply reply);

}  // namespace turnstile

#endif  // TURNSTILE_SCRIPT_CALL_H_
