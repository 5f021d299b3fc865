// Command-line durations: the accepted forms, and every malformed one
// refused with a message naming the option and the text.

#include "cli/duration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/exit_status.h"

namespace turnstile::cli {
namespace {

using std::chrono::milliseconds;

TEST(DurationTest, AcceptsEveryUnit) {
  EXPECT_EQ(parse_duration("250ms", "--wait"), milliseconds(250));
  EXPECT_EQ(parse_duration("1.5s", "--wait"), milliseconds(1500));
  EXPECT_EQ(parse_duration("2m", "--wait"), milliseconds(120'000));
  EXPECT_EQ(parse_duration("1h", "--wait"), milliseconds(3'600'000));
  EXPECT_EQ(parse_duration("0.25h", "--wait"), milliseconds(900'000));
  EXPECT_EQ(parse_duration("0.001s", "--wait"), milliseconds(1));
  EXPECT_EQ(parse_duration("30s", "--wait"), milliseconds(30'000));
}

TEST(DurationTest, ZeroNeedsNoUnit) {
  EXPECT_EQ(parse_duration("0", "--wait"), milliseconds(0));
  EXPECT_EQ(parse_duration("0s", "--wait"), milliseconds(0));
  EXPECT_EQ(parse_duration("0.0ms", "--wait"), milliseconds(0));
}

// flock's -w takes seconds: where asked, a bare number is seconds, with
// the same bounds and the same refusals otherwise.
TEST(DurationTest, ABareNumberIsSecondsWhereAsked) {
  const DurationSyntax seconds{.bare_number_is_seconds = true};
  EXPECT_EQ(parse_duration("2", "-w", seconds), milliseconds(2000));
  EXPECT_EQ(parse_duration("0.5", "-w", seconds), milliseconds(500));
  EXPECT_EQ(parse_duration("0", "-w", seconds), milliseconds(0));
  EXPECT_EQ(parse_duration("250ms", "-w", seconds), milliseconds(250));
  for (const char* text : {"", "-2", "0.0001", "1.", ".5", "1e3", "99999999999"}) {
    EXPECT_THROW(parse_duration(text, "-w", seconds), UsageError) << "'" << text << "'";
  }
  EXPECT_THROW(parse_duration("2", "--lease"), UsageError);  // elsewhere a unit is needed
}

// What status prints for people: the largest units that matter.
TEST(DurationTest, ReadableDurations) {
  EXPECT_EQ(readable_duration(milliseconds(0)), "0ms");
  EXPECT_EQ(readable_duration(milliseconds(350)), "350ms");
  EXPECT_EQ(readable_duration(milliseconds(999)), "999ms");
  EXPECT_EQ(readable_duration(milliseconds(1000)), "1s");
  EXPECT_EQ(readable_duration(milliseconds(1234)), "1.2s");
  EXPECT_EQ(readable_duration(milliseconds(59'999)), "59.9s");
  EXPECT_EQ(readable_duration(milliseconds(60'000)), "1m");
  EXPECT_EQ(readable_duration(milliseconds(125'500)), "2m5s");
  EXPECT_EQ(readable_duration(milliseconds(3'600'000 * 3 + 60'000 * 20 + 999)), "3h20m");
  EXPECT_EQ(readable_duration(milliseconds(86'400'000LL * 4 + 3'600'000 * 2)), "4d2h");
  EXPECT_EQ(readable_duration(milliseconds(-1500)), "-1.5s");
  EXPECT_EQ(readable_duration(milliseconds::min()), "-" + std::to_string(milliseconds::min().count()) + "ms");
}

TEST(DurationTest, InstantsInUtcAndLocalTime) {
  EXPECT_EQ(iso8601_utc(1'700'000'000'250), "2023-11-14T22:13:20.250Z");
  EXPECT_EQ(iso8601_utc(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(iso8601_utc(-1), "1969-12-31T23:59:59.999Z");
  // The local form carries its offset, so it names the same instant.
  const std::string local = local_time_text(1'700'000'000'250);
  EXPECT_THAT(local, ::testing::MatchesRegex("2023-11-1[45] [0-9]{2}:[0-9]{2}:20\\.250 [+-][0-9]{4}")) << local;
}

TEST(DurationTest, RefusesMalformedText) {
  for (const char* text : {"", "5", "5x", "s", "-1s", "1.s", ".5s", "1..5s", "1.5.5s", "1 s", " 1s", "1s ", "1sec",
                           "1S", "1e3ms", "+1s", "0x10s", "1m30s"}) {
    EXPECT_THROW(parse_duration(text, "--wait"), UsageError) << "'" << text << "'";
  }
}

TEST(DurationTest, RefusesFractionsOfAMillisecond) {
  EXPECT_THROW(parse_duration("0.5ms", "--lease"), UsageError);
  EXPECT_THROW(parse_duration("1.0001s", "--lease"), UsageError);
  EXPECT_THROW(parse_duration("0.0000000000001h", "--lease"), UsageError);
  // Trailing zeros are not precision.
  EXPECT_EQ(parse_duration("1.500000000000000s", "--lease"), milliseconds(1500));
}

TEST(DurationTest, RefusesDurationsLongerThanTheMaximum) {
  EXPECT_EQ(parse_duration(format_duration(kMaxDuration), "--wait"), kMaxDuration);
  EXPECT_THROW(parse_duration("2689h", "--wait"), UsageError);
  EXPECT_THROW(parse_duration("999999999999999h", "--wait"), UsageError);
  EXPECT_THROW(parse_duration("9999999999999999999999ms", "--wait"), UsageError);
}

TEST(DurationTest, MessageNamesTheOptionAndTheText) {
  try {
    parse_duration("5x", "--kill-grace");
    FAIL() << "accepted 5x";
  } catch (const UsageError& error) {
    EXPECT_THAT(error.what(), ::testing::HasSubstr("--kill-grace"));
    EXPECT_THAT(error.what(), ::testing::HasSubstr("'5x'"));
    EXPECT_THAT(error.what(), ::testing::HasSubstr("unknown unit 'x'"));
  }
}

TEST(DurationTest, FormatsWithTheLargestExactUnit) {
  EXPECT_EQ(format_duration(milliseconds(0)), "0ms");
  EXPECT_EQ(format_duration(milliseconds(250)), "250ms");
  EXPECT_EQ(format_duration(milliseconds(1500)), "1500ms");
  EXPECT_EQ(format_duration(milliseconds(90'000)), "90s");
  EXPECT_EQ(format_duration(milliseconds(120'000)), "2m");
  EXPECT_EQ(format_duration(milliseconds(7'200'000)), "2h");
}

TEST(DurationTest, FormatAndParseRoundTrip) {
  for (std::int64_t ms : {1, 999, 1000, 59'999, 60'000, 3'599'999, 3'600'000, 86'400'000}) {
    EXPECT_EQ(parse_duration(format_duration(milliseconds(ms)), "--lease"), milliseconds(ms));
  }
}

}  // namespace
}  // namespace turnstile::cli
