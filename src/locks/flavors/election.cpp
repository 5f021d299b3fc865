// Leader election over a fenced fair lock and a leader record
// (turnstile/election.h; lua/election_*.lua).

#include "turnstile/election.h"

#include <algorithm>
#include <utility>

#include "core/check.h"
#include "locks/engine/reply_shape.h"
#include "locks/handles/client_core.h"
#include "lua_scripts.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/key_layout.h"
#include "turnstile/mutex.h"

namespace turnstile {
namespace detail {

class ElectionCore : public std::enable_shared_from_this<ElectionCore> {
 public:
  ElectionCore(Client& client, std::shared_ptr<ClientCore> client_core, std::string_view name,
               const ElectionOptions& options)
      : client_core_(std::move(client_core)),
        options_(options),
        lock_(client.holdable(
            Flavor::fair, name,
            HoldableOptions{.fenced = true,
                            .fair = FairLockOptions{.waiter_timeout = options.waiter_timeout, .fenced = true},
                            .lock_delay = options.lock_delay})),
        record_(leader_record_key(lock_->name())),
        channel_(leader_channel(lock_->name())) {
    if (options.observe_period < ElectionOptions::kMinObservePeriod ||
        options.observe_period > ElectionOptions::kMaxObservePeriod) {
      throw InvalidArgumentError("election observe_period must be within 10ms..1h");
    }
  }

  const std::string& name() const { return lock_->name(); }
  const ElectionOptions& options() const { return options_; }
  Runtime& runtime() const { return *client_core_->runtime; }
  Backend& backend() const { return *client_core_->user_backend; }
  const std::string& channel() const { return channel_; }
  void set_lost_handler(LockLostHandler handler) { lock_->set_lost_handler(std::move(handler)); }
  void report(std::exception_ptr error) const noexcept { client_core_->report_background_error(error); }

  static void check_value(const std::string& value) {
    if (value.size() > kMaxLeaderValueBytes) {
      throw InvalidArgumentError("a leader's value is " + std::to_string(value.size()) + " bytes; at most " +
                                 std::to_string(kMaxLeaderValueBytes));
    }
  }

  LockHold acquire(const AcquireOptions& options) { return lock_->try_acquire_hold(options); }
  Future<LockHold> acquire_async(const AcquireOptions& options) { return lock_->try_acquire_hold_async(options); }

  // Proclaims `value` for a fresh hold: the Leadership, or (elected false)
  // an empty one when the hold was lost first (released here).
  Leadership announce(LockHold hold, const std::string& value, bool& elected) {
    const std::optional<std::int64_t> term = hold.fencing_token();
    TURNSTILE_CHECK_MSG(term.has_value(), "an election's lock is fenced");
    if (!hold.held() || !proclaim_call(hold.owner(), *term, value)) {
      hold.release();
      elected = false;
      return {};
    }
    elected = true;
    return Leadership(shared_from_this(), std::move(hold), *term, value);
  }

  // lua/election_proclaim.lua: true if proclaimed.
  bool proclaim_call(const std::string& owner, std::int64_t term, const std::string& value) {
    const Reply reply = backend().eval(scripts::election_proclaim, {lock_->name(), record_},
                                       {owner, std::to_string(term), value, std::to_string(runtime().wall_clock_ms()),
                                        channel_, std::string(backend().publish_command())});
    return integer_reply(scripts::election_proclaim, reply) == 1;
  }

  void resign_call(const std::string& owner) {
    const Reply reply = backend().eval(scripts::election_resign, {record_},
                                       {owner, channel_, std::string(backend().publish_command())});
    (void)integer_reply(scripts::election_resign, reply);
  }

