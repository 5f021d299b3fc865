#include "locks/engine/wakeup_hub.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <utility>

#include <boost/container/deque.hpp>
#include <boost/container/small_vector.hpp>

#include "core/check.h"
#include "turnstile/errors.h"

namespace turnstile::detail {

struct WakeupHub::WaiterState {
  // Made at its first sleep, under the queue's lock (Waiter::sleep).
  std::unique_ptr<AsyncSignal> signal;
  // Joined with a deadline still ahead (Admission::bounded): it may wait,
  // so its tries register the process in the wake registry.
  bool may_wait = true;
  bool pass_on_failure = false;
  bool shared = false;
  // Asleep in sleep_until() and free to be handed a credit.
  bool sleeping = false;
  // Handed a credit since it went to sleep (cleared when it wakes).
  bool handed = false;
  // The epoch of a credit it took and has not used in a definitive try.
  std::optional<std::uint64_t> owed;
  // The queue's epoch when its latest try began (or when it joined).
  std::uint64_t tried_epoch = 0;
  // Direct handoff to a registered process (WakeOptions::grant_id): its
  // acquisition id, and a grant received for it and not taken yet.
  std::string grant_id;
  std::optional<std::string> grant;
  // The queue's pace epoch (kNearMessage received) it last woke for.
  std::uint64_t paced_epoch = 0;
};

// Whom a credit may wake: anyone, or on a read-write lock's own channel
// the kind its release told ("w": a writer, "r" and "s": the readers).
// The kind is chosen when the message comes (anyone for "w" or "r" when
// none of that kind waits then); a credit of a kind nobody eligible of
// that kind can use is dropped, never turned into anyone's later.
enum class CreditFor : std::uint8_t { anyone, writer, reader };

struct Credit {
  std::uint64_t epoch = 0;
  CreditFor target = CreditFor::anyone;
};

// Waiters a queue holds without allocating (most have one or two).
constexpr std::size_t kInlineWaiters = 2;

struct WakeupHub::Queue {
  Queue(std::string channel_in, const WakeOptions& options)
      : channel(std::move(channel_in)),
        rule(options.rule),
        own_channel(options.own_channel),
        hears_shared(own_channel.empty() || options.subscribe_shared) {}

  const std::string channel;
  const WakeRule rule;
  const std::string own_channel;  // empty: none (see the header's overview)
  // Whether `channel` (the shared one) is subscribed at all: always
  // without an own channel, else as WakeOptions::subscribe_shared says.
  const bool hears_shared;
  Mutex mutex;
  std::uint64_t epoch TURNSTILE_GUARDED_BY(mutex) = 0;  // messages and resubscriptions received
  // Epochs of credits not handed out yet, oldest first; never more than
  // waiters (see add_credit_locked). Boost's deque allocates nothing until
  // a credit comes, and a lone waiter's vector stays inline: a queue made
  // and dropped for an uncontended acquisition costs no allocation for
  // either (std::deque allocated two).
  boost::container::deque<Credit> credits TURNSTILE_GUARDED_BY(mutex);
  // In the order they joined.
  boost::container::small_vector<WaiterState*, kInlineWaiters> waiters TURNSTILE_GUARDED_BY(mutex);
  Subscription subscription TURNSTILE_GUARDED_BY(mutex);
  bool subscribed TURNSTILE_GUARDED_BY(mutex) = false;
  Subscription own_subscription TURNSTILE_GUARDED_BY(mutex);
  bool own_subscribed TURNSTILE_GUARDED_BY(mutex) = false;
  // With an own channel: whether the shared channel's messages wake.
  bool heed_shared TURNSTILE_GUARDED_BY(mutex) = true;
  // The latest grant message's content not taken yet (direct handoff).
  std::optional<std::string> grant TURNSTILE_GUARDED_BY(mutex);
  // kNearMessage received: each sleeping waiter wakes once per increment
  // (Woken::by_pace), with no credit.
  std::uint64_t pace_epoch TURNSTILE_GUARDED_BY(mutex) = 0;

