// Parsing and printing command-line durations.

#include "cli/duration.h"

#include <array>
#include <cstdint>

#include "cli/exit_status.h"

namespace turnstile::cli {
namespace {

struct Unit {
  std::string_view suffix;
  std::int64_t milliseconds;
};

// Longest suffix first, so "ms" is not read as "m" followed by junk.
constexpr std::array<Unit, 4> kUnits = {{{"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}}};

// Enough digits for kMaxDuration in any unit, and more than any real input.
constexpr std::size_t kMaxDigits = 15;

[[noreturn]] void malformed(std::string_view text, std::string_view what, std::string_view why) {
  throw UsageError(std::string(what) + ": malformed duration '" + std::string(text) + "' (" + std::string(why) +
                   "; expected e.g. 250ms, 1.5s, 2m, 1h)");
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

std::chrono::milliseconds parse_duration(std::string_view text, std::string_view what, DurationSyntax syntax) {
  if (text == "0") return std::chrono::milliseconds::zero();
  if (text.empty()) malformed(text, what, "empty");
  if (text.front() == '-') malformed(text, what, "negative");

  std::size_t position = 0;
  std::int64_t whole = 0;
  std::size_t whole_digits = 0;
  while (position < text.size() && is_digit(text[position])) {
    if (++whole_digits > kMaxDigits) malformed(text, what, "too long");
    whole = whole * 10 + (text[position] - '0');
    ++position;
  }
  std::int64_t fraction = 0;  // the digits after the point, as an integer
  std::int64_t fraction_scale = 1;
  std::size_t fraction_digits = 0;
  if (position < text.size() && text[position] == '.') {
    ++position;
    while (position < text.size() && is_digit(text[position])) {
      if (++fraction_digits > kMaxDigits) malformed(text, what, "too long");
      fraction = fraction * 10 + (text[position] - '0');
      fraction_scale *= 10;
      ++position;
    }
    if (fraction_digits == 0) malformed(text, what, "no digits after the point");
  }
  if (whole_digits == 0) malformed(text, what, "no number");

  std::string_view suffix = text.substr(position);
  if (suffix.empty()) {
    if (!syntax.bare_number_is_seconds) malformed(text, what, "missing unit");
    suffix = "s";
  }
  for (const Unit& unit : kUnits) {
    if (suffix != unit.suffix) continue;
    const std::int64_t max_whole = kMaxDuration.count() / unit.milliseconds;
    if (whole > max_whole) malformed(text, what, "longer than " + format_duration(kMaxDuration));
    // fraction / fraction_scale of a unit, in ms; must come out whole.
    // fraction_scale ≤ 10^15 and unit.milliseconds ≤ 3.6·10^6 could
    // overflow, so reduce the fraction first.
    std::int64_t numerator = fraction;
    std::int64_t denominator = fraction_scale;
    while (denominator > 1 && numerator % 10 == 0) {
      numerator /= 10;
      denominator /= 10;
    }
    if (denominator > 1'000'000'000) malformed(text, what, "finer than 1 ms");
    const std::int64_t scaled = numerator * unit.milliseconds;
    if (scaled % denominator != 0) malformed(text, what, "finer than 1 ms");
    const std::chrono::milliseconds result(whole * unit.milliseconds + scaled / denominator);
    if (result > kMaxDuration) malformed(text, what, "longer than " + format_duration(kMaxDuration));
    return result;
  }
  malformed(text, what, "unknown unit '" + std::string(suffix) + "'");
}

std::string format_duration(std::chrono::milliseconds duration) {
  const std::int64_t ms = duration.count();
  if (ms != 0) {
    for (auto unit = kUnits.rbegin(); unit != kUnits.rend(); ++unit) {
      if (ms % unit->milliseconds == 0) return std::to_string(ms / unit->milliseconds) + std::string(unit->suffix);
    }
  }
  return std::to_string(ms) + "ms";
}

}  // namespace turnstile::cli
