// Fuzz target: the command line's durations (src/cli/duration.*).
//
// Input: any bytes, as the text of an option like `--ttl`.
// Properties: parse_duration() returns a duration in [0, kMaxDuration] or
// throws UsageError (nothing else); what it returns, format_duration()
// renders as text that parses back to the same duration.

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "cli/duration.h"
#include "cli/exit_status.h"
#include "fuzz_check.h"

using turnstile::fuzz::fuzz_check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using turnstile::cli::kMaxDuration;
  std::chrono::milliseconds parsed{};
  try {
    parsed = turnstile::cli::parse_duration(turnstile::fuzz::as_text(data, size), "--lease");
  } catch (const turnstile::cli::UsageError&) {
    return 0;
  }
  fuzz_check(parsed >= std::chrono::milliseconds::zero() && parsed <= kMaxDuration, "duration out of range");
  fuzz_check(turnstile::cli::parse_duration(turnstile::cli::format_duration(parsed), "--lease") == parsed,
             "format_duration does not parse back");
  return 0;
}
