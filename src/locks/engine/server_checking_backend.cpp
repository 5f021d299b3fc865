#include "locks/engine/server_checking_backend.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "core/check.h"

#include "turnstile/errors.h"
#include "turnstile/server_check.h"

namespace turnstile::detail {
namespace {

// The database of the connection CLIENT INFO ran on ("... db=2 ..."), or
// 0 when it cannot be read (Redis before 6.2, an ACL user without it).
int connection_db(Backend& backend) {
  try {
    const Reply info = backend.command({"CLIENT", "INFO"});
    if (!info.is_bulk() && !info.is_status()) return 0;
    const std::string_view text = info.as_string();
    const std::size_t at = text.find(" db=");
    if (at == std::string_view::npos) return 0;
    int db = 0;
    const char* begin = text.data() + at + 4;
    if (std::from_chars(begin, text.data() + text.size(), db).ec != std::errc()) return 0;
    return db;
  } catch (...) {
    return 0;
  }
}

// Which of the keyevents `evicted`, `del` and `expired` the server publishes, from
// `notify-keyspace-events` (E: keyevent channels; A: every class, g: del,
// x: expired, e: evicted). Unreadable (CONFIG refused, as managed Redis
// often does; the fake Redis): `evicted` alone if the server evicts lock
// keys (subscribed blindly, as nothing else tells), else none.
std::vector<std::string> published_key_lost_events(Backend& backend, bool evicts) {
  std::vector<std::string> events;
  try {
    const Reply reply = backend.command({"CONFIG", "GET", "notify-keyspace-events"});
    if (reply.is_array() && reply.as_array().size() == 2 && reply.as_array()[1].is_bulk()) {
      const std::string_view flags = reply.as_array()[1].as_string();
      if (flags.find('E') == std::string_view::npos) return events;
      const bool all = flags.find('A') != std::string_view::npos;
      for (const auto& [name, flag] : {std::pair<const char*, char>{"evicted", 'e'}, {"del", 'g'}, {"expired", 'x'}}) {
        if (all || flags.find(flag) != std::string_view::npos) events.emplace_back(name);
      }
      return events;
    }
  } catch (...) {
    // Refused or unknown: as unreadable.
  }
  if (evicts) events.emplace_back("evicted");
  return events;
}

// Its safety, or what made it fail.
struct Finding {
  std::optional<ServerSafety> safety;
  std::exception_ptr failure;
};

// Runs check_server(). When no master could be asked, or the masters could
// not be found (a cluster's slot map), the finding is that failure (a
// TlsVerificationError stays one).
Finding check(Backend& backend) {
  Finding finding;
  try {
    finding.safety = check_server(backend);
  } catch (const std::exception&) {
    finding.failure = std::current_exception();
    return finding;
  }
  const std::vector<MasterSafety>& masters = finding.safety->masters;
  if (!masters.empty() && std::all_of(masters.begin(), masters.end(),
                                      [](const MasterSafety& master) { return master.failure != nullptr; })) {
    finding.failure = masters.front().failure;
    finding.safety.reset();
  }
  return finding;
}

}  // namespace

struct ServerCheckingBackend::Run {
  explicit Run(std::shared_ptr<Backend> backend_in) : backend(std::move(backend_in)) {}

  // The task: the check, every waiter told, then the keyspace listener set
  // up on a task of its own (`self` is this Run), so that no call waits
  // for it.
  static void check_and_tell(const std::shared_ptr<Run>& self, Runtime& runtime,
                             const std::function<void(const std::string&)>& on_key_lost);
  // The check and the keyspace events the server publishes (`events`), its
  // finding kept and every waiter told (also when unwound).
  static void told_after_check(Run& run, std::vector<std::string>& events);
  void listen_for_lost_keys(const std::function<void(const std::string&)>& on_key_lost,
                            const std::vector<std::string>& events) noexcept;

