// The Redisson-compatible semaphore: the available count as an integer
// string at the name, wake-ups on "redisson_sc:{<name>}".

#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "locks/engine/acquire_wait.h"
#include "locks/handles/client_core.h"
#include "locks/engine/hold_record.h"
#include "locks/engine/reply_shape.h"
#include "locks/flavors/required_total.h"
#include "locks/flavors/semaphore_common.h"
#include "locks/engine/task_future.h"
#include "locks/engine/wake_registry.h"
#include "lua_scripts.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/semaphore.h"

namespace turnstile {
namespace {

const Script& kScript = scripts::counting_semaphore;

// A 0/1 answer of the script.
bool flag_reply(const Reply& reply) {
  const std::int64_t flag = detail::integer_reply(kScript, reply);
  if (flag != 0 && flag != 1) detail::throw_unexpected(kScript, reply, "0 or 1");
  return flag == 1;
}

// What a try_acquire with the wake registry tells it of its process.
struct FleetTry {
  bool will_wait = false;       // a failure registers the process
  bool others_waiting = false;  // a success keeps it registered
};

// One call of the semaphore script; with fleet-wide wake-ups, the registry
// and its arguments (lua/counting_semaphore.lua).
Reply semaphore_call(detail::ClientCore& client, const std::string& name, std::string_view operation,
                     std::int64_t permits, const FleetTry& fleet = {}) {
  const KeyLayout layout = key_layout(Flavor::counting_semaphore, name);
  std::vector<std::string> keys{name, layout.channel};
  std::vector<std::string> args{std::string(operation), std::to_string(permits),
                                std::string(client.backend->publish_command())};
  if (detail::fleet_wakeups(client, layout)) {
    keys.push_back(layout.wake_registry);
    args.push_back(layout.wake_channel(client.id));
    args.push_back(std::to_string(client.runtime->wall_clock_ms()));
    args.emplace_back(fleet.will_wait ? "1" : "0");
    args.emplace_back(fleet.others_waiting ? "1" : "0");
    args.push_back(std::to_string(detail::kFleetSemaphoreRetryMs));
  }
  return client.backend->eval(kScript, keys, args);
}

}  // namespace

CountingSemaphore::CountingSemaphore(std::shared_ptr<detail::ClientCore> client, std::string_view name)
    : client_(std::move(client)),
      name_(client_->options.key_prefix + std::string(name)),
      total_(std::make_shared<detail::RequiredTotal>()) {
  check_lock_name(name, name_, "semaphore name");
  channel_ = key_layout(Flavor::counting_semaphore, name_).channel;
}

CountingSemaphore::CountingSemaphore(CountingSemaphore&&) noexcept = default;
CountingSemaphore& CountingSemaphore::operator=(CountingSemaphore&&) noexcept = default;
CountingSemaphore::~CountingSemaphore() = default;

Reply CountingSemaphore::call(std::string_view operation, std::int64_t permits) {
  return semaphore_call(*client_, name_, operation, permits);
}

bool CountingSemaphore::try_set_permits(std::int64_t permits) {
  detail::check_permit_count(permits, "try_set_permits");
  return flag_reply(call("try_set_permits", permits));
}

void CountingSemaphore::acquire(std::int64_t permits) {
  const bool acquired = acquire_by(permits, kNoDeadline);
  TURNSTILE_CHECK(acquired);
  (void)acquired;
}

bool CountingSemaphore::try_acquire(std::int64_t permits) { return acquire_by(permits, client_->runtime->now()); }

bool CountingSemaphore::try_acquire(std::int64_t permits, Duration wait) {
  return acquire_by(permits, client_->runtime->deadline_after(wait));
}

bool CountingSemaphore::try_acquire_until(Instant deadline, std::int64_t permits) {
  return acquire_by(permits, deadline);
}

bool CountingSemaphore::try_acquire(std::int64_t permits, const AcquireOptions& options) {
  refuse_lease(options);
  return acquire_by(permits, client_->runtime->deadline_after(options.wait), options.stop);
}

void CountingSemaphore::refuse_lease(const AcquireOptions& options) const {
  if (options.lease) {
    throw InvalidArgumentError("the counting semaphore " + in_quotes(name_) +
                               ": its permits have no lease (use flavor semaphore, the crash-safe one)");
  }
}

bool CountingSemaphore::acquire_by(std::int64_t permits, Instant deadline, std::stop_token stop) {
  return acquire_task(detail::WaitStyle::blocking, permits, deadline, std::move(stop)).run_blocking();
}

detail::Task<bool> CountingSemaphore::acquire_task(detail::WaitStyle style, std::int64_t permits, Instant deadline,
                                                   std::stop_token stop) {
  detail::check_permit_count(permits, "acquire");
  if (permits == 0) co_return true;
  settle_total();  // on the engine's thread for an asynchronous form
  // No permit expires here, so a failed try sleeps until a wake-up. A
  // message wakes up to as many local waiters as it announces permits; a
  // waiter for n > 1 that finds too few passes its wake-up on (one wanting
  // fewer may succeed), and does not sit out its wait when they come one
  // by one: its turn comes with each later message.
  // Transient failures are not ridden out (unreachable_limit 0): a try that
  // failed in transit may have taken permits, and a count has no ids to
  // recognise them by; the caller hears the failure.
  // With fleet-wide wake-ups a failed try registers the process, and a
  // waiter also tries again every kFleetSemaphoreRetryMs (its registration
  // lives that long). A foreign release (Redisson's, of permits it may
  // never have taken) is heard on the shared channel, which a waiting
  // process keeps (WakeRule::permit_count).
  detail::AcquisitionTiming timing;
  const KeyLayout layout = key_layout(Flavor::counting_semaphore, name_);
  const bool fleet = detail::fleet_wakeups(*client_, layout);
  const bool will_wait = deadline > client_->runtime->now();
  bool sent_any = false;

  bool acquired = false;
  // A fleet try's success: whether it was sent with other waiters of this
  // process ("others"), which decides what the registry keeps of it.
  std::optional<bool> success_sent_others;
  bool permits_left = false;  // ...and left free permits (reply 3)
  std::exception_ptr failure;
  try {
    detail::Task<bool> waiting = detail::acquire_with_wait(
        style, *client_->wakeups, *client_->runtime, channel_,
        detail::with_own_channel(*client_, layout,
                                 {.rule = detail::WakeRule::permit_count, .pass_on_failure = permits > 1}),
        detail::WaitLimits{.deadline = deadline, .stop = std::move(stop), .unreachable_limit = {}},
        [&]() -> detail::TryOutcome {
          const FleetTry fleet_try{.will_wait = will_wait,
                                   .others_waiting = client_->wakeups->waiting_on(channel_) > (will_wait ? 1 : 0)};
          sent_any = true;
          const Reply reply = semaphore_call(*client_, name_, "try_acquire", permits, fleet_try);
          const std::int64_t answer = detail::integer_reply(kScript, reply);
          if (answer == 1 || (fleet && answer == 3)) {
            if (fleet) success_sent_others = fleet_try.others_waiting;
            permits_left = answer == 3;
            return {std::nullopt, detail::WakeupHub::SharedChannel::ignored};
          }
          if (!fleet) {
            if (answer != 0) detail::throw_unexpected(kScript, reply, "0 or 1");
            return detail::TryOutcome(-1);
          }
          if (answer != 0 && answer != 2) detail::throw_unexpected(kScript, reply, "0, 1, 2 or 3");
          return {detail::kFleetSemaphoreRetryMs,
                  answer == 2 ? detail::WakeupHub::SharedChannel::ignored : detail::WakeupHub::SharedChannel::heeded};
        },
        &timing, client_->wait_subject(name_, Flavor::counting_semaphore));
    acquired = co_await std::move(waiting);
  } catch (const std::exception&) {
    failure = std::current_exception();
  }
  if (failure) {
    if (will_wait && sent_any) detail::leave_wake_registry_reporting_errors(*client_, layout, channel_);
    std::rethrow_exception(failure);
  }
  if (acquired) {
    client_->acquired(name_, Flavor::counting_semaphore, timing);
    if (success_sent_others) {
      detail::settle_registration_after_success(*client_, layout, channel_,
                                                {.others_sent = *success_sent_others, .permits_left = permits_left});
    }
  } else {
    client_->metrics->failed_try();
    if (will_wait && sent_any) detail::leave_wake_registry(*client_, layout, channel_);
  }
  co_return acquired;
}

void CountingSemaphore::release(std::int64_t permits) {
  detail::check_permit_count(permits, "release");
  if (permits == 0) return;
  (void)add(permits);
}

std::int64_t CountingSemaphore::available_permits() { return detail::integer_reply(kScript, call("available", 0)); }

std::int64_t CountingSemaphore::drain_permits() {
  const Reply reply = call("drain", 0);
  const std::int64_t drained = detail::integer_reply(kScript, reply);
  if (drained < 0) detail::throw_unexpected(kScript, reply, "a count >= 0");
  return drained;
}

void CountingSemaphore::add_permits(std::int64_t delta) {
  if (delta < -kMaxPermits || delta > kMaxPermits) {
    throw InvalidArgumentError("add_permits: at most 2^53 (" + std::to_string(kMaxPermits) +
                               ") permits either way, got " + std::to_string(delta));
  }
  (void)add(delta);
}

std::int64_t CountingSemaphore::set_permits(std::int64_t permits) {
  detail::check_permit_count(permits, "set_permits");
  return detail::integer_reply(kScript, call("set_permits", permits));
}

bool CountingSemaphore::reset() {
  const Reply reply = call("reset", 0);
  const std::int64_t deleted = detail::integer_reply(kScript, reply);
  if (deleted != 0 && deleted != 1) detail::throw_unexpected(kScript, reply, "0 or 1");
  return deleted == 1;
}

std::int64_t CountingSemaphore::add(std::int64_t delta) { return detail::integer_reply(kScript, call("add", delta)); }

// ---- Holdable ----

void CountingSemaphore::require_total(std::int64_t total) {
  detail::check_permit_count(total, "require_total");
  total_->require(total);
}

void CountingSemaphore::settle_total() {
  if (const std::optional<std::int64_t> total = total_->unsettled()) {
    (void)try_set_permits(*total);
    total_->settled();
  }
}

CountingSemaphore::CountingSemaphore(const CountingSemaphore&) = default;

namespace detail {

// One permit as a value (turnstile/hold.h). No lease: held until released.
class CountingHold final : public HoldRecord {
 public:
  explicit CountingHold(const CountingSemaphore& semaphore)
      : HoldRecord(Flavor::counting_semaphore, semaphore.name(), semaphore.client_->next_hold_owner()),
        semaphore_(semaphore) {}

