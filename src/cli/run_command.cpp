// `turnstile run`: acquire, supervise the command, release.

#include "cli/run_command.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cctype>
#include <charconv>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>

#include "cli/child_process.h"
#include "cli/command_common.h"
#include "cli/duration.h"
#include "cli/exit_status.h"
#include "cli/holder_identity.h"
#include "cli/metrics_textfile.h"
#include "cli/signals.h"
#include "cli/verbose_log.h"
#include "turnstile/client.h"
#include "turnstile/election.h"
#include "turnstile/errors.h"
#include "turnstile/flavor.h"
#include "turnstile/future.h"
#include "turnstile/hold.h"
#include "turnstile/inspection.h"
#include "turnstile/lock_policy.h"
#include "turnstile/metrics.h"
#include "turnstile/mutex.h"
#include "turnstile/server_check.h"

namespace turnstile::cli {
namespace {

// Everything the options resolve to, validated.
struct RunPlan {
  std::string name;
  LockRule rule;
  std::chrono::milliseconds lease{};
  std::optional<std::chrono::milliseconds> wait;  // nullopt: forever
  std::chrono::milliseconds kill_grace{};
  std::chrono::milliseconds unreachable_limit{};
  bool shared = false;                                // a read-write lock's read half
  bool allow_evicting = false;                        // hold on a Redis that may evict lock keys
  std::optional<std::chrono::milliseconds> max_hold;  // nullopt: no limit
  std::chrono::milliseconds lock_delay{};             // the lock's (LockOptions::lock_delay)
  std::chrono::milliseconds warn_before{};            // ClientOptions::lease_warning; zero: none
  int warn_signal = 0;                                // sent to the command's group when warned; 0: none
  int on_revoke = 0;                                  // sent to it on a release request; 0: not watched
  std::vector<std::string> command;                   // empty: hold until a signal
  bool elect = false;                                 // campaign for leadership (RunOptions::elect)
  std::string elect_value;                            // what the leader proclaims
  bool once = false;                                  // a lost leadership ends the run
};

// What a lease leaves to believe in after the client's margins (the drift
// allowance, the stop margin and the kill grace, ClientOptions below): lock.h's
// window, the renewal period's three thirds.
std::chrono::milliseconds run_window(std::chrono::milliseconds lease, std::chrono::milliseconds kill_grace) {
  const Duration margin =
      Duration(static_cast<Duration::rep>(static_cast<double>(Duration(lease).count()) * kDefaultClockDriftFactor)) +
      kDefaultStopMargin + kill_grace;
  return std::chrono::duration_cast<std::chrono::milliseconds>(Duration(lease) - margin);
}

// --warn-signal's signal: "USR1", "SIGUSR1" (any case) or its number. Not
// SIGKILL or SIGSTOP: a warning that ends or stops the command is none.
// A signal the command's group is sent to ask something of it (`option`:
// --warn-signal, --on-revoke): a name (USR1, SIGTERM) or a number; not
// KILL or STOP, which would end or stop it without a word.
int parse_asking_signal(std::string_view text, std::string_view option) {
  std::string name(text);
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (name.starts_with("SIG")) name.erase(0, 3);
  int number = 0;
  const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), number);
  const bool numeric = error == std::errc() && end == name.data() + name.size();
  for (int candidate = 1; candidate < NSIG && number == 0 && !numeric; ++candidate) {
    const char* abbreviation = sigabbrev_np(candidate);
    if (abbreviation != nullptr && name == abbreviation) number = candidate;
  }
  if (number <= 0 || number >= NSIG || sigabbrev_np(number) == nullptr) {
    throw UsageError(std::string(option) + ": unknown signal '" + std::string(text) + "' (e.g. USR1, SIGTERM, 10)");
  }
  if (number == SIGKILL || number == SIGSTOP) {
    throw UsageError(std::string(option) + ": SIG" + std::string(sigabbrev_np(number)) +
                     " would end or stop the command without a word; use e.g. USR1 or TERM");
  }
  return number;
}

// A leader's value when --value is not given: "<host>:<pid>".
std::string default_leader_value() {
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  return std::string(host.data()) + ":" + std::to_string(::getpid());
}