  std::optional<Leader> read_leader() {
    const Reply reply = backend().eval(scripts::election_leader, {lock_->name(), record_}, {});
    if (!reply.is_array()) throw_unexpected(scripts::election_leader, reply, "an array");
    const std::vector<Reply>& fields = reply.as_array();
    if (fields.empty()) return std::nullopt;
    if (fields.size() != 5 || !fields[0].is_bulk() || !fields[1].is_bulk() || !fields[2].is_bulk() ||
        !fields[3].is_bulk() || !fields[4].is_integer()) {
      throw_unexpected(scripts::election_leader, reply, "{owner, term, value, since_ms, pttl}");
    }
    Leader leader;
    leader.owner = fields[0].as_string();
    leader.value = fields[2].as_string();
    try {
      leader.term = std::stoll(fields[1].as_string());
      leader.since_epoch_ms = std::stoll(fields[3].as_string());
    } catch (const std::exception&) {
      throw_unexpected(scripts::election_leader, reply, "a term and since_ms in decimal");
    }
    leader.remaining = std::chrono::milliseconds(std::max<std::int64_t>(fields[4].as_integer(), 0));
    return leader;
  }

 private:
  std::shared_ptr<ClientCore> client_core_;
  ElectionOptions options_;
  std::unique_ptr<Holdable> lock_;
  std::string record_;
  std::string channel_;
};

// One observe(): reads the leader when told (a message on the channel, a
// resubscription, a timer) and tells the handler what changed. At most one
// read at a time; a trigger during a read makes one more after it.
class ObserverCore : public std::enable_shared_from_this<ObserverCore> {
 public:
  ObserverCore(std::shared_ptr<ElectionCore> election, LeaderHandler handler)
      : election_(std::move(election)), handler_(std::move(handler)), idle_(election_->runtime().make_event()) {}

  void start() {
    std::weak_ptr<ObserverCore> weak = weak_from_this();
    Subscription subscription = election_->backend().subscribe(election_->channel(), [weak](const PubSubEvent&) {
      if (auto self = weak.lock()) self->trigger();
    });
    {
      MutexLock guard(mutex_);
      subscription_ = std::move(subscription);
    }
    trigger();
  }

  void trigger() {
    MutexLock guard(mutex_);
    if (stopped_) return;
    if (reading_) {
      again_ = true;
      return;
    }
    reading_ = true;
    election_->runtime().post([self = shared_from_this()] { self->read_loop(); });
  }

  void stop() noexcept {
    Subscription subscription;
    bool wait = false;
    {
      MutexLock guard(mutex_);
      if (stopped_) return;
      stopped_ = true;
      if (timer_) (void)election_->runtime().cancel(*timer_);
      timer_.reset();
      subscription = std::move(subscription_);
      wait = calling_ && calling_task_ != election_->runtime().current_task_id();
    }
    subscription.reset();
    // A handler running now on another task ends before stop() returns.
    while (wait) {
      (void)idle_->wait_until(Instant::max());
      MutexLock guard(mutex_);
      wait = calling_;
    }
  }

 private:
  void read_loop() {
    for (;;) {
      std::optional<Leader> now;
      bool read = false;
      try {
        now = election_->read_leader();
        read = true;
      } catch (const std::exception&) {
        election_->report(std::current_exception());
      }
      MutexLock guard(mutex_);
      if (stopped_) {
        reading_ = false;
        return;
      }
      if (read && (!told_ || !same_leader(last_, now))) {
        told_ = true;
        last_ = now;
        calling_ = true;
        calling_task_ = election_->runtime().current_task_id();
        guard.unlock();
        try {
          handler_(now);
        } catch (...) {
          election_->report(std::current_exception());
        }
        guard.lock();
        calling_ = false;
        idle_->notify();
        if (stopped_) {
          reading_ = false;
          return;
        }
      }
      if (again_) {
        again_ = false;
        continue;
      }
      reading_ = false;
      // The next read: when the leader's lease ends on the server (a
      // leader lost without resigning publishes nothing), and within the
      // period in any case.
      Duration next = election_->options().observe_period;
      if (read && now) next = std::min(next, Duration(now->remaining + kAfterLease));
      std::weak_ptr<ObserverCore> weak = weak_from_this();
      timer_ = election_->runtime().schedule_at(election_->runtime().now() + next, [weak] {
        if (auto self = weak.lock()) self->trigger();
      });
      return;
    }
  }

