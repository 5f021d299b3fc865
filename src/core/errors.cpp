#include "turnstile/errors.h"

#include <utility>

namespace turnstile {

ServerError::ServerError(std::string server_message)
    : Error(server_message), server_message_(std::move(server_message)) {}

std::string_view ServerError::code() const {
  std::string_view message = server_message_;
  return message.substr(0, message.find(' '));
}

void throw_server_error(std::string_view message) {
  const std::string_view code = message.substr(0, message.find(' '));
  std::string text(message);
  if (code == "WRONGTYPE") throw WrongTypeError(std::move(text));
  if (code == "NOSCRIPT") throw NoScriptError(std::move(text));
  if (code == "NOAUTH" || code == "WRONGPASS") throw AuthenticationError(std::move(text));
  if (code == "NOPERM") throw PermissionError(std::move(text));
  if (code == "READONLY") throw ReadOnlyError(std::move(text));
  if (code == "OOM") throw OutOfMemoryError(std::move(text));
  if (code == "CROSSSLOT") throw CrossSlotError(std::move(text));
  if (code == "BUSY") throw BusyError(std::move(text));
  // Script failures: compile errors, runtime errors, and redis.error_reply
  // from inside a script. Redis 7 tags them with "script:" or
  // "user_script:"; Redis 6 said "Error running script" / "Error compiling".
  if (message.find("user_script:") != std::string_view::npos ||
      message.find(" script: ") != std::string_view::npos ||
      message.find("Error running script") != std::string_view::npos ||
      message.find("Error compiling script") != std::string_view::npos) {
    throw ScriptError(std::move(text));
  }
  throw ServerError(std::move(text));
}

}  // namespace turnstile
