#include "turnstile/errors.h"

#include <utility>

namespace turnstile {

ServerError::ServerError(std::string server_message)
    : Error(server_message), server_message_(std::move(server_message)) {}

namespace {

// How many "@user_script:N: " locations Redis 6.2 may put before an error
// raised inside a script (one per luaPushError and one per raise).
constexpr int kMaxScriptLocations = 4;

// Redis 6.2 wraps an error raised inside a script in its own ERR reply:
//   ERR Error running script (call to f_<sha>): @user_script:1: WRONGTYPE Operation ...
//   ERR Error running script (call to f_<sha>): @user_script:7: @user_script: 7: -OOM command not allowed ...
// (the second form for the checks made before a command runs: OOM,
// READONLY, NOREPLICAS, ACL). Redis 7 keeps the inner code first. Returns
// the inner error's code, or an empty view if `message` is not so wrapped.
std::string_view wrapped_script_code(std::string_view message) {
  constexpr std::string_view kWrapped = "ERR Error running script";
  if (!message.starts_with(kWrapped)) return {};
  const std::size_t call_end = message.find("): ");
  if (call_end == std::string_view::npos) return {};
  std::string_view rest = message.substr(call_end + 3);
  for (int i = 0; i < kMaxScriptLocations && rest.starts_with('@'); ++i) {
    // "@user_script:1: " or "@user_script: 1: ": a source, a line, ": ".
    const std::size_t colon = rest.find(':');
    if (colon == std::string_view::npos) return {};
    std::size_t at = colon + 1;
    while (at < rest.size() && rest[at] == ' ') ++at;
    const std::size_t digits = at;
    while (at < rest.size() && rest[at] >= '0' && rest[at] <= '9') ++at;
    if (at == digits || rest.substr(at, 2) != ": ") return {};
    rest.remove_prefix(at + 2);
  }
  if (rest.starts_with('-')) rest.remove_prefix(1);
  return rest.substr(0, rest.find(' '));
}

// The first word of `message`, or the inner code of a Redis 6.2 wrapped
// script error (wrapped_script_code).
std::string_view code_of(std::string_view message) {
  const std::string_view first = message.substr(0, message.find(' '));
  if (first == "ERR") {
    if (const std::string_view inner = wrapped_script_code(message); !inner.empty()) return inner;
  }
  return first;
}

// The length of the well-formed UTF-8 sequence of 2..4 bytes at the start
// of `text`, or 0 (overlong forms, surrogates and code points past
// U+10FFFF are not well formed).
std::size_t utf8_sequence_length(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const auto continuation = [&](std::size_t i) { return i < text.size() && (byte(i) & 0xC0) == 0x80; };
  const unsigned char lead = byte(0);
  if (lead >= 0xC2 && lead <= 0xDF) return continuation(1) ? 2 : 0;
  if (lead >= 0xE0 && lead <= 0xEF) {
    if (!continuation(1) || !continuation(2)) return 0;
    if (lead == 0xE0 && byte(1) < 0xA0) return 0;   // overlong
    if (lead == 0xED && byte(1) >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    if (!continuation(1) || !continuation(2) || !continuation(3)) return 0;
    if (lead == 0xF0 && byte(1) < 0x90) return 0;   // overlong
    if (lead == 0xF4 && byte(1) >= 0x90) return 0;  // past U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

std::string_view ServerError::code() const { return code_of(server_message_); }

std::string in_quotes(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() + 2);
  out += '\'';
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    // U+0080..U+009F (C2 80..C2 9F) are the C1 controls (a CSI among
    // them): escaped byte by byte like the C0 ones.
    const bool c1_control = c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) < 0xA0;
    if (c >= 0x80 && !c1_control) {
      if (const std::size_t length = utf8_sequence_length(text.substr(i)); length != 0) {
        out.append(text.substr(i, length));
        i += length;
        continue;
      }
    }
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\'':
        out += "\\'";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (c >= 0x20 && c < 0x7F) {
          out += static_cast<char>(c);
        } else {
          out += "\\x";
          out += kHex[c >> 4];
          out += kHex[c & 0xF];
        }
    }
    ++i;
  }
  out += '\'';
  return out;
}

// Redis's texts for a script's command refused by ACL (see throw_server_error).
constexpr std::string_view kScriptAclFailure = "ACL failure in script";
constexpr std::string_view kScriptAclRefusal = "The user executing the script can't run this command";

void throw_server_error(std::string_view message) {
  const std::string_view code = code_of(message);
  std::string text(message);
  if (code == "WRONGTYPE") throw WrongTypeError(std::move(text));
  if (code == "NOSCRIPT") throw NoScriptError(std::move(text));
  if (code == "NOAUTH" || code == "WRONGPASS") throw AuthenticationError(std::move(text));
  if (code == "NOPERM") throw PermissionError(std::move(text));
  if (code == "READONLY") throw ReadOnlyError(std::move(text));
  if (code == "NOREPLICAS") throw NoReplicasError(std::move(text));
  if (code == "OOM") throw OutOfMemoryError(std::move(text));
  if (code == "CROSSSLOT") throw CrossSlotError(std::move(text));
  if (code == "BUSY") throw BusyError(std::move(text));
  if (code == "LOADING" || code == "MASTERDOWN") throw ServerNotReadyError(std::move(text));
  // A command inside a script refused by the user's ACL: Redis 7.2 and
  // Valkey say "ACL failure in script: ...", Redis 6.2 and 7.0 "The user
  // executing the script can't run this command or subcommand" (6.2's
  // inside its "Error running script" wrapping).
  if (message.find(kScriptAclFailure) != std::string_view::npos ||
      message.find(kScriptAclRefusal) != std::string_view::npos) {
    throw PermissionError(std::move(text));
  }
  // Script failures: compile errors, runtime errors, and redis.error_reply
  // from inside a script. Redis 7 tags them with "script:" or
  // "user_script:"; Redis 6 said "Error running script" / "Error compiling".
  if (message.find("user_script:") != std::string_view::npos || message.find(" script: ") != std::string_view::npos ||
      message.find("Error running script") != std::string_view::npos ||
      message.find("Error compiling script") != std::string_view::npos) {
    throw ScriptError(std::move(text));
  }
  throw ServerError(std::move(text));
}

}  // namespace turnstile