  bool held() const override { return !released(); }
  std::stop_token loss_token() const override { return never_.get_token(); }
  Runtime& runtime() const override { return *semaphore_.client_->runtime; }
  void extend(Duration) override {
    throw InvalidArgumentError("semaphore " + in_quotes(name) + " is a counting semaphore: its permits have no lease");
  }

 private:
  void release(bool) override { semaphore_.release(1); }
  void report_background_error(std::exception_ptr error) const noexcept override {
    semaphore_.client_->report_background_error(error);
  }

  mutable CountingSemaphore semaphore_;
  std::stop_source never_;  // never requested
};

}  // namespace detail

LockHold CountingSemaphore::try_acquire_hold(const AcquireOptions& options) {
  refuse_lease(options);
  settle_total();
  if (!acquire_by(1, client_->runtime->deadline_after(options.wait), options.stop)) return {};
  return detail::wrap_hold(std::make_shared<detail::CountingHold>(*this));
}

Future<LockHold> CountingSemaphore::try_acquire_hold_async(const AcquireOptions& options) {
  refuse_lease(options);
  const Instant deadline = client_->runtime->deadline_after(options.wait);
  // A copy of the handle: the operation outlives this object if it must.
  auto semaphore = std::shared_ptr<CountingSemaphore>(new CountingSemaphore(*this));
  detail::Task<bool> acquiring = semaphore->acquire_task(detail::WaitStyle::suspending, 1, deadline, options.stop);
  return detail::start_future<LockHold>(*client_->runtime, std::move(acquiring),
                                        [semaphore](bool acquired) -> LockHold {
                                          if (!acquired) return {};
                                          return detail::wrap_hold(std::make_shared<detail::CountingHold>(*semaphore));
                                        });
}

// The asynchronous forms wait on no thread of their own (locks/engine/task.h); each
// keeps a copy of the handle, so this object may go first.
Future<void> CountingSemaphore::acquire_async(std::int64_t permits) {
  detail::check_permit_count(permits, "acquire");
  auto semaphore = std::shared_ptr<CountingSemaphore>(new CountingSemaphore(*this));
  detail::Task<bool> acquiring = semaphore->acquire_task(detail::WaitStyle::suspending, permits, kNoDeadline, {});
  return detail::start_future<void>(*client_->runtime, std::move(acquiring),
                                    [semaphore](bool acquired) { TURNSTILE_CHECK(acquired); });
}

Future<bool> CountingSemaphore::try_acquire_async(std::int64_t permits, Duration wait) {
  return try_acquire_async(permits, AcquireOptions{.wait = wait});
}

Future<bool> CountingSemaphore::try_acquire_async(std::int64_t permits, const AcquireOptions& options) {
  detail::check_permit_count(permits, "acquire");
  refuse_lease(options);
  const Instant deadline = client_->runtime->deadline_after(options.wait);
  auto semaphore = std::shared_ptr<CountingSemaphore>(new CountingSemaphore(*this));
  detail::Task<bool> acquiring =
      semaphore->acquire_task(detail::WaitStyle::suspending, permits, deadline, options.stop);
  return detail::start_future<bool>(*client_->runtime, std::move(acquiring),
                                    [semaphore](bool acquired) { return acquired; });
}

Future<void> CountingSemaphore::release_async(std::int64_t permits) {
  detail::check_permit_count(permits, "release");
  auto semaphore = std::shared_ptr<CountingSemaphore>(new CountingSemaphore(*this));
  return detail::post_future<void>(*client_->runtime, [semaphore, permits] { semaphore->release(permits); });
}

}  // namespace turnstile
