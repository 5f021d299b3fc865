#include "command_intervals.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace turnstile::testing {
namespace {

// How often the log file is read for new lines; deaths wake the poll at once.
constexpr std::chrono::milliseconds kLogPollInterval{5};
// How long the destructor waits for a killed process to be gone.
constexpr std::chrono::seconds kKillTimeout{5};
constexpr std::size_t kMaxLineBytes = 256;

int pidfd_open(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }
int pidfd_send_signal(int pidfd, int signal_number) {
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, signal_number, nullptr, 0));
}

MonotonicClock::time_point from_ns(long long ns) {
  return MonotonicClock::time_point(std::chrono::duration_cast<MonotonicClock::duration>(std::chrono::nanoseconds(ns)));
}

// One process of a command being watched.
struct Watched {
  std::size_t command = 0;  // index into intervals
  int pidfd = -1;           // -1 once it died
};

}  // namespace

class CommandMonitor::Impl {
 public:
  explicit Impl(std::string log_path) : log_path_(std::move(log_path)) {
    std::ofstream(log_path_, std::ios::trunc);
    thread_ = std::thread([this] { loop(); });
  }

  ~Impl() {
    {
      std::lock_guard guard(mutex_);
      stopping_ = true;
    }
    thread_.join();
    // Orphans of a killed `turnstile run`: stopped by pidfd, never by a pid
    // that may have been reused.
    for (Watched& watched : watched_) {
      if (watched.pidfd < 0) continue;
      pidfd_send_signal(watched.pidfd, SIGKILL);
      pollfd fd{watched.pidfd, POLLIN, 0};
      ::poll(&fd, 1, static_cast<int>(std::chrono::milliseconds(kKillTimeout).count()));
      ::close(watched.pidfd);
    }
  }

  const std::string& log_path() const { return log_path_; }

  std::vector<CommandInterval> intervals() const {
    std::lock_guard guard(mutex_);
    return intervals_;
  }

  bool wait_for(const std::function<bool()>& done, std::chrono::milliseconds timeout) const {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, done);
  }

  std::size_t started() const { return intervals_.size(); }  // under mutex_
  bool all_stopped() const {                                 // under mutex_
    return std::all_of(intervals_.begin(), intervals_.end(), [](const auto& interval) { return interval.stop; });
  }

 private:
  // Reads the complete lines appended since the last call.
  void read_new_lines(const MonotonicClock::time_point now) {
    std::ifstream log(log_path_, std::ios::binary);
    log.seekg(static_cast<std::streamoff>(offset_));
    std::string line;
    while (intervals_.size() < kMaxCommands && std::getline(log, line)) {
      if (log.eof()) break;  // no newline yet: a line still being written
      offset_ += line.size() + 1;
      if (line.size() > kMaxLineBytes) continue;
      std::istringstream fields(line);
      std::string word;
      long long pid = 0;
      long long parent_pid = 0;
      long long start_ns = 0;
      std::string token;
      if (!(fields >> word >> pid)) continue;
      if (word == "stop") {
        long long stop_ns = 0;
        // The latest command of that logger (a pid is reused only after
        // its command ended).
        if (!(fields >> stop_ns)) continue;
        for (std::size_t command = intervals_.size(); command-- > 0;) {
          if (intervals_[command].pid != static_cast<pid_t>(pid)) continue;
          if (!intervals_[command].stop) logged_stops_[command] = from_ns(stop_ns);
          break;
        }
        continue;
      }
      if (!(fields >> parent_pid >> start_ns >> token) || word != "start") continue;
      std::string tag;
      fields >> tag;  // optional
      intervals_.push_back(CommandInterval{.pid = static_cast<pid_t>(pid),
                                           .parent_pid = static_cast<pid_t>(parent_pid),
                                           .start = from_ns(start_ns),
                                           .stop = std::nullopt,
                                           .fencing_token = token,
                                           .tag = tag});
      const std::size_t command = intervals_.size() - 1;
      pending_.push_back(0);
      death_times_.emplace_back();
      logged_stops_.emplace_back();
      for (const long long watched_pid : {pid, parent_pid}) {
        if (watched_pid <= 0) continue;
        const int pidfd = pidfd_open(static_cast<pid_t>(watched_pid));
        if (pidfd < 0) {
          // Already gone (ESRCH): it died before now, a conservative end.
          death_times_[command] = std::max(death_times_[command], now);
          if (!intervals_[command].first_exit) intervals_[command].first_exit = now;
          continue;
        }
        watched_.push_back(Watched{.command = command, .pidfd = pidfd});
        ++pending_[command];
      }
      if (pending_[command] == 0) intervals_[command].stop = death_times_[command];
    }
  }

  // A command's end is the latest death of its processes, known once all
  // of them died.
  void loop() {
    std::vector<pollfd> fds;
    std::vector<std::size_t> polled;  // index into watched_ of fds[i]
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      read_new_lines(MonotonicClock::now());
      changed_.notify_all();
      fds.clear();
      polled.clear();
      for (std::size_t i = 0; i < watched_.size(); ++i) {
        if (watched_[i].pidfd < 0) continue;
        fds.push_back({watched_[i].pidfd, POLLIN, 0});
        polled.push_back(i);
      }
      lock.unlock();
      const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(kLogPollInterval.count()));
      const MonotonicClock::time_point now = MonotonicClock::now();
      lock.lock();
      if (ready <= 0) continue;
      // A logger that held to the end wrote its stop line before it
      // exited: read it before its death is judged.
      read_new_lines(now);
      for (std::size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        Watched& watched = watched_[polled[i]];
        ::close(watched.pidfd);
        watched.pidfd = -1;
        const std::size_t command = watched.command;
        // After its logger's stop line a command does nothing: the logger
        // exits, and its parent shell only waited for it.
        const MonotonicClock::time_point died = std::min(now, logged_stops_[command].value_or(now));
        death_times_[command] = std::max(death_times_[command], died);
        if (!intervals_[command].first_exit) intervals_[command].first_exit = died;
        if (--pending_[command] == 0) intervals_[command].stop = death_times_[command];
      }
    }
  }

  const std::string log_path_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  bool stopping_ = false;
  std::size_t offset_ = 0;
  std::vector<CommandInterval> intervals_;
  std::vector<Watched> watched_;
  // Per command (index of intervals_): its processes still alive, and the
  // latest death seen so far.
  std::vector<int> pending_;
  std::vector<MonotonicClock::time_point> death_times_;
  // The instant its logger's stop line gives, if it held to the end.
  std::vector<std::optional<MonotonicClock::time_point>> logged_stops_;
  std::thread thread_;  // last: starts once the rest exists
};