RunPlan plan_run(const RunOptions& options) {
  check_name(options.name);
  RunPlan plan;
  plan.name = options.name;
  if (options.config_path) plan.rule = LockPolicy::load(*options.config_path).rule_for(options.name);
  // Flags override the configuration.
  if (options.fair) plan.rule.flavor = Flavor::fair;
  if (options.token) plan.rule.flavor = Flavor::token;
  if (options.read || options.write) plan.rule.flavor = Flavor::read_write;
  if (options.elect) {
    plan.rule.flavor = Flavor::fair;  // an election is a fenced fair lock
    plan.elect = true;
    plan.once = options.once;
    plan.elect_value = options.elect_value ? *options.elect_value : default_leader_value();
    if (plan.elect_value.size() > kMaxLeaderValueBytes) {
      throw UsageError("--value is " + std::to_string(plan.elect_value.size()) + " bytes; at most " +
                       std::to_string(kMaxLeaderValueBytes));
    }
  }
  plan.shared = options.read;
  plan.allow_evicting = options.allow_evicting || plan.rule.allow_evicting;
  if (options.shell_command) {
    if (!options.command.empty()) {
      throw UsageError("-c runs its string through " + std::string(kShell) +
                       " -c; give either -c STRING or a command after --, not both");
    }
    plan.command = {std::string(kShell), "-c", *options.shell_command};
  } else {
    plan.command = options.command;
  }
  if (options.permits) {
    if (*options.permits < 1 || *options.permits > kMaxPermits) {
      throw UsageError("--permits must be within [1, 2^53 = " + std::to_string(kMaxPermits) + "], got " +
                       std::to_string(*options.permits));
    }
    plan.rule.flavor = Flavor::semaphore;
    plan.rule.permits = *options.permits;
  }
  if (options.lease) {
    plan.lease = parse_duration(*options.lease, "--lease");
  } else if (plan.rule.lease) {
    plan.lease = std::chrono::duration_cast<std::chrono::milliseconds>(*plan.rule.lease);
  } else {
    plan.lease = kDefaultLease;
  }
  if (plan.lease < kMinLease) {
    throw UsageError("--lease (or the config's lease_ms) must be at least " + format_duration(kMinLease) + ", got " +
                     format_duration(plan.lease));
  }
  if (options.no_wait) {
    plan.wait = std::chrono::milliseconds::zero();
  } else if (options.wait) {
    plan.wait = parse_duration(*options.wait, "--wait", {.bare_number_is_seconds = true});
  } else if (plan.rule.wait) {
    plan.wait = std::chrono::duration_cast<std::chrono::milliseconds>(*plan.rule.wait);
  }
  if (options.kill_grace) {
    plan.kill_grace = parse_duration(*options.kill_grace, "--kill-grace");
    if (plan.kill_grace > plan.lease / 2) {
      throw UsageError("--kill-grace " + format_duration(plan.kill_grace) + " leaves too little of --lease " +
                       format_duration(plan.lease) +
                       ": the grace comes out of the lease (SIGTERM at the lease deadline minus the grace), "
                       "so it may be at most half of it");
    }
  } else {
    plan.kill_grace = std::min(kDefaultKillGrace, plan.lease / 4);
  }
  plan.unreachable_limit = options.unreachable_limit ? parse_duration(*options.unreachable_limit, "--unreachable-limit")
                                                     : kDefaultUnreachableLimit;
  if (options.max_hold) {
    plan.max_hold = parse_duration(*options.max_hold, "--max-hold");
    if (*plan.max_hold <= std::chrono::milliseconds::zero() || *plan.max_hold > kMaxLease) {
      throw UsageError("--max-hold must be above zero and at most " + format_duration(kMaxLease) + ", got " +
                       format_duration(*plan.max_hold));
    }
  }
  if (options.warn_signal && !options.warn_before) {
    throw UsageError("--warn-signal goes with --warn-before (when to send it)");
  }
  if (options.warn_before) {
    plan.warn_before = parse_duration(*options.warn_before, "--warn-before");
    // What healthy renewals never come within (ClientOptions::lease_warning):
    // half the window the client's margins leave of the lease.
    const std::chrono::milliseconds window = run_window(plan.lease, plan.kill_grace);
    if (plan.warn_before <= std::chrono::milliseconds::zero() || plan.warn_before > window / 2) {
      throw UsageError("--warn-before must be above zero and at most half of what --lease " +
                       format_duration(plan.lease) + " leaves after its margins and --kill-grace (" +
                       format_duration(window / 2) + "), or healthy renewals would warn; got " +
                       format_duration(plan.warn_before));
    }
    if (options.warn_signal) plan.warn_signal = parse_asking_signal(*options.warn_signal, "--warn-signal");
  }
  if (options.on_revoke) plan.on_revoke = parse_asking_signal(*options.on_revoke, "--on-revoke");
  if (!options.lock_delay && plan.rule.lock_delay) {
    plan.lock_delay = std::chrono::duration_cast<std::chrono::milliseconds>(*plan.rule.lock_delay);
  }
  if (options.lock_delay) {
    plan.lock_delay = parse_duration(*options.lock_delay, "--lock-delay");
    if (plan.lock_delay < std::chrono::milliseconds::zero() || plan.lock_delay > kMaxLockDelay) {
      throw UsageError("--lock-delay must be within [0, " + format_duration(kMaxLockDelay) + "], got " +
                       format_duration(plan.lock_delay));
    }
  }
  return plan;
}

// A notice about the holding (lost, at risk), from the watchdog's thread to
// the main loop.
class HoldNotice {
 public:
  void notify(std::string_view why) {
    {
      MutexLock guard(mutex_);
      if (why_.empty()) why_ = why;
    }
    wake_.notify();
  }
  int fd() const { return wake_.fd(); }
  // Whether it was notified since the last call; the first reason told
  // since then in `why`.
  bool consume(std::string& why) {
    if (!wake_.consume()) return false;
    MutexLock guard(mutex_);
    why = std::exchange(why_, std::string());
    return true;
  }
  // Forgets a notice not consumed yet.
  void clear() {
    std::string ignored;
    (void)consume(ignored);
  }

 private:
  WakeFd wake_;
  Mutex mutex_;
  std::string why_ TURNSTILE_GUARDED_BY(mutex_);
};

// The holds of rounds that ended (`elect` campaigns again with a new hold,
// while the watchdog may still tell the loss of the last one, e.g. found
// late after this process was stopped): their losses are not the current
// round's. Owners are unique per hold; the last kRememberedRounds are kept.
class EndedHolds {
 public:
  static constexpr std::size_t kRememberedRounds = 8;

  void add(const std::string& owner) {
    MutexLock guard(mutex_);
    if (owners_.size() == kRememberedRounds) owners_.pop_front();
    owners_.push_back(owner);
  }
  bool contains(std::string_view owner) const {
    MutexLock guard(mutex_);
    return std::find(owners_.begin(), owners_.end(), owner) != owners_.end();
  }

 private:
  mutable Mutex mutex_;
  std::deque<std::string> owners_ TURNSTILE_GUARDED_BY(mutex_);
};

void print_line(const std::string& line) { std::fprintf(stderr, "turnstile: %s\n", line.c_str()); }

// Errors of the watchdog's renewals: one line per distinct message, not one
// per renewal (every lease/3 while Redis is down). A lost holding is told by
// the main loop, not here.
class BackgroundErrors {
 public:
  explicit BackgroundErrors(const ErrorContext& context) : context_(context) {}

