#include "core/script_call.h"

#include <cassert>
#include <utility>

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

Reply eval_with_reload(const Script& script, const std::vector<std::string>& keys,
                       const std::vector<std::string>& args, const SendCommand& send) {
  assert(script.sha1.size() == 40);
  const std::vector<std::string> argv = evalsha_argv(script, keys, args);
  Reply reply = send(argv);
  if (is_noscript(reply)) {
    check_script_loaded(script, send(script_load_argv(script)));
    reply = send(argv);
  }
  return raise_if_error(std::move(reply));
}

}  // namespace turnstile
