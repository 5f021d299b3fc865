#include "turnstile/errors.h"

#include <utility>

namespace turnstile {

ServerError::ServerError(std::string server_message)
    : Error(server_message), server_message_(std::move(server_message)) {}

std::string_view ServerError::code() const {
  std::string_view message = server_message_;
  return message.substr(0, message.find(' '));
}

namespace {

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

std::string in_quotes(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() + 2);
  out += '\'';
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
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
  if (message.find("user_script:") != std::string_view::npos || message.find(" script: ") != std::string_view::npos ||
      message.find("Error running script") != std::string_view::npos ||
      message.find("Error compiling script") != std::string_view::npos) {
    throw ScriptError(std::move(text));
  }
  throw ServerError(std::move(text));
}

}  // namespace turnstile
