#include "sim/fake_backend.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "core/check.h"
#include "turnstile/runtime.h"
#include "turnstile/errors.h"
#include "turnstile/script_call.h"

namespace turnstile::sim {
namespace {

// BUGGIFY pubsub.reconnect_mid_wait: the connection drops this long after
// the subscription (the waiter's try and sleep), and is back this long
// after that.
constexpr Duration kBuggifyDropAfter = std::chrono::milliseconds(20);
constexpr Duration kBuggifyReconnectAfter = std::chrono::milliseconds(500);
// A server kept busy by slow scripts back to back: waited out this many
// times at most per command.
constexpr int kMaxBusyWaits = 1'000;

// A send_eval() call running as a task of its own: its outcome, shared by
// the task and the pending reply.
struct SentCall {
  explicit SentCall(std::unique_ptr<Event> event) : completed(std::move(event)) {}
  bool done() const { return reply.has_value() || error != nullptr; }

  std::unique_ptr<Event> completed;  // notified once, when done
  std::optional<SyncedReply> reply;
  std::exception_ptr error;
};

class SentReply final : public PendingReply {
 public:
  SentReply(Scheduler& scheduler, std::shared_ptr<SentCall> call, std::string backend)
      : scheduler_(scheduler), call_(std::move(call)), backend_(std::move(backend)) {}

  bool wait_for(std::chrono::nanoseconds timeout) override {
    if (call_->done() || timeout <= Duration::zero()) return call_->done();
    const Instant now = scheduler_.now();
    const Instant deadline = timeout >= kNoDeadline - now ? kNoDeadline : now + timeout;
    (void)call_->completed->wait_until(deadline);
    return call_->done();
  }

  SyncedReply get() override {
    TURNSTILE_CHECK_MSG(!taken_, "get() is called once");
    taken_ = true;
    // The call ends within its own bounds (delays, the command timeout).
    // Its task and this one belong to one client, so a wait that ends
    // without it means this task is unwinding after a crash.
    if (!call_->done() && !call_->completed->wait_until(kNoDeadline)) {
      throw ConnectionError(backend_ + ": no reply (simulated client crash)");
    }
    TURNSTILE_CHECK(call_->done());
    if (call_->error != nullptr) std::rethrow_exception(call_->error);
    return std::move(*call_->reply);
  }

