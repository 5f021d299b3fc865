#include "redis/command_format.h"

#include <charconv>
#include <cstddef>
#include <cstring>

#include "core/check.h"

namespace turnstile::redis {
namespace {

// Digits of `value` in decimal.
std::size_t decimal_digits(std::size_t value) {
  std::size_t digits = 1;
  while (value >= 10) {
    value /= 10;
    ++digits;
  }
  return digits;
}

// Writes `marker`, `value` in decimal and CRLF at `at`; returns the end.
char* write_header(char* at, char marker, std::size_t value, std::size_t digits) {
  *at++ = marker;
  const std::to_chars_result written = std::to_chars(at, at + digits, value);
  TURNSTILE_CHECK(written.ec == std::errc() && written.ptr == at + digits);
  at += digits;
  *at++ = '\r';
  *at++ = '\n';
  return at;
}

}  // namespace

void append_command(std::string& out, const std::vector<std::string>& argv) {
  // The exact size first, so that the bytes are written in place: a header
  // is its marker, its digits and CRLF; an argument is followed by CRLF.
  const std::size_t count_digits = decimal_digits(argv.size());
  std::size_t size = 1 + count_digits + 2;
  for (const std::string& arg : argv) size += 1 + decimal_digits(arg.size()) + 2 + arg.size() + 2;
  const std::size_t start = out.size();
  out.resize(start + size);
  char* at = out.data() + start;
  at = write_header(at, '*', argv.size(), count_digits);
  for (const std::string& arg : argv) {
    at = write_header(at, '$', arg.size(), decimal_digits(arg.size()));
    if (!arg.empty()) std::memcpy(at, arg.data(), arg.size());
    at += arg.size();
    *at++ = '\r';
    *at++ = '\n';
  }
  TURNSTILE_CHECK(at == out.data() + out.size());
}

}  // namespace turnstile::redis
