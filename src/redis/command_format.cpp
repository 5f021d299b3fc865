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

// The bytes one argument takes: its header, itself and CRLF.
std::size_t argument_size(std::string_view arg) { return 1 + decimal_digits(arg.size()) + 2 + arg.size() + 2; }

// Writes one argument at `at`; returns the end.
char* write_argument(char* at, std::string_view arg) {
  at = write_header(at, '$', arg.size(), decimal_digits(arg.size()));
  if (!arg.empty()) std::memcpy(at, arg.data(), arg.size());
  at += arg.size();
  *at++ = '\r';
  *at++ = '\n';
  return at;
}

}  // namespace

void append_command(std::string& out, std::initializer_list<std::string_view> head,
                    std::initializer_list<const std::vector<std::string>*> tails) {
  // The exact size first, so that the bytes are written in place: a header
  // is its marker, its digits and CRLF; an argument is followed by CRLF.
  std::size_t count = head.size();
  std::size_t size = 0;
  for (const std::string_view word : head) size += argument_size(word);
  for (const std::vector<std::string>* tail : tails) {
    TURNSTILE_CHECK(tail != nullptr);
    count += tail->size();
    for (const std::string& arg : *tail) size += argument_size(arg);
  }
  const std::size_t count_digits = decimal_digits(count);
  size += 1 + count_digits + 2;
  const std::size_t start = out.size();
  out.resize(start + size);
  char* at = out.data() + start;
  at = write_header(at, '*', count, count_digits);
  for (const std::string_view word : head) at = write_argument(at, word);
  for (const std::vector<std::string>* tail : tails) {
    for (const std::string& arg : *tail) at = write_argument(at, arg);
  }
  TURNSTILE_CHECK(at == out.data() + out.size());
}

void append_command(std::string& out, const std::vector<std::string>& argv) { append_command(out, {}, {&argv}); }

}  // namespace turnstile::redis