  // Whether the shared channel is wanted now: always without an own
  // channel; with one, only while the latest finished try heeds it (a
  // holder that may be foreign). A fleet of turnstile holders then gets
  // each release's "0" there delivered to none of its processes. A
  // semaphore's is always wanted: anyone may release permits.
  bool wants_shared_locked() const TURNSTILE_REQUIRES(mutex) {
    return hears_shared && (own_channel.empty() || heed_shared || rule == WakeRule::permit_count);
  }

  // Whether a shared-channel message wakes nobody here (only with an own
  // channel). A lock's: while the latest try found a turnstile holder (its
  // release woke a registered process). A semaphore's count
  // (WakeRule::permit_count): whenever a registry-waking script wrote it
  // (signed), from the queue's first try on: that release woke registered
  // processes on their own channels, and this process was one of them or
  // its try (which registers it) comes after the release and sees the
  // permits; an unsigned count (Redisson's release) always wakes. Heeding
  // the signed ones before the first try finished cost a second try
  // whenever the process's own release, told on the shared channel, came
  // in during its next acquisition's first try (issue #52: 3.46 script
  // calls per acquisition at 8 processes x 1 task, 3.02 at 8 x 16).
  bool ignores_shared_locked(const PubSubEvent& event) const TURNSTILE_REQUIRES(mutex) {
    if (own_channel.empty() || event.kind != PubSubEvent::Kind::message) return false;
    if (rule == WakeRule::permit_count) return event.payload.starts_with(kTurnstileCountSign);
    return !heed_shared;
  }

  bool all_subscribed_locked() const TURNSTILE_REQUIRES(mutex) {
    return (subscribed || !wants_shared_locked()) && (own_channel.empty() || own_subscribed);
  }

  // Adds a credit of `credit_epoch`, keeping them sorted. A waiter uses at
  // most one of the credits pending at once (its next try starts after
  // all of them, and it takes none while it owes one), so more than one
  // per waiter is useless: the oldest go, as newer ones are eligible for
  // a superset of waiters.
  void add_credit_locked(std::uint64_t credit_epoch, CreditFor target = CreditFor::anyone) TURNSTILE_REQUIRES(mutex) {
    TURNSTILE_CHECK_MSG(credit_epoch <= epoch, "a credit is for a message or a try already seen");
    const auto later = std::upper_bound(credits.begin(), credits.end(), credit_epoch,
                                        [](std::uint64_t value, const Credit& credit) { return value < credit.epoch; });
    credits.insert(later, Credit{.epoch = credit_epoch, .target = target});
    while (credits.size() > waiters.size()) credits.pop_front();
    TURNSTILE_CHECK(credits.empty() || credits.front().epoch <= credits.back().epoch);
  }

  static bool wakes(const Credit& credit, const WaiterState& waiter) {
    return credit.target == CreditFor::anyone || (credit.target == CreditFor::reader) == waiter.shared;
  }

  std::size_t readers() const TURNSTILE_REQUIRES(mutex) {
    return static_cast<std::size_t>(
        std::count_if(waiters.begin(), waiters.end(), [](const WaiterState* waiter) { return waiter->shared; }));
  }

  // A read-write lock's own-channel message (lua/lib/read_write_wake.lua):
  // the lock is free and "w" wakes one writer, "r" the readers (either:
  // anyone when none of that kind waits); it is in read mode and "s" wakes
  // the readers (nobody else could get in); anything else one waiter. The
  // readers: one, whose success wakes the others, as a reader's does.
  // Returns whether it was such a message (its credits added).
  bool add_read_write_credits_locked(const PubSubEvent& event) TURNSTILE_REQUIRES(mutex) {
    if (rule != WakeRule::read_write || event.kind != PubSubEvent::Kind::message) return false;
    const std::size_t waiting_readers = readers();
    if (event.payload == "w") {
      const bool writers = waiting_readers < waiters.size();
      if (!waiters.empty()) add_credit_locked(epoch, writers ? CreditFor::writer : CreditFor::anyone);
      return true;
    }
    if (event.payload != "r" && event.payload != "s") return false;
    // One reader first: if it gets in, it wakes the others
    // (wake_sharers_locked); if a writer got in first, one try is lost.
    if (waiting_readers > 0) {
      add_credit_locked(epoch, CreditFor::reader);
    } else if (event.payload == "r" && !waiters.empty()) {
      add_credit_locked(epoch, CreditFor::anyone);
    }
    return true;
  }