  // Declared first: destroyed after the subscription made on it.
  const std::shared_ptr<Backend> backend;
  Mutex mutex;
  bool finished TURNSTILE_GUARDED_BY(mutex) = false;
  Finding finding TURNSTILE_GUARDED_BY(mutex);
  bool reported TURNSTILE_GUARDED_BY(mutex) = false;  // the finding was taken by a call (done_)
  // The Event of each call waiting (an Event has one waiter).
  std::vector<std::shared_ptr<Event>> waiting TURNSTILE_GUARDED_BY(mutex);
  // Written by the listening task only (after `finished`); read by nobody.
  std::vector<Subscription> lost_keys;
};

void ServerCheckingBackend::Run::check_and_tell(const std::shared_ptr<Run>& self, Runtime& runtime,
                                                const std::function<void(const std::string&)>& on_key_lost) {
  std::vector<std::string> events;  // the keyspace events to listen to
  told_after_check(*self, events);
  if (events.empty() || !on_key_lost) return;
  try {
    runtime.spawn([self, on_key_lost, events = std::move(events)] { self->listen_for_lost_keys(on_key_lost, events); });
  } catch (const std::exception&) {
    // No task to be had (the runtime's bound): holders learn of a lost key
    // at their next renewal or wipe check, as without events.
  }
}

void ServerCheckingBackend::Run::told_after_check(Run& run, std::vector<std::string>& events) {
  Finding found;
  // A task unwound by something other than an exception (a simulated
  // crash) still tells its waiters: the check did not finish.
  struct Tell {
    Run& run;
    Finding& found;
    ~Tell() {
      if (!found.safety && !found.failure) {
        found.failure = std::make_exception_ptr(ConnectionError("the server check did not finish"));
      }
      std::vector<std::shared_ptr<Event>> told;
      {
        const MutexLock guard(run.mutex);
        run.finding = std::move(found);
        run.finished = true;
        told.swap(run.waiting);
      }
      for (const std::shared_ptr<Event>& event : told) event->notify();
    }
  } tell{run, found};
  found = check(*run.backend);
  // Read with the check, before any call goes on: a command of the task's
  // own in flight beside the calls would share their fate (a server that
  // stops answering would hold it for a command timeout).
  if (found.safety) events = published_key_lost_events(*run.backend, found.safety->evicts_locks());
}

void ServerCheckingBackend::Run::listen_for_lost_keys(const std::function<void(const std::string&)>& on_key_lost,
                                                      const std::vector<std::string>& events) noexcept {
  if (!on_key_lost) return;
  try {
    const std::string prefix = "__keyevent@" + std::to_string(connection_db(*backend)) + "__:";
    for (const std::string& event_name : events) {
      lost_keys.push_back(backend->subscribe(prefix + event_name, [handler = on_key_lost](const PubSubEvent& event) {
        if (event.kind == PubSubEvent::Kind::message) handler(std::string(event.payload));
      }));
    }
  } catch (...) {
    // Not allowed (an ACL without the channels) or not reachable: holders
    // learn of a lost key at their next renewal or wipe check, as without
    // events.
  }
}

ServerCheckingBackend::ServerCheckingBackend(std::shared_ptr<Backend> inner, std::shared_ptr<Runtime> runtime,
                                             std::function<void(std::exception_ptr)> report)
    : ForwardingBackend(inner), checked_(std::move(inner)), runtime_(std::move(runtime)), report_(std::move(report)) {
  TURNSTILE_CHECK(runtime_ && report_);
}

void ServerCheckingBackend::check_once(std::optional<Duration> within) {
  if (done_.load(std::memory_order_acquire)) return;
  const Instant now = runtime_->now();
  const Instant deadline = within ? now + std::clamp(*within, Duration::zero(), kNoDeadline - now) : kNoDeadline;
  const std::shared_ptr<Event> woken = runtime_->make_event();
  std::shared_ptr<Run> run;
  bool start = false;
  {
    const MutexLock guard(mutex_);
    if (run_) {
      const MutexLock run_guard(run_->mutex);
      // A failed check is not remembered: this call checks again.
      start = run_->finished && run_->finding.failure;
    }
    if (!run_ || start) {
      run_ = std::make_shared<Run>(checked_);
      start = true;
    }
    run = run_;
    const MutexLock run_guard(run->mutex);
    if (!run->finished) run->waiting.push_back(woken);
  }
  if (start && !within) {
    Run::check_and_tell(run, *runtime_, on_key_lost_);  // nothing to leave early for: no task
  } else if (start) {
    runtime_->spawn(
        [run, runtime = runtime_, on_key_lost = on_key_lost_] { Run::check_and_tell(run, *runtime, on_key_lost); });
  }
  // Each pass takes the one notify the task makes, or ends the wait.
  constexpr int kMaxWakeUps = 2;
  Finding finding;
  bool take_report = false;
  for (int pass = 0;; ++pass) {
    TURNSTILE_CHECK(pass <= kMaxWakeUps);
    {
      const MutexLock guard(run->mutex);
      if (run->finished) {
        if (run->finding.failure) std::rethrow_exception(run->finding.failure);
        take_report = !std::exchange(run->reported, true);
        if (take_report) finding = run->finding;
        break;
      }
    }
    if (woken->wait_until(deadline)) continue;
    const MutexLock guard(run->mutex);
    if (run->finished) continue;
    std::erase(run->waiting, woken);
    throw PoolExhaustedError(describe() +
                             ": the server check before the first call did not finish within the caller's "
                             "deadline; nothing was sent");
  }
  done_.store(true, std::memory_order_release);
  if (!take_report || !finding.safety->evicts_locks()) return;
  try {
    report_(std::make_exception_ptr(UnsafeServerError(unsafe_server_message(*finding.safety))));
  } catch (...) {
    // report_ must not throw; the lock goes on either way.
  }
}

void ServerCheckingBackend::set_key_lost_handler(std::function<void(const std::string&)> handler) {
  on_key_lost_ = std::move(handler);
}

Reply ServerCheckingBackend::eval(const Script& script, const std::vector<std::string>& keys,
                                  const std::vector<std::string>& args) {
  check_once(std::nullopt);
  return ForwardingBackend::eval(script, keys, args);
}

SyncedReply ServerCheckingBackend::eval_synced(const Script& script, const std::vector<std::string>& keys,
                                               const std::vector<std::string>& args) {
  check_once(std::nullopt);
  return ForwardingBackend::eval_synced(script, keys, args);
}

SyncedReply ServerCheckingBackend::eval_synced_within(const Script& script, const std::vector<std::string>& keys,
                                                      const std::vector<std::string>& args,
                                                      const EvalOptions& options) {
  check_once(options.send_within);
  return inner().eval_synced_within(script, keys, args, options);
}

Subscription ServerCheckingBackend::subscribe_within(std::string_view channel, PubSubHandler handler,
                                                     const SubscribeOptions& options) {
  return inner().subscribe_within(channel, std::move(handler), options);
}

std::unique_ptr<PendingReply> ServerCheckingBackend::send_eval(const Script& script,
                                                               const std::vector<std::string>& keys,
                                                               const std::vector<std::string>& args, EvalSync sync) {
  check_once(std::nullopt);
  return ForwardingBackend::send_eval(script, keys, args, sync);
}

std::unique_ptr<PendingReply> ServerCheckingBackend::send_eval_within(const Script& script,
                                                                      const std::vector<std::string>& keys,
                                                                      const std::vector<std::string>& args,
                                                                      EvalSync sync, const EvalOptions& options) {
  check_once(options.send_within);
  return inner().send_eval_within(script, keys, args, sync, options);
}

std::vector<std::unique_ptr<PendingReply>> ServerCheckingBackend::send_evals(std::vector<EvalRequest> calls) {
  check_once(std::nullopt);
  return inner().send_evals(std::move(calls));
}

}  // namespace turnstile::detail
