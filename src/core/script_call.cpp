#include "core/script_call.h"

#include <cstddef>
#include <optional>
#include <string>
#include <utility>

#include "core/check.h"
#include "turnstile/errors.h"

namespace turnstile {

std::vector<std::string> evalsha_argv(const Script& script, const std::vector<std::string>& keys,
                                      const std::vector<std::string>& args) {
  std::vector<std::string> argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.emplace_back("EVALSHA");
  argv.emplace_back(script.sha1);
  argv.push_back(std::to_string(keys.size()));
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

void ScriptLoadCounter::loaded(std::string_view server, const Script& script) {
  std::string key = std::string(script.sha1) + ' ' + std::string(server);
  MutexLock guard(mutex_);
  if (loaded_.contains(key)) {
    reloads_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (loaded_.size() >= kMaxRemembered) loaded_.clear();
  loaded_.insert(std::move(key));
}

Reply raise_if_error(Reply reply) {
  if (reply.is_error()) throw_server_error(reply.as_string());
  return reply;
}

bool is_noscript(const Reply& reply) { return reply.is_error() && reply.as_string().starts_with("NOSCRIPT"); }

std::vector<std::string> script_load_argv(const Script& script) {
  return {"SCRIPT", "LOAD", std::string(script.source)};
}

void check_script_loaded(const Script& script, const Reply& loaded) {
  if (loaded.is_error()) throw_server_error(loaded.as_string());
  if (!loaded.is_bulk() || loaded.as_string() != script.sha1) {
    throw ProtocolError("SCRIPT LOAD of '" + std::string(script.name) + "' answered " + loaded.to_string() +
                        ", expected its SHA-1 " + std::string(script.sha1));
  }
}

namespace {

// The most keys one explanation asks TYPE of (every script has fewer).
constexpr std::size_t kMaxExplainedKeys = 8;

// A WRONGTYPE raised by redis.call inside a script names the script's SHA
// and line ("... script: <sha>, on @user_script:9."), not the key. One TYPE
// per key of the call, on the same connection, names what each holds now:
// "WRONGTYPE a key of permit_semaphore holds another kind of value: 'x'
// holds a string, '{x}:timeout' holds a string". nullopt when that cannot
// be told (a TYPE failed; nothing there any more): the server's text stands.
std::optional<std::string> explain_wrong_type(const Script& script, const std::vector<std::string>& keys,
                                              const SendCommand& send) {
  std::string held;
  try {
    for (std::size_t i = 0; i < keys.size() && i < kMaxExplainedKeys; ++i) {
      const Reply type = send({"TYPE", keys[i]});
      if (!type.is_status() || type.as_string() == "none") continue;
      held += (held.empty() ? "" : ", ") + in_quotes(keys[i]) + " holds a " + type.as_string();
    }
  } catch (const Error&) {
    return std::nullopt;  // the script's own error is the one to report
  }
  if (held.empty()) return std::nullopt;
  return "WRONGTYPE a key of " + std::string(script.name) + " holds another kind of value: " + held;
}

// Raised by redis.call: Redis 7 keeps the code first and appends where
// ("WRONGTYPE ... script: <sha>, on @user_script:9."); Redis 6.2 wraps it
// ("ERR Error running script (call to f_<sha>): @user_script:9: WRONGTYPE
// ..."). A script's own redis.error_reply has neither, and names its key.
bool is_wrong_type_in_script(const Reply& reply) {
  if (!reply.is_error() || ServerError(reply.as_string()).code() != "WRONGTYPE") return false;
  const std::string& text = reply.as_string();
  return text.find(" script: ") != std::string::npos || text.starts_with("ERR Error running script");
}

}  // namespace

Reply eval_with_reload(const Script& script, const std::vector<std::string>& keys, const std::vector<std::string>& args,
                       const SendCommand& send, const std::function<void(const Script&)>& on_load) {
  const std::vector<std::string> argv = evalsha_argv(script, keys, args);
  return eval_parts_with_reload(
      script, keys, [&] { return send(argv); }, send, on_load);
}

Reply eval_parts_with_reload(const Script& script, const std::vector<std::string>& keys,
                             const SendEvalsha& send_evalsha, const SendCommand& send,
                             const std::function<void(const Script&)>& on_load) {
  TURNSTILE_CHECK(script.sha1.size() == 40);
  Reply reply = send_evalsha();
  if (is_noscript(reply)) {
    check_script_loaded(script, send(script_load_argv(script)));
    if (on_load) on_load(script);
    reply = send_evalsha();
  }
  if (is_wrong_type_in_script(reply)) {
    if (std::optional<std::string> explained = explain_wrong_type(script, keys, send)) {
      throw WrongTypeError(std::move(*explained));
    }
  }
  return raise_if_error(std::move(reply));
}

}  // namespace turnstile