  // How many wake-ups `event` is worth, before the cap by waiters.
  std::size_t wakes_for(const PubSubEvent& event) const TURNSTILE_REQUIRES(mutex) {
    const std::size_t everyone = waiters.size();
    if (event.kind == PubSubEvent::Kind::resubscribed) return everyone;  // messages may be lost
    switch (rule) {
      case WakeRule::lock:
        return event.payload == "1" ? everyone : 1;
      case WakeRule::read_write:
        return 1;  // readers bring the others in (wake_sharers_locked)
      case WakeRule::permit_count: {
        std::string_view text = event.payload;
        if (text.starts_with(kTurnstileCountSign)) text.remove_prefix(1);
        std::int64_t count = 0;
        const char* end = text.data() + text.size();
        const auto [stop, error] = std::from_chars(text.data(), end, count);
        if (error != std::errc() || stop != end) return everyone;
        return count <= 0 ? 0 : static_cast<std::size_t>(std::min<std::uint64_t>(count, everyone));
      }
    }
    return everyone;
  }

  void on_event(const PubSubEvent& event, bool from_own_channel) {
    const MutexLock guard(mutex);
    if (!from_own_channel && ignores_shared_locked(event)) return;  // it woke a registered process
    if (event.kind == PubSubEvent::Kind::message && event.payload == kNearMessage) {
      ++pace_epoch;
      for (WaiterState* waiter : waiters) {
        if (waiter->sleeping) waiter->signal->notify();
      }
      return;
    }
    ++epoch;
    if (event.kind == PubSubEvent::Kind::message && event.payload.starts_with(kGrantMessagePrefix)) {
      const std::string_view granted = event.payload.substr(kGrantMessagePrefix.size());
      if (grant_for_waiter_locked(granted)) return;
      grant = std::string(granted);
    }
    if (!from_own_channel || !add_read_write_credits_locked(event)) {
      const std::size_t wakes = std::min(wakes_for(event), waiters.size());
      for (std::size_t i = 0; i < wakes; ++i) add_credit_locked(epoch);
    }
    dispatch_locked();
  }

  // A grant "<acquisition id>:<send instant>" for a waiter with a grant id
  // (WakeOptions::grant_id): kept for the waiter it names, which is woken
  // (no credit: nobody else may use it). Returns whether the queue's
  // waiters take grants by id (a grant naming none of them is dropped).
  bool grant_for_waiter_locked(std::string_view granted) TURNSTILE_REQUIRES(mutex) {
    const std::string_view id = granted.substr(0, granted.find(':'));
    bool by_id = false;
    for (WaiterState* waiter : waiters) {
      if (waiter->grant_id.empty()) continue;
      by_id = true;
      if (waiter->grant_id != id) continue;
      waiter->grant = std::string(granted);
      if (waiter->sleeping) waiter->signal->notify();
      return true;
    }
    return by_id;
  }

