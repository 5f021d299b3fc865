// Parsing and printing command-line durations.

#include "cli/duration.h"

#include <array>
#include <cstdint>
#include <cstdio>
#include <ctime>

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

namespace {

enum class Zone { utc, local };

// Splits epoch ms into a calendar time in `zone` and the milliseconds.
std::tm calendar_time(std::int64_t epoch_ms, Zone zone, int* milliseconds) {
  std::int64_t seconds = epoch_ms / 1000;
  std::int64_t remainder = epoch_ms % 1000;
  if (remainder < 0) {  // before 1970: floor, so the milliseconds stay positive
    remainder += 1000;
    --seconds;
  }
  *milliseconds = static_cast<int>(remainder);
  const std::time_t as_time = static_cast<std::time_t>(seconds);
  std::tm calendar{};
  if (zone == Zone::local) {
    localtime_r(&as_time, &calendar);
  } else {
    gmtime_r(&as_time, &calendar);
  }
  return calendar;
}

std::string formatted(const std::tm& calendar, const char* format) {
  char text[64];
  const std::size_t size = std::strftime(text, sizeof(text), format, &calendar);
  return std::string(text, size);
}

}  // namespace

std::string readable_duration(std::chrono::milliseconds duration) {
  std::int64_t ms = duration.count();
  if (ms < 0) {
    // -ms of the most negative value overflows; no status is that long.
    return ms == INT64_MIN ? "-" + std::to_string(ms) + "ms" : "-" + readable_duration(std::chrono::milliseconds(-ms));
  }
  constexpr std::int64_t kMinute = 60'000, kHour = 60 * kMinute, kDay = 24 * kHour;
  if (ms < 1000) return std::to_string(ms) + "ms";
  if (ms < kMinute) {
    const std::int64_t tenths = ms / 100;
    return std::to_string(tenths / 10) + (tenths % 10 == 0 ? "" : "." + std::to_string(tenths % 10)) + "s";
  }
  const auto two_units = [](std::int64_t value, std::int64_t unit, const char* name, std::int64_t smaller,
                            const char* smaller_name) {
    const std::int64_t rest = (value % unit) / smaller;
    return std::to_string(value / unit) + name + (rest == 0 ? "" : std::to_string(rest) + smaller_name);
  };
  if (ms < kHour) return two_units(ms, kMinute, "m", 1000, "s");
  if (ms < kDay) return two_units(ms, kHour, "h", kMinute, "m");
  return two_units(ms, kDay, "d", kHour, "h");
}

std::string local_time_text(std::int64_t epoch_ms) {
  int milliseconds = 0;
  const std::tm calendar = calendar_time(epoch_ms, Zone::local, &milliseconds);
  char fraction[8];
  std::snprintf(fraction, sizeof(fraction), ".%03d", milliseconds);
  return formatted(calendar, "%Y-%m-%d %H:%M:%S") + fraction + formatted(calendar, " %z");
}

std::string iso8601_utc(std::int64_t epoch_ms) {
  int milliseconds = 0;
  const std::tm calendar = calendar_time(epoch_ms, Zone::utc, &milliseconds);
  char fraction[8];
  std::snprintf(fraction, sizeof(fraction), ".%03dZ", milliseconds);
  return formatted(calendar, "%Y-%m-%dT%H:%M:%S") + fraction;
}

}  // namespace turnstile::cli
