// The shapes of lock values (lock_shape.h).

#include "locks/lock_shape.h"

#include <cstddef>

namespace turnstile::detail {
namespace {

constexpr std::size_t kUuidLength = 36;
constexpr std::size_t kTokenHexDigits = 32;

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// 8-4-4-4-12 hex digits, dashes between.
bool is_uuid(std::string_view text) {
  if (text.size() != kUuidLength) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? text[i] != '-' : !is_hex(text[i])) return false;
  }
  return true;
}

// Whether `text` is "<uuid>:" and more; `rest` is the more.
bool split_uuid(std::string_view text, std::string_view& rest) {
  if (text.size() <= kUuidLength + 1 || text[kUuidLength] != ':' || !is_uuid(text.substr(0, kUuidLength))) {
    return false;
  }
  rest = text.substr(kUuidLength + 1);
  return true;
}

}  // namespace

bool is_owner_id(std::string_view text) {
  std::string_view rest;
  if (!split_uuid(text, rest)) return false;
  for (char c : rest) {
    if (!is_digit(c)) return false;
  }
  return true;
}

bool is_hold_count(std::string_view text) {
  if (text.empty() || text.front() == '0') return false;
  for (char c : text) {
    if (!is_digit(c)) return false;
  }
  return true;
}

bool is_lock_token(std::string_view text) {
  std::string_view rest;
  if (!split_uuid(text, rest) || rest.size() != kTokenHexDigits) return false;
  for (char c : rest) {
    if (!is_hex(c)) return false;
  }
  return true;
}

}  // namespace turnstile::detail