  // Hands each credit to the longest-registered eligible sleeper it may
  // wake; keeps it while such an eligible waiter is trying; drops it when
  // nobody is eligible.
  void dispatch_locked() TURNSTILE_REQUIRES(mutex) {
    for (auto credit = credits.begin(); credit != credits.end();) {
      WaiterState* chosen = nullptr;
      bool eligible = false;
      for (WaiterState* waiter : waiters) {
        if (!wakes(*credit, *waiter)) continue;
        if (waiter->tried_epoch >= credit->epoch) continue;  // it has seen that release
        eligible = true;
        if (waiter->sleeping && !waiter->owed) {
          chosen = waiter;
          break;
        }
      }
      if (chosen != nullptr) {
        TURNSTILE_CHECK(!chosen->handed && chosen->tried_epoch < credit->epoch);
        chosen->sleeping = false;
        chosen->handed = true;
        chosen->owed = credit->epoch;
        chosen->signal->notify();
        credit = credits.erase(credit);
      } else if (!eligible) {
        credit = credits.erase(credit);
      } else {
        ++credit;
      }
    }
    TURNSTILE_CHECK_MSG(credits.size() <= waiters.size(), "never more credits than waiters");
  }

  // After a shared waiter's try succeeded: the lock is in read mode, so
  // every sleeping shared waiter is handed a wake-up (outside the credits:
  // no message announced it). One that already has a wake-up keeps it.
  void wake_sharers_locked() TURNSTILE_REQUIRES(mutex) {
    for (WaiterState* waiter : waiters) {
      if (!waiter->shared || !waiter->sleeping || waiter->owed) continue;
      waiter->sleeping = false;
      waiter->handed = true;
      waiter->owed = epoch;
      waiter->signal->notify();
    }
  }

  // Installs a confirmed subscription unless one is in already; returns
  // the one not needed, to be dropped outside the lock.
  Subscription install(Subscription confirmed, bool own) {
    TURNSTILE_CHECK(confirmed.active());
    const MutexLock guard(mutex);
    bool& installed = own ? own_subscribed : subscribed;
    if (installed) return confirmed;
    (own ? own_subscription : subscription) = std::move(confirmed);
    installed = true;
    return {};
  }

  bool is_subscribed(bool own) {
    const MutexLock guard(mutex);
    return own ? own_subscribed : subscribed;
  }

  // The channels to subscribe now: the shared one while it is wanted
  // (wants_shared_locked), and the own one if any.
  std::vector<bool> channel_kinds() {
    if (own_channel.empty()) return {false};
    const MutexLock guard(mutex);
    return wants_shared_locked() ? std::vector<bool>{false, true} : std::vector<bool>{true};
  }
  const std::string& channel_of(bool own) const { return own ? own_channel : channel; }

