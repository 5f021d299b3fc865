// Delay and reset under load: 20 `turnstile run` waiters (each a process
// with its guardian, as in the field) on one lock, all through one
// tcp_proxy, while the link is slowed (300 ms each way) and then reset
// (every connection closed with RST), once while slowed and once after.
// A gate holder (direct to the server) keeps the lock until all 20 wait,
// so the faults hit waiters, holders taking over and releases alike.
//
// Asserted: no two commands ever ran at once; every waiter ran its
// command exactly once and exited with a documented status (0: ran and
// released; 75: lost while held, its command stopped); no `turnstile`
// process (run or guardian) nor command is left once they are done; the
// whole drain stays within a bound. Printed: the statuses, the takeover
// gaps, the drain time.

#include <dirent.h>
#include <signal.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "faults/fault_harness.h"
#include "redis_server.h"
#include "tcp_proxy.h"
#include "turnstile/key_layout.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;

constexpr int kWaiters = 20;
constexpr milliseconds kHold{200};
// Long enough for a 600 ms round trip: each call may take a third of what
// the lease leaves after its margins (about 1.5 s here).
constexpr milliseconds kLease{6000};
constexpr milliseconds kDelayEachWay{300};
// A bound on the whole drain: 20 sections, a few slowed handoffs, and a
// release lost to a reset costing at most a lease each.
constexpr milliseconds kDrainBound{90'000};

// Processes whose command line names `needle` (the proxy's URL: a
// `turnstile run` or its guardian, a fork of it, still alive).
std::vector<pid_t> processes_naming(const std::string& needle) {
  std::vector<pid_t> found;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return found;
  while (const dirent* entry = ::readdir(proc)) {
    const std::string name = entry->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = read_file("/proc/" + name + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    const std::optional<char> state = process_state(static_cast<pid_t>(std::stol(name)));
    if (cmdline.find(needle) != std::string::npos && state && *state != 'Z') {
      found.push_back(static_cast<pid_t>(std::stol(name)));
    }
  }
  ::closedir(proc);
  return found;
}

class LoadedLinkTest : public FaultTest {};

TEST_F(LoadedLinkTest, TwentyWaitersThroughDelayAndResets) {
  const std::string name = "loaded";
  RedisServer server;
  TcpProxy link(server.port());
  CliProcess gate(run_args(server.url(), name, {}, {}));
  ASSERT_TRUE(holds(gate));
  std::vector<std::unique_ptr<CliProcess>> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.push_back(std::make_unique<CliProcess>(
        run_args(link.url(), name, {"--lease", duration_arg(kLease)}, logged_command(kHold)),
        logger_tag(waiter_tag(i))));
  }
  // All 20 subscribed: each is past its first PING and waits, on its
  // process's own wake channel (wake scope fleet: behind a turnstile
  // holder the lock's shared channel is not heeded).
  const std::string own_channels = key_layout(Flavor::reentrant, name).wake_registry + ":*";
  const auto subscribed = [&] {
    const std::string channels = server.command({"PUBSUB", "CHANNELS", own_channels});
    std::size_t count = 0;
    for (std::size_t at = channels.find(name); at != std::string::npos; at = channels.find(name, at + 1)) ++count;
    return count;
  };
  ASSERT_TRUE(eventually([&] { return subscribed() == static_cast<std::size_t>(kWaiters); }))
      << server.command({"PUBSUB", "CHANNELS", own_channels});

  const MonotonicClock::time_point began = MonotonicClock::now();
  link.delay(kDelayEachWay);
  gate.signal(SIGTERM);
  EXPECT_EQ(gate.wait_for(kConditionTimeout), 0) << gate.err();
  // The fault timeline (real time: real processes): slowed, reset while
  // slowed, slowed on, then the link passes again and is reset once more.
  std::this_thread::sleep_for(milliseconds(3000));
  link.reset();
  std::this_thread::sleep_for(milliseconds(3000));
  link.pass();
  std::this_thread::sleep_for(milliseconds(500));
  link.reset();

  std::map<int, int> statuses;  // exit status -> waiters
  std::vector<std::string> bad;
  for (int i = 0; i < kWaiters; ++i) {
    CliProcess& waiter = *waiters[static_cast<std::size_t>(i)];
    const milliseconds left = std::max(
        milliseconds(0), kDrainBound - std::chrono::duration_cast<milliseconds>(MonotonicClock::now() - began));
    const std::optional<int> status = waiter.wait_for(left);
    if (status) ++statuses[*status];
    if (!status || (*status != 0 && *status != kExitLockLost)) {
      bad.push_back(waiter_tag(i) + " " + (status ? "exited " + std::to_string(*status) : "still waits") + ": " +
                    waiter.err());
    }
  }
  const auto drained = std::chrono::duration_cast<milliseconds>(MonotonicClock::now() - began);
  EXPECT_TRUE(bad.empty()) << bad.front();
  EXPECT_TRUE(monitor_.wait_for_all_stopped(kConditionTimeout));
  // Nothing left behind: no run, no guardian (the commands: above).
  EXPECT_TRUE(eventually([&] { return processes_naming(link.url()).empty(); }, kConditionTimeout))
      << processes_naming(link.url()).size() << " turnstile processes left";

  const IntervalReport report = check(std::to_string(kWaiters) + " waiters through delay " +
                                      duration_arg(kDelayEachWay) + " each way and two resets");
  EXPECT_EQ(report.max_concurrent, 1) << report.summary;
  EXPECT_EQ(report.max_overlap.count(), 0) << report.summary;
  std::map<std::string, int> runs;
  for (const CommandInterval& interval : monitor_.intervals()) ++runs[interval.tag];
  for (int i = 0; i < kWaiters; ++i)
    EXPECT_EQ(runs[waiter_tag(i)], 1) << waiter_tag(i) << " ran its command that often";

  std::string status_text;
  for (const auto& [status, count] : statuses) {
    status_text += (status_text.empty() ? "" : ", ") + std::to_string(count) + " x " + std::to_string(status);
  }
  milliseconds longest_gap{0};
  for (const auto gap : report.takeover_gaps) {
    longest_gap = std::max(longest_gap, std::chrono::duration_cast<milliseconds>(gap));
  }
  const std::string line = "fault-harness: " + std::to_string(kWaiters) + " waiters through one link, delay " +
                           duration_arg(kDelayEachWay) + " each way for 6 s, resets at 3 s and 6.5 s: exits " +
                           status_text + "; drained in " + std::to_string(drained.count()) +
                           " ms; longest takeover gap " + std::to_string(longest_gap.count()) + " ms; overlap " +
                           format_ms(report.max_overlap) + "; proxy connections accepted " +
                           std::to_string(link.accepted());
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  RecordProperty("loaded_link", line);
}

}  // namespace
}  // namespace turnstile::testing