  static bool same_leader(const std::optional<Leader>& a, const std::optional<Leader>& b) {
    if (a.has_value() != b.has_value()) return false;
    return !a || (a->owner == b->owner && a->term == b->term && a->value == b->value);
  }

  // Read again this long after a lease's end: past the server's own expiry.
  static constexpr Duration kAfterLease = std::chrono::milliseconds(5);

  std::shared_ptr<ElectionCore> election_;
  LeaderHandler handler_;
  std::unique_ptr<Event> idle_;
  Mutex mutex_;  // never held while reading or calling the handler
  Subscription subscription_ TURNSTILE_GUARDED_BY(mutex_);
  std::optional<Runtime::TimerId> timer_ TURNSTILE_GUARDED_BY(mutex_);
  bool stopped_ TURNSTILE_GUARDED_BY(mutex_) = false;
  bool reading_ TURNSTILE_GUARDED_BY(mutex_) = false;
  bool again_ TURNSTILE_GUARDED_BY(mutex_) = false;
  bool told_ TURNSTILE_GUARDED_BY(mutex_) = false;
  bool calling_ TURNSTILE_GUARDED_BY(mutex_) = false;
  std::uint64_t calling_task_ TURNSTILE_GUARDED_BY(mutex_) = 0;
  std::optional<Leader> last_ TURNSTILE_GUARDED_BY(mutex_);
};

namespace {

// The asynchronous campaign: an acquisition on the engine, then its
// proclamation; once more if the hold was lost before it.
void campaign_step(std::shared_ptr<ElectionCore> election, std::string value, AcquireOptions options,
                   std::optional<Instant> deadline, std::shared_ptr<FutureState<Leadership>> result) {
  Runtime& runtime = election->runtime();
  if (deadline) options.wait = std::max(Duration::zero(), Duration(*deadline - runtime.now()));
  (void)election->acquire_async(options).then(
      [election, value = std::move(value), options, deadline, result](Future<LockHold> acquired) mutable {
        bool elected = false;
        Leadership leadership;
        try {
          LockHold hold = acquired.get();
          if (!hold) {
            result->complete([] { return Leadership(); });
            return;
          }
          leadership = election->announce(std::move(hold), value, elected);
        } catch (...) {
          const std::exception_ptr error = std::current_exception();
          result->complete([error]() -> Leadership { std::rethrow_exception(error); });
          return;
        }
        if (elected) {
          result->complete([&leadership] { return std::move(leadership); });
          return;
        }
        campaign_step(std::move(election), std::move(value), options, deadline, std::move(result));
      });
}

}  // namespace
}  // namespace detail

Leadership::Leadership() noexcept = default;

Leadership::Leadership(std::shared_ptr<detail::ElectionCore> election, LockHold hold, std::int64_t term,
                       std::string value) noexcept
    : election_(std::move(election)), hold_(std::move(hold)), term_(term), value_(std::move(value)) {}

Leadership::Leadership(Leadership&& other) noexcept
    : election_(std::move(other.election_)),
      hold_(std::move(other.hold_)),
      term_(std::exchange(other.term_, 0)),
      value_(std::move(other.value_)) {}

Leadership& Leadership::operator=(Leadership&& other) noexcept {
  if (this != &other) {
    resign();
    election_ = std::move(other.election_);
    hold_ = std::move(other.hold_);
    term_ = std::exchange(other.term_, 0);
    value_ = std::move(other.value_);
  }
  return *this;
}

Leadership::~Leadership() { resign(); }

void Leadership::proclaim(std::string value) {
  detail::ElectionCore::check_value(value);
  if (!hold_.owns_hold() || !hold_.held()) {
    throw NotOwnerError("not the leader of '" + (hold_.owns_hold() ? hold_.name() : std::string()) +
                        "': its leadership was lost or resigned");
  }
  if (!election_->proclaim_call(hold_.owner(), term_, value)) {
    throw NotOwnerError("no longer the leader of '" + hold_.name() + "': Redis has another holder (term " +
                        std::to_string(term_) + ")");
  }
  value_ = std::move(value);
}

void Leadership::resign() noexcept {
  if (!hold_.owns_hold()) return;
  const std::string owner = hold_.owner();
  hold_.release();
  try {
    election_->resign_call(owner);
  } catch (...) {
    election_->report(std::current_exception());
  }
  term_ = 0;
  value_.clear();
  election_.reset();
}

Observation::Observation() noexcept = default;
Observation::Observation(std::shared_ptr<detail::ObserverCore> core) noexcept : core_(std::move(core)) {}
Observation::Observation(Observation&& other) noexcept : core_(std::move(other.core_)) {}
Observation& Observation::operator=(Observation&& other) noexcept {
  if (this != &other) {
    stop();
    core_ = std::move(other.core_);
  }
  return *this;
}
Observation::~Observation() { stop(); }

void Observation::stop() noexcept {
  if (!core_) return;
  core_->stop();
  core_.reset();
}

Election::Election(std::shared_ptr<detail::ElectionCore> core) noexcept : core_(std::move(core)) {}
Election::Election(Election&&) noexcept = default;
Election& Election::operator=(Election&&) noexcept = default;
Election::~Election() = default;

const std::string& Election::name() const { return core_->name(); }
const ElectionOptions& Election::options() const { return core_->options(); }

Leadership Election::campaign(std::string value) {
  return try_campaign(std::move(value), AcquireOptions{.wait = kWaitForever, .lease = std::nullopt, .stop = {}});
}

Leadership Election::try_campaign(std::string value, const AcquireOptions& options) {
  detail::ElectionCore::check_value(value);
  Runtime& runtime = core_->runtime();
  const std::optional<Instant> deadline =
      options.wait == kWaitForever ? std::nullopt : std::optional<Instant>(runtime.deadline_after(options.wait));
  AcquireOptions attempt = options;
  for (;;) {
    if (deadline) attempt.wait = std::max(Duration::zero(), Duration(*deadline - runtime.now()));
    LockHold hold = core_->acquire(attempt);
    if (!hold) return {};  // not had in time, or stopped
    bool elected = false;
    Leadership leadership = core_->announce(std::move(hold), value, elected);
    if (elected) return leadership;
    // Had, and lost before its proclamation: campaign on.
  }
}

Future<Leadership> Election::campaign_async(std::string value, const AcquireOptions& options) {
  detail::ElectionCore::check_value(value);
  Runtime& runtime = core_->runtime();
  auto result = std::make_shared<detail::FutureState<Leadership>>(runtime);
  const std::optional<Instant> deadline =
      options.wait == kWaitForever ? std::nullopt : std::optional<Instant>(runtime.deadline_after(options.wait));
  detail::campaign_step(core_, std::move(value), options, deadline, result);
  return detail::future_of(std::move(result));
}

std::optional<Leader> Election::leader() { return core_->read_leader(); }

Observation Election::observe(LeaderHandler handler) {
  TURNSTILE_CHECK_MSG(handler != nullptr, "observe() needs a handler");
  auto observer = std::make_shared<detail::ObserverCore>(core_, std::move(handler));
  observer->start();
  return Observation(std::move(observer));
}

void Election::set_lost_handler(LockLostHandler handler) { core_->set_lost_handler(std::move(handler)); }

Election Client::election(std::string_view name, const ElectionOptions& options) {
  return Election(std::make_shared<detail::ElectionCore>(*this, core_, name, options));
}

}  // namespace turnstile