 private:
  Scheduler& scheduler_;
  const std::shared_ptr<SentCall> call_;
  const std::string backend_;  // describe(), for errors
  bool taken_ = false;
};

}  // namespace

struct RestartHandlers {
  Mutex mutex;  // held while handlers run
  std::map<std::uint64_t, ServerRestartHandler> handlers TURNSTILE_GUARDED_BY(mutex);
  std::uint64_t next_id TURNSTILE_GUARDED_BY(mutex) = 0;
};

std::shared_ptr<RestartHandlers> FakeBackend::make_restart_handlers() { return std::make_shared<RestartHandlers>(); }

FakeBackend::FakeBackend(Server& server, std::string server_name, Scheduler& scheduler, ClientId client,
                         Options options)
    : server_(&server),
      name_(std::move(server_name)),
      scheduler_(&scheduler),
      client_(client),
      options_(options),
      self_(std::make_shared<FakeBackend*>(this)) {
  command_session_ = server_->connect();
  reconnect_pubsub();
}

FakeBackend::FakeBackend(StandaloneServer& server, std::string server_name)
    : server_(&server.server()),
      name_(std::move(server_name)),
      mutex_(&server.mutex()),
      self_(std::make_shared<FakeBackend*>(this)) {
  const auto lock = guard();
  command_session_ = server_->connect();
  reconnect_pubsub();
}

FakeBackend::~FakeBackend() {
  const auto lock = guard();
  TURNSTILE_CHECK_MSG(subscriptions_.empty(), "a FakeBackend must outlive its subscriptions");
  self_.reset();  // pending deliveries become no-ops
  pubsub_session_.reset();
  command_session_.reset();
}

std::unique_lock<Mutex> FakeBackend::guard() const {
  return mutex_ != nullptr ? std::unique_lock(*mutex_) : std::unique_lock<Mutex>();
}

std::string FakeBackend::describe() const { return "sim:" + name_; }

void FakeBackend::check_up() const {
  if (killed_) throw ConnectionError(describe() + ": connection closed (simulated client crash)");
  if (is_down()) throw ConnectionError(describe() + ": connection down (simulated fault)");
}

void FakeBackend::time_out_if_hanging(Instant started, const char* what, std::optional<Duration> callers_bound) {
  if (!hanging_ || is_down() || killed_) return;  // a broken link refuses at once
  TURNSTILE_CHECK_MSG(scheduler_ != nullptr, "hanging partitions need a world");
  if (callers_bound && *callers_bound < options_.command_timeout) {
    wait_for(started + *callers_bound - scheduler_->now());
    throw TimeoutError(describe() + ": no reply by the caller's deadline (simulated hanging partition: " + what +
                       " lost)");
  }
  wait_for(started + options_.command_timeout - scheduler_->now());
  throw TimeoutError(describe() + ": no reply within the command timeout (simulated hanging partition: " + what +
                     " lost)");
}

void FakeBackend::wait_for(Duration duration) {
  if (duration <= Duration::zero()) return;
  TURNSTILE_CHECK_MSG(scheduler_ != nullptr, "delays need a world");
  const std::weak_ptr<FakeBackend*> alive = self_;
  scheduler_->sleep_until(scheduler_->now() + duration);
  if (alive.expired()) throw ConnectionError("sim: connection closed with a call in flight (link destroyed)");
}

Reply FakeBackend::send(const std::vector<std::string>& argv) {
  const Instant started = scheduler_ != nullptr ? scheduler_->now() : Instant{};
  const RequestFate fate = request_filter_ ? request_filter_(argv) : RequestFate{};
  wait_for(options_.request_delay + fate.extra_request_delay);
  time_out_if_hanging(started, "request");
  // A new connection's handshake finds a restarted server before the
  // command runs there.
  tell_restart_if_unseen();
  wait_for_server_turn();
  Reply reply;
  Instant completed{};
  {
    const auto lock = guard();
    check_up();
    if (!fate.drop_request) {
      const std::uint64_t writes_before = server_->write_count();
      reply = server_->execute(*command_session_, argv);
      if (fate.duplicate_request) (void)server_->execute(*command_session_, argv);
      completed = server_->completed_at();
      if (server_->write_count() != writes_before && scheduler_ != nullptr) last_write_at_ = scheduler_->now();
    }
  }
  const bool dropped_after_apply =
      !fate.drop_request && scheduler_ != nullptr && buggify("fake.reply_dropped_after_apply");
  if (fate.drop_request || fate.drop_reply || dropped_after_apply) {
    wait_for(options_.command_timeout);
    throw TimeoutError(describe() + ": no reply within the command timeout (simulated " +
                       (fate.drop_request ? "lost request)" : "lost reply)"));
  }
  // The reply leaves when the server is done with the command.
  const Duration service =
      scheduler_ != nullptr ? std::max(completed - scheduler_->now(), Duration::zero()) : Duration{};
  wait_for(service + options_.reply_delay + fate.extra_reply_delay);
  // The link may have broken or frozen while the reply was on its way: the
  // command ran, the caller does not know.
  time_out_if_hanging(started, "reply");
  const auto lock = guard();
  check_up();
  if (stale_reply_) {
    Reply stale = std::move(*stale_reply_);
    stale_reply_.reset();
    if (fate.duplicate_reply) stale_reply_ = reply;
    return stale;
  }
  if (fate.duplicate_reply) stale_reply_ = reply;
  return reply;
}

namespace {

// A reply's kind for a call span: its type, an error's first word too.
std::string outcome_of(const Reply& reply) {
  if (!reply.is_error()) return std::string(to_string(reply.type()));
  const std::string& message = reply.as_string();
  return "error " + message.substr(0, message.find(' '));
}

}  // namespace

Reply FakeBackend::observed(CallSpan span, const std::function<Reply()>& call) {
  if (call_listener_ == nullptr || !*call_listener_ || scheduler_ == nullptr) return call();
  // Copies: the link may be destroyed while the call sleeps.
  const World::CallListener listener = *call_listener_;
  Scheduler* const scheduler = scheduler_;
  span.client = client_;
  span.server = server_index_;
  span.sent = scheduler->now();
  auto tell = [&](std::string outcome) {
    span.finished = scheduler->now();
    span.outcome = std::move(outcome);
    listener(span);
  };
  try {
    Reply reply = call();
    tell(outcome_of(reply));
    return reply;
  } catch (const TimeoutError&) {
    tell("timeout");
    throw;
  } catch (const ConnectionError&) {
    tell("connection error");
    throw;
  } catch (const ServerError& error) {
    const std::string message = error.what();
    tell("error " + message.substr(0, message.find(' ')));
    throw;
  } catch (const Error&) {
    tell("failed");
    throw;
  }
}

Reply FakeBackend::eval(const Script& script, const std::vector<std::string>& keys,
                        const std::vector<std::string>& args) {
  if (call_listener_ == nullptr || !*call_listener_) return eval_unobserved(script, keys, args);
  return observed(CallSpan{.name = std::string(script.name), .script = true, .keys = keys},
                  [&] { return eval_unobserved(script, keys, args); });
}

Reply FakeBackend::eval_unobserved(const Script& script, const std::vector<std::string>& keys,
                                   const std::vector<std::string>& args) {
  return eval_with_reload(
      script, keys, args, [this](const std::vector<std::string>& argv) { return send(argv); },
      [this](const Script& loaded) {
        script_loads_.loaded(std::to_string(reinterpret_cast<std::uintptr_t>(server_)), loaded);
      });
}

BackendCounters FakeBackend::counters() const {
  const auto lock = guard();
  return {.reconnects = reconnects_.load(std::memory_order_relaxed),
          .script_reloads = script_loads_.reloads(),
          .server_restarts = restarts_told_};
}

SyncedReply FakeBackend::eval_synced(const Script& script, const std::vector<std::string>& keys,
                                     const std::vector<std::string>& args) {
  const bool replicas = options_.replica_sync_timeout && replica_lag_;
  const bool aof = options_.aof_sync_timeout.has_value();
  if (scheduler_ == nullptr || (!replicas && !aof)) return SyncedReply{eval(script, keys, args), ReplicaAck{}};
  if (aof) {
    // Before the script, as the real backend asks INFO: no grant is made
    // on a server that cannot fsync it.
    const auto lock = guard();
    if (!server_->aof_fsync_wait()) {
      throw UnsafeServerError(
          "sim: aof_sync (durable grants) needs a server with an append-only file; it runs with persistence none");
    }
  }
  const std::uint64_t generation = server_generation_;
  Reply reply = eval(script, keys, args);
  // The script's writes were made now: fsynced this long after.
  const Instant written_at = scheduler_->now();
  std::optional<Duration> fsync_wait;
  if (aof) {
    const auto lock = guard();
    fsync_wait = server_->aof_fsync_wait();
  }
  // Waits (in virtual time) until `done`, at most `timeout`, as the
  // pipelined WAIT or WAITAOF; whether `done` came in time on this server.
  const auto sync_wait = [&](Instant done, Duration timeout, const char* reply_name) {
    const Instant now = scheduler_->now();
    const Instant give_up = now + std::max(timeout, Duration::zero());
    wait_for(std::min(done, give_up) - now);
    time_out_if_hanging(now, reply_name);
    {
      const auto lock = guard();
      check_up();  // the link broke during the wait: the caller does not know
    }
    return done <= give_up && generation == server_generation_;
  };
  ReplicaAck ack;
  if (replicas) {
    const Duration lag = replica_lag_.value_or(Duration::zero());
    const Instant applied = last_write_at_ ? *last_write_at_ + lag : scheduler_->now();
    ack.replicas = 1;
    ack.acknowledged = sync_wait(applied, *options_.replica_sync_timeout, "WAIT reply") ? 1 : 0;  // WAIT 1 <timeout>
  }
  if (aof) {
    // A server without persistence now (changed during the call) never fsyncs.
    const Instant fsynced = fsync_wait ? written_at + *fsync_wait : Instant::max();
    ack.aof_asked = true;
    ack.aof_synced = sync_wait(fsynced, *options_.aof_sync_timeout, "WAITAOF reply");  // WAITAOF 1 0 <timeout>
  }
  return SyncedReply{std::move(reply), ack};
}

std::unique_ptr<PendingReply> FakeBackend::send_eval(const Script& script, const std::vector<std::string>& keys,
                                                     const std::vector<std::string>& args, EvalSync sync) {
  if (scheduler_ == nullptr) return Backend::send_eval(script, keys, args, sync);
  auto call = std::make_shared<SentCall>(scheduler_->make_event());
  const std::weak_ptr<FakeBackend*> weak_self = self_;
  const TaskId task = scheduler_->spawn(client_, [weak_self, call, script, keys, args, sync] {
    try {
      // Not held across the call: the backend may die while the call sleeps,
      // which its wait_for() notices by this weak reference expiring.
      FakeBackend* backend = nullptr;
      if (const std::shared_ptr<FakeBackend*> self = weak_self.lock()) backend = *self;
      if (backend == nullptr) throw ConnectionError("sim: connection closed before the call was sent (link destroyed)");
      call->reply = sync == EvalSync::replicas ? backend->eval_synced(script, keys, args)
                                               : SyncedReply{backend->eval(script, keys, args), ReplicaAck{}};
    } catch (const std::exception&) {
      // Only failures of the call; a crash (TaskKilled) unwinds the task.
      call->error = std::current_exception();
    }
    call->completed->notify();
  });
  if (task == 0) {
    // The client crashed: nothing is sent.
    call->error = std::make_exception_ptr(ConnectionError(describe() + ": not sent (simulated client crash)"));
  }
  return std::make_unique<SentReply>(*scheduler_, std::move(call), describe());
}

Reply FakeBackend::command(const std::vector<std::string>& argv) {
  if (call_listener_ == nullptr || !*call_listener_ || argv.empty()) return raise_if_error(send(argv));
  return observed(CallSpan{.name = argv.front()}, [&] { return raise_if_error(send(argv)); });
}

Subscription FakeBackend::subscribe(std::string_view channel, PubSubHandler handler) {
  return subscribe_within(channel, std::move(handler), SubscribeOptions{});
}

Subscription FakeBackend::subscribe_within(std::string_view channel, PubSubHandler handler,
                                           const SubscribeOptions& options) {
  TURNSTILE_CHECK(handler);
  // Nothing is registered before the confirmation: a caller that stops
  // waiting for it leaves nothing behind.
  if (scheduler_ != nullptr) time_out_if_hanging(scheduler_->now(), "SUBSCRIBE confirmation", options.confirm_within);
  const auto lock = guard();
  check_up();
  expire_lingering_locked(false);
  if (const auto kept = lingering_.find(channel); kept != lingering_.end()) lingering_.erase(kept);  // in use again
  auto [entry, created] = channels_.try_emplace(std::string(channel));
  if (created) {
    try {
      raise_if_error(server_->execute(*pubsub_session_, {subscribe_command(true), entry->first}));
    } catch (...) {
      channels_.erase(entry);
      throw;
    }
  }
  Subscription added = add_handler_locked(entry, std::move(handler));
  if (scheduler_ != nullptr && !pubsub_gap_ && buggify("pubsub.reconnect_mid_wait")) drop_pubsub_soon();
  return added;
}

Subscription FakeBackend::add_handler_locked(
    std::map<std::string, std::set<std::uint64_t>, std::less<>>::iterator entry, PubSubHandler handler) {
  if (subscriptions_.size() >= kMaxSubscriptions) {
    throw SimulationError("the fake Redis holds at most " + std::to_string(kMaxSubscriptions) +
                          " subscriptions (a handler that subscribes without end?)");
  }
  const std::uint64_t id = next_subscription_id_++;
  entry->second.insert(id);
  subscriptions_.emplace(id, Handler{entry->first, std::move(handler)});
  return Subscription(this, id);
}

bool FakeBackend::may_linger_locked() const {
  return scheduler_ != nullptr && !is_down() && !killed_ && !hanging_ && !pubsub_gap_;
}

Subscription FakeBackend::subscribe_if_confirmed(std::string_view channel, const PubSubHandler& handler) {
  TURNSTILE_CHECK(handler);
  const auto lock = guard();
  if (!may_linger_locked()) return {};
  expire_lingering_locked(false);
  const auto entry = channels_.find(channel);
  if (entry == channels_.end()) return {};
  if (const auto kept = lingering_.find(channel); kept != lingering_.end()) lingering_.erase(kept);
  return add_handler_locked(entry, handler);
}

void FakeBackend::expire_lingering_locked(bool all) {
  for (auto it = lingering_.begin(); it != lingering_.end();) {
    if (!all && it->second > scheduler_->now()) {
      ++it;
      continue;
    }
    const auto entry = channels_.find(it->first);
    TURNSTILE_CHECK(entry != channels_.end() && entry->second.empty());
    const std::string channel = it->first;
    channels_.erase(entry);
    it = lingering_.erase(it);
    // A down or crashed link has no server-side subscription left to drop.
    if (is_down() || killed_ || all) continue;
    (void)server_->execute(*pubsub_session_, {subscribe_command(false), channel});
  }
}

void FakeBackend::drop_pubsub_soon() {
  const std::weak_ptr<FakeBackend*> weak_self = self_;
  pubsub_gap_ = true;
  const Instant dropped = scheduler_->now() + kBuggifyDropAfter;
  scheduler_->schedule_at(
      client_, dropped,
      [weak_self] {
        const std::shared_ptr<FakeBackend*> self = weak_self.lock();
        if (!self) return;
        FakeBackend& backend = **self;
        if (backend.killed_ || backend.is_down()) return;  // already without a connection
        // The old connection is gone (its subscriptions with it): what is
        // published meanwhile reaches nobody.
        backend.pubsub_session_.reset();
        backend.pubsub_session_ = backend.server_->connect();
      },
      Scheduler::RunAs::inline_action);
  scheduler_->schedule_at(
      client_, dropped + kBuggifyReconnectAfter,
      [weak_self] {
        const std::shared_ptr<FakeBackend*> self = weak_self.lock();
        if (!self) return;
        FakeBackend& backend = **self;
        backend.pubsub_gap_ = false;
        // A down or crashed link reconnects (or not) on its own schedule.
        if (backend.killed_ || backend.is_down()) return;
        backend.reconnects_.fetch_add(1, std::memory_order_relaxed);
        backend.resubscribe_and_notify();
      },
      Scheduler::RunAs::inline_action);
}

void FakeBackend::wait_for_server_turn() {
  if (scheduler_ == nullptr) return;
  // Woken at the end of the work ahead, a command may find more let in
  // meanwhile (at the same instant, before it): it waits again.
  for (int round = 0; round < kMaxBusyWaits && server_->answers_at() > scheduler_->now(); ++round) {
    wait_for(server_->answers_at() - scheduler_->now());
  }
}

const char* FakeBackend::subscribe_command(bool subscribe) const {
  if (options_.sharded_pubsub) return subscribe ? "SSUBSCRIBE" : "SUNSUBSCRIBE";
  return subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE";
}

ChannelScope FakeBackend::channel_scope() const {
  return options_.sharded_pubsub ? ChannelScope::shard : ChannelScope::classic;
}

void FakeBackend::unsubscribe(std::uint64_t id) noexcept {
  const auto lock = guard();
  const auto found = subscriptions_.find(id);
  if (found == subscriptions_.end()) return;
  const auto entry = channels_.find(found->second.channel);
  subscriptions_.erase(found);
  TURNSTILE_CHECK(entry != channels_.end());
  entry->second.erase(id);
  if (!entry->second.empty()) return;
  if (may_linger_locked() && lingering_.size() < kMaxLingeringChannels) {
    // Kept subscribed a while (subscribe_if_confirmed), then dropped at
    // that instant, as the real subscriber's reader wakes up for it.
    const Instant until = scheduler_->now() + std::chrono::milliseconds(kChannelLingerMs);
    lingering_.insert_or_assign(entry->first, until);
    const std::weak_ptr<FakeBackend*> weak_self = self_;
    scheduler_->schedule_at(
        client_, until,
        [weak_self] {
          const std::shared_ptr<FakeBackend*> self = weak_self.lock();
          if (!self) return;
          const auto relock = (**self).guard();
          (**self).expire_lingering_locked(false);
        },
        Scheduler::RunAs::inline_action);
    return;
  }
  const std::string channel = entry->first;
  channels_.erase(entry);
  // A down or crashed link has no server-side subscription left to drop.
  if (is_down() || killed_) return;
  try {
    // Refused BUSY, the server-side subscription stays until the
    // connection's end; its messages find no handler.
    (void)server_->execute(*pubsub_session_, {subscribe_command(false), channel});
  } catch (...) {
    TURNSTILE_UNREACHABLE("the fake server's UNSUBSCRIBE does not throw");
  }
}

void FakeBackend::reconnect_pubsub() {
  // A new connection: the old one's server-side subscriptions die with it,
  // and the lingering channels just go.
  expire_lingering_locked(true);
  pubsub_session_ =
      server_->connect([this](std::string_view channel, std::string_view payload) { on_published(channel, payload); });
  for (const auto& [channel, ids] : channels_) {
    const Reply reply = server_->execute(*pubsub_session_, {subscribe_command(true), channel});
    // Refused BUSY: the real subscriber retries until it goes through; the
    // fake takes it as through.
    if (reply.is_error()) server_->subscribe(*pubsub_session_, channel, channel_scope());
  }
}

void FakeBackend::resubscribe_and_notify() {
  reconnect_pubsub();
  if (scheduler_ == nullptr) {
    dispatch(PubSubEvent::Kind::resubscribed, {}, {});
  } else {
    deliver_later(options_.pubsub_delay, PubSubEvent::Kind::resubscribed, {}, {});
  }
}

void FakeBackend::on_published(std::string_view channel, std::string_view payload) {
  // Called by the server inside a PUBLISH, with the server's mutex held
  // outside a world.
  if (is_down() || killed_ || hanging_) {
    ++messages_dropped_;
    return;
  }
  const MessageFate fate = message_filter_ ? message_filter_(channel, payload) : MessageFate{};
  TURNSTILE_CHECK(fate.copies >= 1 && fate.copies <= kMaxMessageCopies);
  if (fate.drop) {
    ++messages_dropped_;
    return;
  }
  // Out once the server finished the work before the PUBLISH (its cost so far).
  const Duration service =
      scheduler_ != nullptr ? std::max(server_->busy_until() - scheduler_->now(), Duration::zero()) : Duration{};
  for (int copy = 0; copy < fate.copies; ++copy) {
    if (scheduler_ == nullptr) {
      dispatch(PubSubEvent::Kind::message, std::string(channel), std::string(payload));
    } else {
      deliver_later(service + options_.pubsub_delay + fate.extra_delay, PubSubEvent::Kind::message,
                    std::string(channel), std::string(payload));
    }
  }
}

void FakeBackend::deliver_later(Duration delay, PubSubEvent::Kind kind, std::string channel, std::string payload) {
  TURNSTILE_CHECK(scheduler_ != nullptr);
  // Past the bound a message is dropped, as Redis disconnects a subscriber
  // past its pub/sub output buffer limit: the waiters' retries cover it.
  if (pending_deliveries_ >= kMaxPendingDeliveries) return;
  ++pending_deliveries_;
  const std::weak_ptr<FakeBackend*> weak_self = self_;
  scheduler_->schedule_at(
      client_, scheduler_->now() + std::max(delay, Duration::zero()),
      [weak_self, kind, channel = std::move(channel), payload = std::move(payload)] {
        const std::shared_ptr<FakeBackend*> self = weak_self.lock();
        if (!self) return;
        FakeBackend& backend = **self;
        --backend.pending_deliveries_;
        if (backend.is_down() || backend.killed_ || backend.hanging_) {
          ++backend.messages_dropped_;
          return;
        }
        backend.dispatch(kind, channel, payload);
      },
      Scheduler::RunAs::inline_action);
}

void FakeBackend::dispatch(PubSubEvent::Kind kind, const std::string& channel, const std::string& payload) {
  // Collect first: a handler may drop its own subscription (never another
  // backend call), and ids are visited in subscription order.
  std::vector<std::uint64_t> ids;
  if (kind == PubSubEvent::Kind::message) {
    const auto entry = channels_.find(channel);
    if (entry == channels_.end()) return;
    ids.assign(entry->second.begin(), entry->second.end());
  } else {
    for (const auto& [id, handler] : subscriptions_) ids.push_back(id);
  }
  for (const std::uint64_t id : ids) {
    const auto found = subscriptions_.find(id);
    if (found == subscriptions_.end()) continue;
    const PubSubHandler handler = found->second.handler;  // survives its own unsubscribe
    const std::string& handler_channel = found->second.channel;
    PubSubEvent event;
    event.kind = kind;
    event.channel = handler_channel;
    if (kind == PubSubEvent::Kind::message) {
      event.payload = payload;
      ++messages_delivered_;
    }
    handler(event);
  }
}

void FakeBackend::set_down(bool down) { set_down_reason(link_down_, down); }

void FakeBackend::set_held_out(bool held_out) { set_down_reason(held_out_, held_out); }

void FakeBackend::set_down_reason(bool& reason, bool value) {
  const auto lock = guard();
  if (killed_) return;
  const bool was_down = is_down();
  reason = value;
  if (is_down() == was_down) return;
  if (is_down()) {
    pubsub_session_.reset();  // the server forgets the broken connection
    return;
  }
  command_session_ = server_->connect();
  reconnects_.fetch_add(1, std::memory_order_relaxed);
  resubscribe_and_notify();
}

bool FakeBackend::down() const {
  const auto lock = guard();
  return is_down() || killed_;
}

void FakeBackend::set_hanging(bool hanging) {
  const auto lock = guard();
  TURNSTILE_CHECK_MSG(scheduler_ != nullptr, "hanging partitions need a world");
  if (killed_ || hanging == hanging_) return;
  hanging_ = hanging;
  if (!hanging) reconnects_.fetch_add(1, std::memory_order_relaxed);
  // Healed: the subscriber's connection is new (it reconnected when its
  // PING went unanswered); a down link resubscribes when it comes back.
  if (!hanging && !is_down()) resubscribe_and_notify();
}

bool FakeBackend::hanging() const {
  const auto lock = guard();
  return hanging_ && !killed_;
}

void FakeBackend::kill() {
  const auto lock = guard();
  killed_ = true;
  pubsub_session_.reset();
}

bool FakeBackend::killed() const {
  const auto lock = guard();
  return killed_;
}

void FakeBackend::on_server_restart() {
  bool subscribed = false;
  {
    const auto lock = guard();
    ++server_generation_;  // unreplicated writes died with it
    restart_unseen_ = true;
    if (killed_ || is_down()) return;  // a down link resubscribes when it comes back
    reconnects_.fetch_add(1, std::memory_order_relaxed);
    resubscribe_and_notify();
    subscribed = !channels_.empty();
  }
  // The pub/sub connection reconnects at once and finds the new process.
  if (subscribed) tell_restart_if_unseen();
}

RestartWatch FakeBackend::watch_restarts(ServerRestartHandler handler) {
  TURNSTILE_CHECK(handler);
  const MutexLock lock(restart_handlers_->mutex);
  const std::uint64_t id = ++restart_handlers_->next_id;
  restart_handlers_->handlers.emplace(id, std::move(handler));
  return RestartWatch([weak = std::weak_ptr<RestartHandlers>(restart_handlers_), id] {
    if (const std::shared_ptr<RestartHandlers> handlers = weak.lock()) {
      const MutexLock lock(handlers->mutex);
      handlers->handlers.erase(id);
    }
  });
}

void FakeBackend::tell_restart_if_unseen() {
  {
    const auto lock = guard();
    if (!restart_unseen_ || killed_ || is_down()) return;
    restart_unseen_ = false;
    ++restarts_told_;
  }
  const std::string endpoint = describe();
  const MutexLock lock(restart_handlers_->mutex);
  for (const auto& [id, handler] : restart_handlers_->handlers) handler(ServerRestart{.endpoint = endpoint});
}

void FakeBackend::switch_server(Server& server) {
  const auto lock = guard();
  TURNSTILE_CHECK_MSG(scheduler_ != nullptr, "failover needs a world");
  server_ = &server;
  stale_reply_.reset();  // a new connection
  replica_lag_.reset();  // the promoted replica has none of its own
  ++server_generation_;
  restart_unseen_ = true;  // told at the next command
  if (killed_) {
    // Sessions belong to the old server; a crashed link never talks again.
    pubsub_session_.reset();
    command_session_.reset();
    return;
  }
  command_session_ = server_->connect();
  reconnects_.fetch_add(1, std::memory_order_relaxed);
  if (is_down()) {
    pubsub_session_.reset();  // resubscribes when the link comes back
    return;
  }
  resubscribe_and_notify();
}

void FakeBackend::set_replica_lag(std::optional<Duration> lag) {
  const auto lock = guard();
  TURNSTILE_CHECK(!lag || *lag >= Duration::zero());
  replica_lag_ = lag;
}

void FakeBackend::set_pubsub_delay(Duration delay) {
  const auto lock = guard();
  options_.pubsub_delay = delay;
}

void FakeBackend::set_request_filter(RequestFilter filter) {
  const auto lock = guard();
  TURNSTILE_CHECK_MSG(scheduler_ != nullptr, "request faults need a world");
  request_filter_ = std::move(filter);
}

void FakeBackend::set_message_filter(MessageFilter filter) {
  const auto lock = guard();
  message_filter_ = std::move(filter);
}

std::uint64_t FakeBackend::messages_delivered() const {
  const auto lock = guard();
  return messages_delivered_;
}

std::uint64_t FakeBackend::messages_dropped() const {
  const auto lock = guard();
  return messages_dropped_;
}

std::size_t FakeBackend::channel_count() const {
  const auto lock = guard();
  return channels_.size();
}

}  // namespace turnstile::sim
