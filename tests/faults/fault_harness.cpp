#include "faults/fault_harness.h"

#include <cstdio>

#include "faults/faults_test_paths.h"  // generated: INTERVAL_LOGGER_PATH
#include "turnstile/key_layout.h"

namespace turnstile::testing {

std::vector<std::string> FaultTest::logged_command(std::chrono::milliseconds hold) const {
  const std::string logger = std::string("'") + INTERVAL_LOGGER_PATH + "' '" + monitor_.log_path() + "' " +
                             std::to_string(hold.count()) + " --parent-too";
  return {"sh", "-c", logger + " & wait"};
}

std::vector<std::string> FaultTest::run_args(const std::string& url, const std::string& name,
                                             const std::vector<std::string>& options,
                                             const std::vector<std::string>& command) {
  std::vector<std::string> args = {"run", "--redis", url};
  args.insert(args.end(), options.begin(), options.end());
  args.push_back(name);
  if (!command.empty()) {
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
  }
  return args;
}

IntervalReport FaultTest::check(const std::string& what) const {
  IntervalReport report = check_intervals(monitor_.intervals());
  const std::string line = "fault-harness: " + what + ": " + report.summary;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  RecordProperty("measured", line);
  return report;
}

::testing::AssertionResult holds(CliProcess& holder) {
  if (eventually([&] { return holder.out().find("holding") != std::string::npos; }, kConditionTimeout)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "the holder never said it holds: " << holder.err();
}

::testing::AssertionResult waits(RedisServer& server, const std::string& name, Flavor flavor) {
  const std::string channel = key_layout(flavor, name).channel;
  if (eventually(
          [&] {
            return server.command({"PUBSUB", "CHANNELS", channel}).find(channel) != std::string::npos;
          },
          kConditionTimeout)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "nobody subscribed to " << channel;
}

void FaultTest::expect_dead_before_next(const std::string& what) const {
  const IntervalReport report = check(what);
  const std::vector<CommandInterval> intervals = monitor_.intervals();
  ASSERT_EQ(intervals.size(), 2u) << report.summary;
  ASSERT_TRUE(intervals[0].stop) << "the first holder's command (pid " << intervals[0].pid << ", shell "
                                 << intervals[0].parent_pid << ") still runs";
  EXPECT_LE(*intervals[0].stop, intervals[1].start);
  EXPECT_EQ(report.max_concurrent, 1) << report.summary;
  EXPECT_EQ(report.max_overlap.count(), 0) << report.summary;
}

std::string duration_arg(std::chrono::milliseconds duration) { return std::to_string(duration.count()) + "ms"; }

}  // namespace turnstile::testing
