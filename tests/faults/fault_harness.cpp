#include "faults/fault_harness.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

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
  const KeyLayout layout = key_layout(flavor, name);
  const std::string channel = layout.channel;
  // Any process's own wake channel (a glob: the client's id is not known
  // here); a token lock's waiters subscribe that one only.
  const std::string own_channels = layout.wake_registry.empty() ? std::string() : layout.wake_channel("*");
  const std::string own_prefix = layout.wake_registry.empty() ? std::string() : layout.wake_channel("");
  if (eventually(
          [&] {
            return server.command({"PUBSUB", "CHANNELS", channel}).find(channel) != std::string::npos ||
                   (!own_channels.empty() &&
                    server.command({"PUBSUB", "CHANNELS", own_channels}).find(own_prefix) != std::string::npos);
          },
          kConditionTimeout)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "nobody subscribed to " << channel
                                       << (own_channels.empty() ? "" : " nor to " + own_channels);
}

::testing::AssertionResult fair_queue_holds(RedisServer& server, const std::string& name, int count) {
  const std::string queue = key_layout(Flavor::fair, name).fair_queue;
  const std::string expected = "(integer) " + std::to_string(count);
  std::string last;
  if (eventually([&] { return (last = server.command({"LLEN", queue})) == expected; }, kConditionTimeout)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << queue << " never held " << count << " waiters (last: " << last << ")";
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

std::string waiter_tag(int index) { return "w" + std::to_string(index); }

CliProcess::Environment logger_tag(const std::string& tag) { return {{"INTERVAL_LOGGER_TAG", tag}}; }

std::string duration_arg(std::chrono::milliseconds duration) { return std::to_string(duration.count()) + "ms"; }

namespace {

// "pid (comm) state ppid ..." of /proc/<pid>/stat, after the last ')' (comm
// may hold spaces): "state ppid ...". nullopt if the process is gone.
std::optional<std::string> stat_after_comm(const std::filesystem::path& process) {
  std::ifstream stat(process / "stat");
  std::string line;
  if (!std::getline(stat, line) || line.rfind(')') == std::string::npos) return std::nullopt;
  return line.substr(line.rfind(')') + 1);
}

int pidfd_open(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

}  // namespace

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> children;
  for (const std::filesystem::directory_entry& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::optional<std::string> rest = stat_after_comm(entry.path());
    if (!rest) continue;  // gone meanwhile
    std::istringstream fields(*rest);
    char state = 0;
    pid_t ppid = 0;
    if (fields >> state >> ppid && ppid == parent) children.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return children;
}

std::optional<char> process_state(pid_t pid) {
  const std::optional<std::string> rest = stat_after_comm(std::filesystem::path("/proc") / std::to_string(pid));
  if (!rest) return std::nullopt;
  std::istringstream fields(*rest);
  char state = 0;
  if (!(fields >> state)) return std::nullopt;
  return state;
}

ForeignProcess ForeignProcess::guardian_of(CliProcess& holder, pid_t shell) {
  auto others = [&] {
    std::vector<pid_t> found = children_of(holder.pid());
    std::erase(found, shell);
    return found;
  };
  const std::vector<pid_t> before = others();
  if (before.size() != 1) return ForeignProcess(-1, -1);
  const int pidfd = pidfd_open(before[0]);
  // Still turnstile's child once held: the pidfd is the guardian's.
  if (pidfd < 0 || others() != before) {
    if (pidfd >= 0) ::close(pidfd);
    return ForeignProcess(-1, -1);
  }
  return ForeignProcess(before[0], pidfd);
}

ForeignProcess::ForeignProcess(ForeignProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      pidfd_(std::exchange(other.pidfd_, -1)),
      stopped_(std::exchange(other.stopped_, false)) {}

ForeignProcess::~ForeignProcess() {
  if (stopped_) (void)resume();
  if (pidfd_ >= 0) ::close(pidfd_);
}

bool ForeignProcess::stop() {
  if (pidfd_ < 0 || ::syscall(SYS_pidfd_send_signal, pidfd_, SIGSTOP, nullptr, 0) != 0) return false;
  stopped_ = true;
  return true;
}

bool ForeignProcess::resume() {
  if (pidfd_ < 0 || ::syscall(SYS_pidfd_send_signal, pidfd_, SIGCONT, nullptr, 0) != 0) return false;
  stopped_ = false;
  return true;
}

}  // namespace turnstile::testing
