#include "fake_redis/command_args.h"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/check.h"

namespace turnstile::sim {
namespace {

// Enough for "%.17g" of any double ("-1.2345678901234567e-308").
constexpr std::size_t kMaxScoreChars = 32;

// Below this magnitude an integral double prints the same under "%.17g" as
// its integer digits (no exponent, no fraction).
constexpr double kPlainIntegerLimit = 1e15;

// Up to 15 decimal digits every integer is exact in a double, so strtod's
// result is the integer itself.
constexpr std::size_t kExactIntegerDigits = 15;

}  // namespace

std::optional<double> parse_short_integer_float(std::string_view text) {
  const bool negative = text.starts_with('-');
  const std::string_view digits = negative ? text.substr(1) : text;
  if (digits.empty() || digits.size() > kExactIntegerDigits) return std::nullopt;
  std::int64_t magnitude = 0;
  for (const char digit : digits) {
    if (digit < '0' || digit > '9') return std::nullopt;
    magnitude = magnitude * 10 + (digit - '0');
  }
  const auto value = static_cast<double>(magnitude);
  return negative ? -value : value;  // "-0" is -0.0, as strtod reads it
}

std::optional<std::int64_t> parse_integer(std::string_view text) {
  if (text == "0") return 0;
  bool negative = false;
  std::size_t position = 0;
  if (!text.empty() && text[0] == '-') {
    negative = true;
    position = 1;
  }
  if (position >= text.size() || text[position] < '1' || text[position] > '9') return std::nullopt;
  std::uint64_t magnitude = 0;
  constexpr std::uint64_t kMaxMagnitude = std::numeric_limits<std::uint64_t>::max();
  for (; position < text.size(); ++position) {
    char digit = text[position];
    if (digit < '0' || digit > '9') return std::nullopt;
    std::uint64_t value = static_cast<std::uint64_t>(digit - '0');
    if (magnitude > (kMaxMagnitude - value) / 10) return std::nullopt;
    magnitude = magnitude * 10 + value;
  }
  constexpr auto kMaxPositive = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (negative) {
    if (magnitude > kMaxPositive + 1) return std::nullopt;
    TURNSTILE_CHECK(magnitude > 0);  // "-0" and "0..." were refused above
    // -(2^63) has no positive counterpart: negate in unsigned arithmetic.
    return static_cast<std::int64_t>(0 - magnitude);
  }
  if (magnitude > kMaxPositive) return std::nullopt;
  return static_cast<std::int64_t>(magnitude);
}

std::optional<double> parse_float(std::string_view text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return std::nullopt;
  if (const std::optional<double> integer = parse_short_integer_float(text)) return integer;
  std::string owned(text);  // strtod needs a terminator; an embedded NUL ends it early
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(owned.c_str(), &end);
  if (static_cast<std::size_t>(end - owned.c_str()) != owned.size()) return std::nullopt;
  if (errno == ERANGE && (value == HUGE_VAL || value == -HUGE_VAL || value == 0)) return std::nullopt;
  if (std::isnan(value)) return std::nullopt;
  return value;
}

bool option_is(std::string_view argument, std::string_view lower_case_option) {
  argument = argument.substr(0, argument.find('\0'));
  if (argument.size() != lower_case_option.size()) return false;
  for (std::size_t i = 0; i < argument.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(argument[i])) != lower_case_option[i]) return false;
  }
  return true;
}

void assign_g17(double value, std::string& text) {
  char buffer[kMaxScoreChars];
  // Integral values below 10^15 (timestamps in ms, counts, leases) print
  // as their integer digits: the integer path, the cheapest.
  if (value == std::trunc(value) && std::fabs(value) < kPlainIntegerLimit && !(value == 0 && std::signbit(value))) {
    const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, static_cast<std::int64_t>(value));
    TURNSTILE_CHECK(error == std::errc());
    text.assign(buffer, end);
    return;
  }
  // to_chars with a precision prints as printf does, in a fraction of
  // snprintf's time (ZSCORE in the fair queue's loops).
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::general, 17);
  TURNSTILE_CHECK_MSG(error == std::errc(), "kMaxScoreChars holds any double");
  text.assign(buffer, end);
}

std::string lower_case(std::string_view text) {
  std::string lowered(text);
  for (char& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lowered;
}

std::optional<std::int64_t> checked_add(std::int64_t value, std::int64_t increment) {
  std::int64_t sum = 0;
  if (__builtin_add_overflow(value, increment, &sum)) return std::nullopt;
  return sum;
}

}  // namespace turnstile::sim