  PubSubHandler handler(bool own) {
    // The queue outlives its subscriptions: the last waiter drops them.
    return [this, own](const PubSubEvent& event) { on_event(event, own); };
  }
};

WakeupHub::~WakeupHub() {
  const MutexLock guard(mutex_);
  TURNSTILE_CHECK_MSG(queues_.empty(), "every Waiter must leave before its hub goes");
}

std::optional<WakeupHub::LeaveTicket> WakeupHub::begin_leave_if_last(std::string_view channel) {
  const MutexLock guard(mutex_);
  if (const auto found = queues_.find(channel); found != queues_.end()) {
    const MutexLock queue_guard(found->second->mutex);
    if (std::any_of(found->second->waiters.begin(), found->second->waiters.end(),
                    [](const WaiterState* waiter) { return waiter->may_wait; })) {
      return std::nullopt;
    }
  }
  if (const auto skipped = skipped_leaves_.find(channel); skipped != skipped_leaves_.end())
    skipped_leaves_.erase(skipped);
  int& tickets = leaving_[std::string(channel)];
  TURNSTILE_CHECK(tickets >= 0 && tickets < std::numeric_limits<int>::max());
  ++tickets;
  return LeaveTicket(*this, std::string(channel));
}

void WakeupHub::note_skipped_leave(std::string_view channel) {
  const MutexLock guard(mutex_);
  if (skipped_leaves_.find(channel) == skipped_leaves_.end()) skipped_leaves_.emplace(channel);
}

bool WakeupHub::take_skipped_leave(std::string_view channel) {
  const MutexLock guard(mutex_);
  const auto found = skipped_leaves_.find(channel);
  if (found == skipped_leaves_.end()) return false;
  skipped_leaves_.erase(found);
  return true;
}

bool WakeupHub::leave_in_flight(std::string_view channel) const {
  const MutexLock guard(mutex_);
  return leaving_.find(channel) != leaving_.end();
}

WakeupHub::LeaveTicket::~LeaveTicket() {
  if (hub_ == nullptr) return;
  const MutexLock guard(hub_->mutex_);
  const auto found = hub_->leaving_.find(channel_);
  TURNSTILE_CHECK_MSG(found != hub_->leaving_.end() && found->second > 0, "a live ticket is counted");
  if (--found->second == 0) hub_->leaving_.erase(found);
}

std::size_t WakeupHub::waiting_on(std::string_view channel) const {
  std::shared_ptr<Queue> queue;
  {
    const MutexLock guard(mutex_);
    const auto found = queues_.find(channel);
    if (found == queues_.end()) return 0;
    queue = found->second;
  }
  const MutexLock queue_guard(queue->mutex);
  return static_cast<std::size_t>(std::count_if(queue->waiters.begin(), queue->waiters.end(),
                                                [](const WaiterState* waiter) { return waiter->may_wait; }));
}

std::shared_ptr<WakeupHub::Queue> WakeupHub::find_queue(std::string_view channel) const {
  const MutexLock guard(mutex_);
  const auto found = queues_.find(channel);
  return found == queues_.end() ? nullptr : found->second;
}

void WakeupHub::wake_all(std::string_view channel) {
  const std::shared_ptr<Queue> queue = find_queue(channel);
  if (!queue) return;
  // The resubscription's own rule: every waiter gets a credit.
  PubSubEvent resubscribed;
  resubscribed.kind = PubSubEvent::Kind::resubscribed;
  queue->on_event(resubscribed, /*from_own_channel=*/false);
}

void WakeupHub::wake_one_unless_waking(std::string_view channel) {
  const std::shared_ptr<Queue> queue = find_queue(channel);
  if (!queue) return;
  {
    const MutexLock guard(queue->mutex);
    if (!queue->credits.empty()) return;
    for (const WaiterState* waiter : queue->waiters) {
      if (waiter->handed || waiter->owed) return;
    }
  }
  // As a message on the own channel waking one waiter.
  PubSubEvent one;
  one.kind = PubSubEvent::Kind::message;
  one.payload = "1";
  queue->on_event(one, /*from_own_channel=*/true);
}

std::optional<std::string> WakeupHub::take_grant(std::string_view channel) {
  const std::shared_ptr<Queue> queue = find_queue(channel);
  if (!queue) return std::nullopt;
  const MutexLock queue_guard(queue->mutex);
  return std::exchange(queue->grant, std::nullopt);
}

std::optional<std::string> WakeupHub::take_grant_for(std::string_view channel, std::string_view grant_id) {
  TURNSTILE_CHECK(!grant_id.empty());
  const std::shared_ptr<Queue> queue = find_queue(channel);
  if (!queue) return std::nullopt;
  const MutexLock queue_guard(queue->mutex);
  for (WaiterState* waiter : queue->waiters) {
    if (waiter->grant_id == grant_id) return std::exchange(waiter->grant, std::nullopt);
  }
  return std::nullopt;
}

WakeupHub::Waiter WakeupHub::join(std::string_view channel, WakeOptions options, Admission admission) {
  auto state = std::make_unique<WaiterState>();
  state->grant_id = std::move(options.grant_id);
  state->pass_on_failure = options.pass_on_failure;
  state->shared = options.shared;
  state->may_wait = admission == Admission::bounded;
  TURNSTILE_CHECK_MSG(!options.shared || options.rule == WakeRule::read_write,
                      "only a read-write lock's waiters share");
  const MutexLock guard(mutex_);
  if (admission == Admission::bounded && waiters_ >= max_waiters_) {
    throw TooManyWaitersError("refused to wait on " + std::string(channel) + ": " + std::to_string(waiters_) +
                              " acquisitions of this client wait already (ClientOptions::max_waiting)");
  }
  auto found = queues_.find(channel);
  if (found == queues_.end()) {
    found = queues_.emplace(std::string(channel), std::make_shared<Queue>(std::string(channel), options)).first;
  }
  std::shared_ptr<Queue> queue = found->second;
  TURNSTILE_CHECK_MSG(queue->rule == options.rule, "every waiter of a channel reads its messages alike");
  TURNSTILE_CHECK_MSG(queue->own_channel == options.own_channel, "every waiter of a channel has the same own channel");
  TURNSTILE_CHECK_MSG(queue->hears_shared == (options.own_channel.empty() || options.subscribe_shared),
                      "every waiter of a channel hears the shared one alike");
  {
    const MutexLock queue_guard(queue->mutex);
    state->tried_epoch = queue->epoch;
    state->paced_epoch = queue->pace_epoch;
    queue->waiters.push_back(state.get());
  }
  ++waiters_;
  return Waiter(*this, std::move(queue), std::move(state));
}

void WakeupHub::leave(const std::shared_ptr<Queue>& queue, WaiterState& state) {
  Subscription dropped;  // unsubscribed after both locks are released
  Subscription own_dropped;
  const MutexLock guard(mutex_);
  const MutexLock queue_guard(queue->mutex);
  const auto position = std::find(queue->waiters.begin(), queue->waiters.end(), &state);
  TURNSTILE_CHECK_MSG(position != queue->waiters.end(), "a waiter leaves its queue once");
  queue->waiters.erase(position);
  TURNSTILE_CHECK(waiters_ > 0);
  --waiters_;
  // A wake-up taken and not used goes on: the release it announced may
  // still be there to take.
  if (state.owed) queue->add_credit_locked(*state.owed);
  while (queue->credits.size() > queue->waiters.size()) queue->credits.pop_front();
  queue->dispatch_locked();
  if (!queue->waiters.empty()) return;
  TURNSTILE_CHECK(queue->credits.empty());
  const auto found = queues_.find(queue->channel);
  TURNSTILE_CHECK(found != queues_.end() && found->second == queue);
  queues_.erase(found);
  dropped = std::move(queue->subscription);
  queue->subscribed = false;
  // A process with no waiter must not be picked by a release: its last
  // waiter's script forgot the registration (a success, or a give-up:
  // LockEngine::abandon), and once the channel is unsubscribed (it may
  // linger a while) a PUBLISH there reaches nobody and the next is woken.
  own_dropped = std::move(queue->own_subscription);
  queue->own_subscribed = false;
}

WakeupHub::Waiter::Waiter(WakeupHub& hub, std::shared_ptr<Queue> queue, std::unique_ptr<WaiterState> state)
    : hub_(&hub), queue_(std::move(queue)), state_(std::move(state)) {}

WakeupHub::Waiter::Waiter(Waiter&& other) noexcept
    : hub_(other.hub_), queue_(std::move(other.queue_)), state_(std::move(other.state_)) {}

WakeupHub::Waiter::~Waiter() {
  if (state_ != nullptr) hub_->leave(queue_, *state_);
}

bool WakeupHub::Waiter::subscribed() const {
  const MutexLock guard(queue_->mutex);
  return queue_->all_subscribed_locked();
}

bool WakeupHub::Waiter::subscribe_if_confirmed() {
  for (const bool own : queue_->channel_kinds()) {
    if (queue_->is_subscribed(own)) continue;
    Subscription confirmed = hub_->backend_.subscribe_if_confirmed(queue_->channel_of(own), queue_->handler(own));
    if (!confirmed.active()) return false;
    Subscription spare = queue_->install(std::move(confirmed), own);
  }
  return true;
}

void WakeupHub::Waiter::subscribe(Instant deadline) {
  for (const bool own : queue_->channel_kinds()) {
    if (queue_->is_subscribed(own)) continue;
    SubscribeOptions bound;
    if (deadline != kNoDeadline) bound.confirm_within = std::max(deadline - hub_->runtime_.now(), Duration::zero());
    // Two waiters may get here at once: both subscribe, one is kept. Until
    // the spare is dropped a message counts twice, which only wakes more.
    Subscription spare =
        queue_->install(hub_->backend_.subscribe_within(queue_->channel_of(own), queue_->handler(own), bound), own);
  }
}

void WakeupHub::Waiter::begin_try() {
  const MutexLock guard(queue_->mutex);
  TURNSTILE_CHECK(!state_->sleeping && !state_->handed);
  TURNSTILE_CHECK(state_->tried_epoch <= queue_->epoch);
  state_->tried_epoch = queue_->epoch;
  state_->paced_epoch = queue_->pace_epoch;
}

void WakeupHub::Waiter::finish_try(bool acquired, SharedChannel shared) {
  Subscription unheeded;  // dropped after the lock is released
  const MutexLock guard(queue_->mutex);
  TURNSTILE_CHECK(!state_->sleeping && !state_->handed);
  queue_->heed_shared = queue_->own_channel.empty() || shared == SharedChannel::heeded;
  if (!queue_->wants_shared_locked() && queue_->subscribed) {
    // A turnstile holder: its release wakes a registered process on its
    // own channel. The shared channel goes (it lingers in the backend a
    // while, so heeding it again soon costs no round trip).
    unheeded = std::move(queue_->subscription);
    queue_->subscribed = false;
  }
  const std::optional<std::uint64_t> owed = std::exchange(state_->owed, std::nullopt);
  if (acquired && state_->shared) queue_->wake_sharers_locked();
  if (!owed || acquired || !state_->pass_on_failure) return;
  // What this try saw was not enough for it; it may be for another. Only
  // waiters that have not tried since this try began are eligible.
  queue_->add_credit_locked(state_->tried_epoch);
  queue_->dispatch_locked();
}

Task<WakeupHub::Woken> WakeupHub::Waiter::sleep(WaitStyle style, Instant until, std::stop_token stop) {
  {
    const MutexLock guard(queue_->mutex);
    TURNSTILE_CHECK(!state_->sleeping && !state_->handed);
    // Made at the first sleep (an acquisition whose first try wins never
    // needs it), before `sleeping` is set: only a sleeper is notified.
    if (state_->signal == nullptr) state_->signal = std::make_unique<AsyncSignal>(hub_->runtime_);
    state_->sleeping = true;
    queue_->dispatch_locked();  // a credit kept for it while it was trying
  }
  // Each pass either returns or waits; a wait ends by a credit, a stop, the
  // time, or a signal left over from a credit handed as a wait timed out
  // (at most one such pass per credit).
  for (;;) {
    if (const std::optional<Woken> woken = woken_now(until, stop)) co_return *woken;
    Task<void> waiting = state_->signal->wait(style, until, stop);
    co_await std::move(waiting);
  }
}

std::optional<WakeupHub::Woken> WakeupHub::Waiter::woken_now(Instant until, const std::stop_token& stop) {
  const MutexLock guard(queue_->mutex);
  if (std::exchange(state_->handed, false)) {
    TURNSTILE_CHECK_MSG(!state_->sleeping && state_->owed, "a handed credit is owed until a try uses it");
    return Woken::by_message;
  }
  if (state_->grant) {  // granted: its next try takes it (LockEngine::take_grant)
    state_->sleeping = false;
    return Woken::by_message;
  }
  if (state_->paced_epoch != queue_->pace_epoch) {
    state_->paced_epoch = queue_->pace_epoch;
    state_->sleeping = false;
    return Woken::by_pace;
  }
  if (stop.stop_requested() || hub_->runtime_.now() >= until) {
    state_->sleeping = false;
    return stop.stop_requested() ? Woken::by_stop : Woken::by_timer;
  }
  return std::nullopt;
}

}  // namespace turnstile::detail