  void report(const std::exception_ptr& error) noexcept {
    try {
      std::rethrow_exception(error);
    } catch (const LockLostError&) {
    } catch (const UnsafeServerError&) {
      // run's own check told it before anything was held.
    } catch (const std::exception& exception) {
      MutexLock guard(mutex_);
      if (last_message_ == exception.what()) return;
      last_message_ = exception.what();
      print_line(in_quotes(context_.name) + " (Redis at " + context_.redis + "): " + last_message_);
    } catch (...) {
    }
  }

 private:
  const ErrorContext& context_;
  Mutex mutex_;
  std::string last_message_ TURNSTILE_GUARDED_BY(mutex_);
};

// poll() on `fds`, retrying on EINTR, up to `timeout` (nullopt: without
// one; every way out is then one of the descriptors). False if it passed.
bool wait_for_any(std::vector<pollfd>& fds, std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
  for (pollfd& fd : fds) fd.revents = 0;
  const int timeout_ms = timeout ? static_cast<int>(std::min<std::int64_t>(timeout->count(), 60'000)) : -1;
  int ready = 0;
  while ((ready = ::poll(fds.data(), fds.size(), timeout_ms)) < 0) {
    if (errno != EINTR) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
  }
  return ready > 0;
}

// Waits for the acquisition. A handled signal meanwhile cancels it (a fair
// queue entry is withdrawn) and returns the signal's number; a second one
// ends the process at once.
// With -v, refreshes the waiting line meanwhile.
std::optional<int> wait_for_acquisition(SignalFd& signals, WakeFd& acquired, std::stop_source& withdraw,
                                        const std::string& name, VerboseLog& verbose,
                                        const std::function<VerboseLog::Reading()>& read) {
  std::vector<pollfd> fds = {{signals.fd(), POLLIN, 0}, {acquired.fd(), POLLIN, 0}};
  std::optional<int> interrupted;
  for (;;) {
    if (!wait_for_any(fds, verbose.enabled() ? std::optional(verbose.until_refresh()) : std::nullopt)) {
      verbose.refresh(read);
      continue;
    }
    if (acquired.consume()) return interrupted;
    while (std::optional<ArrivedSignal> arrived = signals.read()) {
      if (arrived->number == SIGCHLD) continue;
      if (interrupted) {
        print_line("interrupted again by signal " + std::to_string(arrived->number) + " while withdrawing from '" +
                   name + "'");
        std::fflush(stderr);
        std::_Exit(kExitSignalBase + arrived->number);
      }
      print_line("interrupted by signal " + std::to_string(arrived->number) + " while waiting for " + in_quotes(name) +
                 "; withdrawing");
      interrupted = arrived->number;
      withdraw.request_stop();
    }
  }
}

// What is held, for messages: "lock", "permit of".
std::string_view noun_of(Flavor flavor) { return is_semaphore(flavor) ? "permit of" : "lock"; }

// What is held, named for messages: "lock 'x'", "permit of 'x'", "the
// leadership of 'x' (term N)".
std::string what_held(const RunPlan& plan, std::optional<std::int64_t> term) {
  if (plan.elect) {
    return "the leadership of " + in_quotes(plan.name) + (term ? " (term " + std::to_string(*term) + ")" : "");
  }
  return std::string(noun_of(plan.rule.flavor)) + " " + in_quotes(plan.name);
}

// Why a hold was lost, as one phrase for the error line.
std::string_view lost_reason_text(LockLostReason reason) {
  switch (reason) {
    case LockLostReason::gone:
      return "it was deleted, force-unlocked or expired";
    case LockLostReason::lease_expired:
      return "no renewal was confirmed before its local lease deadline (Redis unreachable or too slow)";
    case LockLostReason::max_hold_reached:
      return "it was held for --max-hold, after which it is renewed no more";
    case LockLostReason::server_restarted:
      return "the Redis server restarted (or failed over) since it was taken";
  }
  return "unknown reason";
}

EnvironmentVariables child_environment(const RunPlan& plan, const LockHold& held) {
  const std::string& name = plan.name;
  std::string permit_ids;
  for (const std::string& id : held.permit_ids()) permit_ids += (permit_ids.empty() ? "" : " ") + id;
  const std::optional<std::int64_t> fencing_token = held.fencing_token();
  EnvironmentVariables environment = {
      {"TURNSTILE_LOCK_NAME", name},
      {"TURNSTILE_OWNER", held.owner()},
      {"TURNSTILE_FENCING_TOKEN", fencing_token ? std::to_string(*fencing_token) : ""},
  };
  if (!held.permit_ids().empty()) environment.emplace_back("TURNSTILE_PERMIT_IDS", permit_ids);
  if (plan.elect) {
    // The term is the fencing token of the leader's hold.
    environment.emplace_back("TURNSTILE_LEADER_TERM", fencing_token ? std::to_string(*fencing_token) : "");
    environment.emplace_back("TURNSTILE_LEADER_VALUE", plan.elect_value);
  }
  for (auto& removed : child_secret_overrides()) environment.push_back(std::move(removed));
  return environment;
}

struct HoldOutcome {
  int status = kExitSuccess;  // the child's, or 0 in hold mode
  bool lost = false;
};

// Runs the command (or just holds) until it ends, a hold-mode signal, or
// the holding is lost.
// What the watchdog tells the main loop about the holding.
struct HoldNotices {
  HoldNotice& lost;
  HoldNotice& at_risk;
  HoldNotice& revoked;  // a release request (--on-revoke)
};

HoldOutcome run_holding(const RunPlan& plan, const std::vector<std::string>& command, const LockHold& held,
                        SignalFd& signals, HoldNotices notices, const GuardianDeadline& deadline,
                        const ErrorContext& context) {
  HoldNotice& lost = notices.lost;
  const std::string what_is_held = what_held(plan, held.fencing_token());
  const std::string lost_what = "lost " + what_is_held + ": ";
  std::optional<ChildProcess> child;
  if (command.empty()) {
    const std::optional<std::int64_t> fencing_token = held.fencing_token();
    if (plan.elect) {
      std::printf("turnstile: leading '%s' (owner %s, term %s); SIGINT or SIGTERM resigns\n", plan.name.c_str(),
                  held.owner().c_str(), fencing_token ? std::to_string(*fencing_token).c_str() : "?");
    } else {
      std::printf("turnstile: holding '%s' (owner %s%s); SIGINT or SIGTERM releases it\n", plan.name.c_str(),
                  held.owner().c_str(),
                  fencing_token ? (", fencing token " + std::to_string(*fencing_token)).c_str() : "");
    }
    std::fflush(stdout);
  } else {
    child.emplace(ChildProcess::start(command, child_environment(plan, held), &deadline));
    if (child->exec_error()) print_line("cannot run '" + command.front() + "': " + *child->exec_error());
  }

  GraceTimer grace;
  HoldOutcome outcome;
  std::vector<pollfd> fds = {{signals.fd(), POLLIN, 0},
                             {lost.fd(), POLLIN, 0},
                             {grace.fd(), POLLIN, 0},
                             {notices.at_risk.fd(), POLLIN, 0},
                             {notices.revoked.fd(), POLLIN, 0}};
  for (;;) {
    // Checked before every wait: SIGCHLDs may have been merged into one.
    if (child && child->try_reap()) {
      outcome.status = exit_status_of_wait_status(child->wait_status());
      if (!outcome.lost && deadline.enforced()) {
        // The guardian stopped the command at the lease deadline, before
        // this loop was told (it was stopped, or the two raced).
        std::string why;
        if (!lost.consume(why)) {
          why =
              "its local lease deadline passed before turnstile could renew it (was turnstile stopped? SIGSTOP, "
              "a debugger, an overloaded host)";
        }
        print_line(lost_what + why + " (Redis at " + context.redis + "); the guardian process sent SIGTERM to the " +
                   "command's group (pid " + std::to_string(child->pid()) + "), SIGKILL after " +
                   format_duration(plan.kill_grace) + ", by the lease deadline");
        outcome.lost = true;
      }
      return outcome;
    }
    if (child && child->replace_dead_guardian()) {
      print_line("the guardian process of '" + command.front() + "' was killed; started another");
    }
    if (child) {
      if (const std::optional<int> stop = child->continue_if_stopped_at_terminal()) {
        print_line((*stop == SIGTSTP ? std::string("Ctrl-Z") : "SIG" + std::string(sigabbrev_np(*stop))) +
                   " refused: '" + command.front() + "' holds " + what_is_held +
                   ", which a stopped command would keep for ever; continued it (Ctrl-C ends it and releases)");
      }
    }
    wait_for_any(fds);
    while (std::optional<ArrivedSignal> arrived = signals.read()) {
      if (arrived->number == SIGCHLD) continue;
      if (!child) return outcome;  // hold mode: the way to release
      // The command has a process group of its own: a signal to turnstile
      // (or to turnstile's group) is passed on to all of it.
      child->signal(arrived->number);
    }
    std::string why;
    if (notices.at_risk.consume(why) && !outcome.lost) {
      // Told again after a renewal moved the deadline and it came near again.
      std::string line = what_is_held + " at risk: " + why + " (Redis at " + context.redis + ")";
      if (child && plan.warn_signal != 0) {
        line += "; sending SIG" + std::string(sigabbrev_np(plan.warn_signal)) + " to the command's group (pid " +
                std::to_string(child->pid()) + ")";
        child->signal(plan.warn_signal);
      }
      print_line(line);
    }
    if (notices.revoked.consume(why) && !outcome.lost) {
      std::string line = "release of " + what_is_held + " requested" + (why.empty() ? "" : ": " + why);
      if (!child) {
        print_line(line + "; releasing it");
        return outcome;  // hold mode: as on SIGTERM
      }
      print_line(line + "; sending SIG" + std::string(sigabbrev_np(plan.on_revoke)) + " to the command's group (pid " +
                 std::to_string(child->pid()) + ")");
      child->signal(plan.on_revoke);
    }
    if (!outcome.lost && lost.consume(why)) {
      outcome.lost = true;
      if (!child) {
        print_line(lost_what + why + " (Redis at " + context.redis + ")");
        outcome.status = kExitLockLost;
        return outcome;
      }
      print_line(lost_what + why + " (Redis at " + context.redis + "); sending SIGTERM to the command's group (pid " +
                 std::to_string(child->pid()) + "), SIGKILL after " + format_duration(plan.kill_grace) +
                 ", by the lease deadline");
      child->signal(SIGTERM);
      grace.arm(plan.kill_grace);
    }
    if (grace.consume()) child->kill_group();
  }
}

// Commands and connects must not eat the lease: at most a third of what
// the lease leaves after its margins (the renewal period), at least
// kMinCommandTimeout.
std::chrono::milliseconds command_timeout_for(const RunPlan& plan) {
  return std::max(run_window(plan.lease, plan.kill_grace) / 3, kMinCommandTimeout);
}

using SteadyClock = std::chrono::steady_clock;

double seconds_between(SteadyClock::time_point from, SteadyClock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// What acquire_and_hold() did, for --metrics-textfile.
struct RunTimes {
  std::string_view outcome = "error";
  std::optional<SteadyClock::time_point> wait_started;
  std::optional<SteadyClock::time_point> acquired;
  std::optional<MetricsSnapshot> client_metrics;  // at the end of the run
};

// Keeps the client's metrics for --metrics-textfile when the run ends.
class MetricsAtExit {
 public:
  MetricsAtExit(const Client& client, RunTimes& times) : client_(client), times_(times) {}
  ~MetricsAtExit() { times_.client_metrics = client_.metrics(); }
  MetricsAtExit(const MetricsAtExit&) = delete;
  MetricsAtExit& operator=(const MetricsAtExit&) = delete;

 private:
  const Client& client_;
  RunTimes& times_;
};

// " by host:pid, 'command', since ..." for the holders of a lock that
// was not had (at most kMaxHoldersNamed); empty when nobody is seen (a
// semaphore, released meanwhile) or Redis cannot say.
constexpr std::size_t kMaxHoldersNamed = 3;
std::string held_by_text(const Inspection& seen) {
  std::string text;
  for (std::size_t i = 0; i < seen.holders.size() && i < kMaxHoldersNamed; ++i) {
    text += (i == 0 ? " by " : "; and by ") + holder_identity_text(seen.holders[i].identity);
  }
  if (seen.holders.size() > kMaxHoldersNamed) {
    text += "; and " + std::to_string(seen.holders.size() - kMaxHoldersNamed) + " more";
  }
  return text;
}

std::string held_by(Backend& backend, const RunPlan& plan) {
  try {
    return held_by_text(inspect(backend, plan.name, {.flavor = plan.rule.flavor}));
  } catch (const Error&) {
    return "";
  }
}

// For -v's refresh line: who holds it now and the lease it has left (a
// semaphore's: the soonest a held permit's lease ends), read afresh.
VerboseLog::Reading reading_of(Backend& backend, const RunPlan& plan) {
  VerboseLog::Reading reading;
  try {
    const Inspection seen = inspect(backend, plan.name, {.flavor = plan.rule.flavor});
    reading.held_by = held_by_text(seen);
    if (seen.remaining_lease) {
      reading.lease_left = *seen.remaining_lease;
      return reading;
    }
    std::optional<std::int64_t> soonest_ms;
    for (const PermitSeen& permit : seen.permits) {
      if (permit.expiry_epoch_ms)
        soonest_ms = std::min(soonest_ms.value_or(*permit.expiry_epoch_ms), *permit.expiry_epoch_ms);
    }
    if (soonest_ms) {
      const std::int64_t now_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count();
      reading.lease_left = std::chrono::milliseconds(std::max<std::int64_t>(0, *soonest_ms - now_ms));
      reading.permits = true;
    }
  } catch (const Error&) {
    // Redis could not say: the line keeps the last try's estimate.
  }
  return reading;
}

// The semaphore owns its size: --permits N (or the policy's permits) sizes
// a crash-safe semaphore that does not exist yet; one that exists keeps
// its own total (`turnstile semaphore NAME --set-permits N` changes it),
// and a different N is said once, not refused (a count of 0, closed by its
// owner, is waited on: 0 asks the handle to make sure of nothing).
std::int64_t semaphore_size(Client& client, const RunPlan& plan, bool quiet) {
  if (!has_leased_permits(plan.rule.flavor)) return plan.rule.permits;
  // Set if absent, else read, in one script call: a count read in parts
  // (available, then held) could be caught between a take and a give.
  const PermitTotal total = client.permit_semaphore(plan.name).try_set_permits_or_get(plan.rule.permits);
  if (!total.set && total.total != plan.rule.permits && !quiet) {
    print_line("note: " + in_quotes(plan.name) + " has " + std::to_string(total.total) + " permits, its own count (" +
               std::to_string(plan.rule.permits) +
               " sizes it only when it does not exist; `turnstile semaphore` changes it)");
  }
  return total.total;
}

int acquire_and_hold(const RunPlan& plan, const RunOptions& options, SignalFd& signals,
                     const std::shared_ptr<Backend>& backend, const ErrorContext& context, RunTimes& times) {
  HoldNotice lost;                      // outlives the flavor whose lost handler notifies it
  EndedHolds ended_holds;               // as long
  HoldNotice at_risk;                   // outlives the client that tells it (--warn-before)
  VerboseLog verbose(options.verbose);  // outlives the client that tells it
  // The lease deadline the command's guardian enforces too, should this
  // process be stopped: moved by every confirmed acquisition and renewal.
  // (The real runtime's Instant is std::chrono::steady_clock, which is
  // CLOCK_MONOTONIC on Linux, the guardian's clock.)
  GuardianDeadline deadline(plan.kill_grace);
  auto publish_deadline = [&deadline](const LeaseDeadline& lease) {
    deadline.publish(lease.deadline.time_since_epoch().count());
  };
  BackgroundErrors background(context);
  // The lock is told lost at its local deadline less the kill grace, so
  // the grace (SIGTERM, then SIGKILL) ends by the deadline itself.
  Client client(backend,
                ClientOptions{
                    .lease = plan.lease,
                    .key_prefix = {},
                    .on_background_error = [&background](std::exception_ptr error) { background.report(error); },
                    .clock_drift_factor = kDefaultClockDriftFactor,
                    .stop_margin = kDefaultStopMargin + plan.kill_grace,
                    .unreachable_limit = plan.unreachable_limit,
                    .max_hold = plan.max_hold,
                    .lease_warning = plan.warn_before,
                    .on_lease_at_risk =
                        [&at_risk](const LeaseAtRisk& told) {
                          at_risk.notify("no renewal confirmed; lost in " +
                                         format_duration(std::chrono::ceil<std::chrono::milliseconds>(told.remaining)) +
                                         " unless one is");
                        },
                    .on_lease_deadline = publish_deadline,
                    // Also checked below, before anything is held (the
                    // client's own report is not printed again); with it
                    // the client listens for evictions of the held key.
                    .server_check = ServerCheck::warn,
                    .event_sink = verbose.sink(),
                    .event_level = verbose.level(),
                    .holder_command = plan.command.empty() ? std::string("turnstile run (no command)")
                                                           : redacted_command_line(plan.command),
                    .holder_label = options.label,
                });
  const MetricsAtExit metrics_at_exit(client, times);
  // Reentrant and fair locks are fenced, for TURNSTILE_FENCING_TOKEN; the
  // semaphore's first user sets its total, which is then its own
  // (semaphore_size()). An election is a fenced fair lock whose token is
  // the leader's term.
  const Flavor flavor = plan.rule.flavor;
  const LockLostHandler tell_lost = [&lost, &ended_holds](const LockLost& lost_hold) {
    if (!ended_holds.contains(lost_hold.owner)) lost.notify(lost_reason_text(lost_hold.reason));
  };
  // Redis must answer once before the wait begins: a wrong address or a
  // server that is down fails now with 69, rather than after the
  // unreachable limit. Outages after this are ridden out while waiting.
  // A round trip too slow for the lease is named as such: every command
  // gets a third of what the lease leaves (command_timeout_for()).
  try {
    (void)backend->command({"PING"});
  } catch (const TimeoutError& error) {
    throw TimeoutError(std::string(error.what()) + ": the round trip to Redis is too slow for --lease " +
                       format_duration(plan.lease) + " (each call may take " +
                       format_duration(command_timeout_for(plan)) + "); give a longer --lease");
  }
  // A server that may evict the lock's key could hand it to a second
  // holder: refused before anything is held, unless allowed.
  const ServerSafety safety = check_server(*backend);
  if (safety.evicts_locks()) {
    if (!plan.allow_evicting)
      throw UnsafeServerError(unsafe_server_message(safety) + " (--allow-evicting holds anyway)");
    print_line("warning: " + unsafe_server_message(safety) +
               " (--allow-evicting: holding anyway; the command is stopped when Redis reports the eviction, at "
               "once with `notify-keyspace-events Ee` on the server, else at the next renewal)");
  }

  std::unique_ptr<Holdable> held;
  std::optional<Election> election;
  if (plan.elect) {
    election.emplace(client.election(plan.name, ElectionOptions{.lock_delay = plan.lock_delay}));
    election->set_lost_handler(tell_lost);
  } else {
    held = client.holdable(
        flavor, plan.name,
        HoldableOptions{.fenced = can_be_fenced(flavor),
                        .shared = plan.shared,
                        .permits = is_semaphore(flavor) ? semaphore_size(client, plan, options.quiet) : 0,
                        .lock_delay = has_lease(flavor) ? std::optional<Duration>(plan.lock_delay) : std::nullopt});
    held->set_lost_handler(tell_lost);
  }

  times.wait_started = SteadyClock::now();
  // One round: `run` has one; `elect` campaigns again after each lost
  // leadership (unless --once), each round until the command exits.
  for (;;) {
    // The acquisition waits on the client's engine (no thread of its own);
    // its end wakes this thread's poll. A signal meanwhile withdraws it.
    const auto acquired = std::make_shared<WakeFd>();
    std::stop_source withdraw;
    const AcquireOptions acquire{
        .wait = plan.wait ? Duration(*plan.wait) : kWaitForever,
        .lease = std::nullopt,
        .stop = withdraw.get_token(),
    };
    Future<LockHold> acquiring;
    Future<Leadership> campaigning;
    if (election) {
      campaigning = election->campaign_async(plan.elect_value, acquire).then([acquired](Future<Leadership> done) {
        acquired->notify();
        return done.get();
      });
    } else {
      acquiring = held->try_acquire_hold_async(acquire).then([acquired](Future<LockHold> done) {
        acquired->notify();
        return done.get();
      });
    }
    verbose.set_gives_up_at(plan.wait ? std::optional<Instant>(VerboseLog::now() + *plan.wait) : std::nullopt);
    const std::optional<int> interrupted = wait_for_acquisition(signals, *acquired, withdraw, plan.name, verbose,
                                                                [&] { return reading_of(*backend, plan); });
    LockHold hold;
    Leadership leadership;
    try {
      if (election) {
        leadership = campaigning.get();
      } else {
        hold = acquiring.get();
      }
    } catch (...) {
      if (!interrupted) throw;
    }
    const LockHold& taken = election ? leadership.hold() : hold;
    if (interrupted) {
      times.outcome = "interrupted";
      // Granted at the very instant of the signal: given back at once.
      leadership.resign();
      if (hold) {
        try {
          hold.release_or_throw();
        } catch (const std::exception& error) {
          print_line("could not release " + in_quotes(plan.name) + " after the signal: " + error.what());
        }
      }
      return kExitSignalBase + *interrupted;
    }
    if (!taken) {
      times.outcome = "skipped";
      if (!options.quiet) {
        print_line(in_quotes(plan.name) + (election ? " is led elsewhere" : " is held elsewhere") +
                   held_by(*backend, plan) + "; gave up after " +
                   format_duration(plan.wait.value_or(std::chrono::milliseconds::zero())) + " (Redis at " +
                   context.redis + ")");
      }
      return options.conflict_exit_code;
    }
    if (election) {
      print_line("leading " + in_quotes(plan.name) + " in term " + std::to_string(leadership.term()) + " as " +
                 in_quotes(leadership.value()) + " (Redis at " + context.redis + ")");
    }

    // --on-revoke: release requests heard while this hold lasts.
    HoldNotice revoked;
    RevocationWatch revocations;
    if (plan.on_revoke != 0) {
      revocations = client.watch_release_requests(
          plan.name, [&revoked](const ReleaseRequest& request) { revoked.notify(printable(request.reason)); });
    }
    times.acquired = SteadyClock::now();
    times.outcome = "lost";  // until the command ran to its end under the lock
    HoldOutcome outcome;
    try {
      outcome = run_holding(plan, plan.command, taken, signals, {.lost = lost, .at_risk = at_risk, .revoked = revoked},
                            deadline, context);
    } catch (...) {
      times.outcome = "error";
      // Released on every way out; the error that got us here is the one told.
      leadership.resign();
      try {
        hold.release_or_throw();
      } catch (...) {
      }
      throw;
    }
    if (outcome.lost && election && !plan.once) {
      // Whatever Redis may still have goes; then the next campaign, whose
      // hold alone is told lost from here (this one's loss may come late).
      ended_holds.add(taken.owner());
      lost.clear();
      leadership.resign();
      deadline.next_hold();
      print_line("campaigning again for " + in_quotes(plan.name));
      continue;
    }
    if (outcome.lost) return kExitLockLost;  // the hold's destructor lets go of what Redis may still have
    if (election) {
      if (!leadership.held()) {
        print_line("lost the leadership of " + in_quotes(plan.name) + " before the command ended (Redis at " +
                   context.redis + ")");
        return kExitLockLost;
      }
      leadership.resign();
      times.outcome = "acquired";
      return outcome.status;
    }
    try {
      hold.release_or_throw();
    } catch (const NotOwnerError&) {
      print_line("lost " + std::string(noun_of(flavor)) + " " + in_quotes(plan.name) +
                 " before the command ended: it was no longer held at release (Redis at " + context.redis + ")");
      return kExitLockLost;
    } catch (const LockLostError& lost_error) {
      print_line("lost " + in_quotes(plan.name) + " before the command ended: " + lost_error.what());
      return kExitLockLost;
    } catch (const ConnectionError& unreachable) {
      // The command ran under the lock; the lock expires by itself.
      print_line("could not release " + in_quotes(plan.name) + " (Redis at " + context.redis +
                 "): " + unreachable.what() + "; it expires within " + format_duration(plan.lease));
    }
    times.outcome = "acquired";
    return outcome.status;
  }
}

// The options `run` and `elect` share: the wait, the lease and what guards
// it, the exit status of a wait given up, and what is told.
void add_hold_options(CLI::App& command, RunOptions& options) {
  CLI::Option* wait =
      command.add_option("-w,--wait", options.wait,
                         "how long to wait for the lock (250ms, 1.5s, 2m, 1h; a bare number is seconds, as flock's -w; "
                         "default: forever)");
  CLI::Option* no_wait = command.add_flag("-n,--nonblock", options.no_wait, "fail at once if held (--wait 0)");
  wait->excludes(no_wait);
  command.add_flag(
      "-q,--quiet", options.quiet,
      "no message when the lock is held elsewhere and the wait gives up: only the exit status tells (1, "
      "or -E's), as flock -n is silent (a cron job's skipped run mails nothing); errors are still printed");
  CLI::Option* lease =
      command.add_option("--lease", options.lease,
                         "the lease (default 30s), renewed every third of it while held; if no renewal is confirmed in "
                         "time the command is stopped before the lease can lapse: by this host's clock, allowing it to "
                         "run 1% slower than Redis's (the drift allowance; see docs/safety.md)");
  // The old spelling, for existing cron lines: deprecated, not in --help.
  CLI::Option* ttl = command.add_option("--ttl", options.lease, "deprecated: --lease")->group("");
  // Not both; checked here rather than by excludes(), which would list the
  // hidden option as an empty "Excludes:" in --lease's --help.
  command.parse_complete_callback([ttl, lease] {
    if (ttl->count() > 0 && lease->count() > 0) {
      throw CLI::ExcludesError("--ttl excludes --lease (--ttl is its old name)", CLI::ExitCodes::ExcludesError);
    }
  });
  command.add_option("--kill-grace", options.kill_grace,
                     "after a lost lock: time between SIGTERM and SIGKILL to the command's process group. It comes "
                     "out of the lease (SIGTERM at the lease deadline minus the grace); at most lease/2 "
                     "(default: 5s or lease/4, whichever is less)");
  command.add_option("--unreachable-limit", options.unreachable_limit,
                     "while waiting: ride out Redis being unreachable (reset, restart, pause, failover) for this long "
                     "before giving up with 69 (default 30s)");
  command.add_option("--max-hold", options.max_hold,
                     "the longest the lock is kept: after this long it is renewed no more and the command is stopped "
                     "as on a lost lock (SIGTERM, SIGKILL after --kill-grace, exit 75) (default: no limit)");
  command.add_option(
      "--warn-before", options.warn_before,
      "when no renewal has been confirmed and the lease's local deadline is this near, say so on stderr "
      "(and send --warn-signal to the command's group), before the command is stopped as on a lost lock; "
      "at most half of what the lease leaves (default: no warning)");
  command
      .add_option("--on-revoke", options.on_revoke,
                  "while held, listen for release requests (turnstile revoke NAME) and send this signal to the "
                  "command's group when one comes, e.g. TERM (it decides: the lock is released when it exits); "
                  "without a command, release at once (default: not listened for)")
      ->type_name("SIGNAL");
  command
      .add_option("--warn-signal", options.warn_signal,
                  "with --warn-before: the signal the command's group gets then, e.g. USR1 (default: none, only the "
                  "line on stderr)")
      ->type_name("SIGNAL");
  command.add_option(
      "--lock-delay", options.lock_delay,
      "if this run's hold ends without a clean release (killed with SIGKILL, its host gone, cut off from "
      "Redis past the lease), nobody gets the lock for this long after the lease: the key outlives the "
      "lease by it (max 1h; default: none). A clean exit, a failed command and a lost lock release at once");
  command
      .add_option("-E,--conflict-exit-code", options.conflict_exit_code,
                  "exit status when the lock was not had in time")
      ->check(CLI::Range(0, kMaxExitStatus))
      ->capture_default_str();
  command.add_option(
      "--metrics-textfile", options.metrics_textfile,
      "write what the run did (outcome, wait and hold seconds, exit status) to FILE at exit, atomically, "
      "for node_exporter's textfile collector");
  command.add_flag("-v,--verbose", options.verbose,
                   "on stderr, with timestamps: what it waits for (refreshed every 5s), the acquisition, failed "
                   "renewals and losses; -vv: every renewal too");
  command
      .add_option("--label", options.label,
                  "a note for people, shown with the holder by status, ls and a waiter that gives up (at most " +
                      std::to_string(kMaxHolderLabelBytes) + " bytes; never a secret: anyone who reads Redis sees it)")
      ->type_name("TEXT");
  command.add_flag("--allow-evicting", options.allow_evicting,
                   "hold even if Redis may evict lock keys (maxmemory-policy allkeys-* or volatile-*), with a warning; "
                   "without it such a server is refused with 78 (a policy file rule: allow_evicting = true)");
}

}  // namespace

CLI::App* add_run_command(CLI::App& app, RunOptions& options) {
  CLI::App* run = app.add_subcommand(
      "run",
      "turnstile run [OPTIONS] NAME [-- COMMAND [ARG...]]\n"
      "Wait for the lock, run COMMAND in a process group of its own while holding it, release when it exits.\n"
      "The command (and everything it started in its group) is stopped before the lease can lapse if renewals\n"
      "fail, dies with a killed turnstile, and is killed with its group when it exits. A guardian process\n"
      "knows the lease deadline too and stops the command at it if turnstile is stopped (SIGSTOP, a debugger);\n"
      "only both stopped at once leave it unenforced (a frozen cgroup freezes the command with them).\n"
      "Without a command: hold until SIGINT or SIGTERM. The command gets TURNSTILE_LOCK_NAME,\n"
      "TURNSTILE_OWNER and TURNSTILE_FENCING_TOKEN in its environment.");
  add_redis_option(*run, options.redis);
  add_name_argument(*run, options.name);
  run->add_option("command", options.command,
                  "the command and its arguments (after --); without one, hold until SIGINT/SIGTERM");
  CLI::Option* fair = run->add_flag("--fair", options.fair, "the fair lock: first come, first served");
  CLI::Option* token = run->add_flag("--token", options.token, "the plain token lock (SET NX PX)");
  CLI::Option* permits =
      run->add_option("--permits", options.permits,
                      "the crash-safe semaphore, with N permits if it does not exist yet (one that does keeps its own "
                      "count: turnstile semaphore NAME --set-permits changes it)");
  run->add_option("-c,--command", options.shell_command,
                  "run STRING with " + std::string(kShell) + " -c (flock's -c), instead of a command after --");
  run->add_flag("-o,--close")
      ->description(
          "accepted for flock(1) compatibility and ignored: the command never inherits a lock descriptor (turnstile "
          "holds the lock itself)");
  CLI::Option* read =
      run->add_flag("-s,--shared,--read", options.read,
                    "the read half of a read-write lock: shared with other readers, excluded by a writer (flock's -s)");
  CLI::Option* write =
      run->add_flag("-x,--exclusive,--write", options.write,
                    "the write half of a read-write lock: alone (Redisson RReadWriteLock layout; flock's -x)");
  fair->excludes(token)->excludes(permits)->excludes(read)->excludes(write);
  token->excludes(permits)->excludes(read)->excludes(write);
  permits->excludes(read)->excludes(write);
  read->excludes(write);
  run->add_option("--config", options.config_path,
                  "a lock policy (TOML): the flavor, lease and wait of the first rule matching NAME; flags override it")
      ->check(CLI::ExistingFile);
  add_hold_options(*run, options);
  return run;
}

CLI::App* add_elect_command(CLI::App& app, RunOptions& options) {
  CLI::App* elect = app.add_subcommand(
      "elect",
      "turnstile elect [OPTIONS] NAME [-- COMMAND [ARG...]]\n"
      "Campaign for leadership of NAME (candidates lead in the order they came; a term is a fencing token,\n"
      "strictly increasing), run COMMAND while leader as `run` does under its lock, and resign when it exits.\n"
      "A lost leadership stops the command (SIGTERM, SIGKILL after --kill-grace, by the lease deadline, the\n"
      "guardian process too if turnstile is stopped), then turnstile campaigns again and runs it anew when\n"
      "elected (--once: exit 75 instead). Without a command: lead until SIGINT or SIGTERM. The command gets\n"
      "TURNSTILE_LEADER_TERM, TURNSTILE_LEADER_VALUE and run's variables; `turnstile leader NAME` shows who leads.");
  add_redis_option(*elect, options.redis);
  add_name_argument(*elect, options.name);
  elect->add_option("command", options.command,
                    "the command and its arguments (after --); without one, lead until SIGINT/SIGTERM");
  elect
      ->add_option("--value", options.elect_value,
                   "what this candidate proclaims as leader, for observers (default: <host>:<pid>; at most " +
                       std::to_string(kMaxLeaderValueBytes) + " bytes; never a secret)")
      ->type_name("TEXT");
  elect->add_flag("--once", options.once, "exit 75 when the leadership is lost, instead of campaigning again");
  elect->add_option("-c,--command", options.shell_command,
                    "run STRING with " + std::string(kShell) + " -c, instead of a command after --");
  add_hold_options(*elect, options);
  return elect;
}

int run_command(const RunOptions& options) {
  ErrorContext context{.redis = {}, .name = options.name};
  std::optional<RunPlan> plan;
  try {
    plan = plan_run(options);
    if (options.metrics_textfile) check_metrics_textfile_path(*options.metrics_textfile);
  } catch (...) {
    return report_error(std::current_exception(), context);  // usage: no textfile
  }
  RunTimes times;
  int status = kExitInternal;
  try {
    // Before the client starts any thread: every thread inherits the mask.
    block_handled_signals();
    SignalFd signals;
    std::shared_ptr<Backend> backend = make_backend(options.redis, command_timeout_for(*plan));
    context.redis = backend->describe();
    status = acquire_and_hold(*plan, options, signals, backend, context, times);
  } catch (...) {
    status = report_error(std::current_exception(), context);
  }
  if (options.metrics_textfile) {
    const SteadyClock::time_point ended = SteadyClock::now();
    RunReport report{.name = options.name, .outcome = times.outcome, .exit_status = status};
    if (times.wait_started) report.wait_seconds = seconds_between(*times.wait_started, times.acquired.value_or(ended));
    if (times.acquired) report.hold_seconds = seconds_between(*times.acquired, ended);
    if (times.client_metrics) report.client_metrics = to_prometheus(*times.client_metrics, {{"name", options.name}});
    report.finished_epoch_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    const std::string failure = write_metrics_textfile(*options.metrics_textfile, report);
    if (!failure.empty()) print_line("--metrics-textfile: " + failure);
  }
  return status;
}

}  // namespace turnstile::cli
