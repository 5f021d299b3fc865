// cli/duration.h
//
// Durations on the command line: a decimal number and a unit, "250ms",
// "1.5s", "2m", "1h". A bare "0" needs no unit (`--wait 0`). Results are
// whole milliseconds: a fraction finer than that ("0.5ms", "1.0001s") is
// refused rather than rounded, as are negative values, missing or unknown
// units, and anything longer than kMaxDuration. Where flock(1) takes
// seconds (`run -w 2`), a bare number is seconds (DurationSyntax).

#ifndef TURNSTILE_CLI_DURATION_H_
#define TURNSTILE_CLI_DURATION_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "turnstile/client.h"

namespace turnstile::cli {

// Longer than any sensible wait or lease (about 115 days), short enough that
// adding it to a clock reading never overflows: the library's longest lease.
inline constexpr std::chrono::milliseconds kMaxDuration = kMaxLease;

struct DurationSyntax {
  // A number without a unit is seconds ("2", "0.5"), as flock's -w takes
  // it; otherwise it is refused (a bare "0" is always zero).
  bool bare_number_is_seconds = false;
};

// Parses `text`. Throws UsageError naming `what` (the option, "--lease") and
// the text: "--lease: malformed duration '5x' (expected e.g. 250ms, 1.5s, 2m, 1h)".
std::chrono::milliseconds parse_duration(std::string_view text, std::string_view what, DurationSyntax syntax = {});

// "250ms", "1.5s", "2m", "1h30m" is not produced: the largest unit that
// renders exactly, else milliseconds ("90s", "1500ms").
std::string format_duration(std::chrono::milliseconds duration);

// For people reading a status: "350ms", "1.2s" (tenths below a minute,
// rounded down), "2m5s", "3h20m", "4d2h". Negative durations print as
// "-" and the rest ("-1.5s").
std::string readable_duration(std::chrono::milliseconds duration);

// An instant (Unix epoch milliseconds) in this host's time zone, to the
// millisecond: "2026-11-25 08:10:03.250 +0100".
std::string local_time_text(std::int64_t epoch_ms);

// An instant as ISO 8601 in UTC, to the millisecond, for JSON:
// "2026-11-25T07:10:03.250Z".
std::string iso8601_utc(std::int64_t epoch_ms);

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_DURATION_H_
