// The checker of the fault harness on intervals written by hand.

#include <gtest/gtest.h>

#include "command_intervals.h"

namespace turnstile::testing {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

CommandInterval interval(int start_ms, int stop_ms) {
  // One origin for every interval, in the past (a running one ends now).
  static const MonotonicClock::time_point origin = MonotonicClock::now() - std::chrono::seconds(10);
  return CommandInterval{.pid = 1,
                         .parent_pid = 0,
                         .start = origin + milliseconds(start_ms),
                         .stop = origin + milliseconds(stop_ms),
                         .first_exit = origin + milliseconds(stop_ms),
                         .fencing_token = "-"};
}

TEST(CommandIntervalsTest, HandoffsWithoutOverlapHaveGapsAndOneAtATime) {
  const IntervalReport report = check_intervals({interval(0, 100), interval(100, 200), interval(250, 300)});
  EXPECT_EQ(report.max_concurrent, 1);
  EXPECT_EQ(report.max_overlap, microseconds(0));
  EXPECT_EQ(report.takeover_gaps, (std::vector<microseconds>{microseconds(0), milliseconds(50)}));
}

TEST(CommandIntervalsTest, AnOverlapIsMeasuredAndCounted) {
  const IntervalReport report = check_intervals({interval(0, 100), interval(60, 200), interval(70, 80)});
  EXPECT_EQ(report.max_concurrent, 3);
  EXPECT_EQ(report.max_overlap, milliseconds(40));  // the first two, 60..100
  EXPECT_EQ(report.takeover_gaps.front(), milliseconds(-40));
}

TEST(CommandIntervalsTest, ACommandStillRunningOverlapsUntilNow) {
  CommandInterval running = interval(0, 0);
  running.stop.reset();
  const IntervalReport report = check_intervals({running, interval(100, 200)});
  EXPECT_EQ(report.max_concurrent, 2);
  EXPECT_EQ(report.max_overlap, milliseconds(100));
  EXPECT_NE(report.summary.find("still running"), std::string::npos) << report.summary;
}

}  // namespace
}  // namespace turnstile::testing