CommandMonitor::CommandMonitor(std::string log_path) : impl_(std::make_unique<Impl>(std::move(log_path))) {}
CommandMonitor::~CommandMonitor() = default;

const std::string& CommandMonitor::log_path() const { return impl_->log_path(); }
std::vector<CommandInterval> CommandMonitor::intervals() const { return impl_->intervals(); }

bool CommandMonitor::wait_for_starts(std::size_t count, std::chrono::milliseconds timeout) const {
  return impl_->wait_for([&] { return impl_->started() >= count; }, timeout);
}

bool CommandMonitor::wait_for_all_stopped(std::chrono::milliseconds timeout) const {
  return impl_->wait_for([&] { return impl_->all_stopped(); }, timeout);
}

std::string format_ms(std::chrono::microseconds duration) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f ms", static_cast<double>(duration.count()) / 1000.0);
  return text;
}

IntervalReport check_intervals(const std::vector<CommandInterval>& intervals) {
  using std::chrono::duration_cast;
  using std::chrono::microseconds;
  const MonotonicClock::time_point now = MonotonicClock::now();
  std::vector<CommandInterval> sorted = intervals;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
  IntervalReport report;

  // Sweep over starts (+1) and ends (-1); at equal instants ends go first
  // (a command that ended as the next began did not overlap it).
  std::vector<std::pair<MonotonicClock::time_point, int>> events;
  for (const CommandInterval& interval : sorted) {
    events.emplace_back(interval.start, +1);
    events.emplace_back(interval.stop.value_or(now), -1);
  }
  std::sort(events.begin(), events.end());
  int running = 0;
  for (const auto& [when, change] : events) {
    running += change;
    report.max_concurrent = std::max(report.max_concurrent, running);
  }

  MonotonicClock::time_point latest_end{};
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const MonotonicClock::time_point end = sorted[i].stop.value_or(now);
    if (i > 0) {
      report.takeover_gaps.push_back(duration_cast<microseconds>(sorted[i].start - latest_end));
      for (std::size_t j = 0; j < i; ++j) {
        const auto overlap = std::min(end, sorted[j].stop.value_or(now)) - sorted[i].start;
        report.max_overlap = std::max(report.max_overlap, duration_cast<microseconds>(overlap));
      }
    }
    if (i == 0 || end > latest_end) latest_end = end;
  }

  std::ostringstream summary;
  summary << sorted.size() << " commands, at most " << report.max_concurrent << " at once, longest overlap "
          << format_ms(report.max_overlap) << ", takeover gaps [";
  for (std::size_t i = 0; i < report.takeover_gaps.size(); ++i) {
    summary << (i == 0 ? "" : ", ") << format_ms(report.takeover_gaps[i]);
  }
  summary << "]";
  for (const CommandInterval& interval : sorted) {
    if (!interval.stop) summary << " (pid " << interval.pid << " still running)";
  }
  summary << "; commands (start/first exit/stop, ms):";
  const auto since_first = [&](std::optional<MonotonicClock::time_point> when) {
    if (!when) return std::string("running");
    char text[32];
    std::snprintf(text, sizeof text, "%.1f",
                  static_cast<double>(duration_cast<microseconds>(*when - sorted.front().start).count()) / 1000.0);
    return std::string(text);
  };
  for (const CommandInterval& interval : sorted) {
    summary << " " << since_first(interval.start) << "/" << since_first(interval.first_exit) << "/"
            << since_first(interval.stop);
  }
  report.summary = summary.str();
  return report;
}

}  // namespace turnstile::testing
