// RedLock and MultiLock: one composite lock over node locks of any flavor,
// differing only in how many nodes must grant it (see multi_lock.h).

#include "turnstile/multi_lock.h"

#include <algorithm>
#include <map>
#include <set>
#include <stop_token>
#include <string>
#include <utility>

#include "core/check.h"
#include "locks/engine/lock_access.h"
#include "locks/engine/acquire_wait.h"
#include "locks/engine/async_signal.h"
#include "locks/handles/client_core.h"
#include "locks/engine/hold_record.h"
#include "locks/engine/lock_engine.h"
#include "locks/engine/node_fanout.h"
#include "locks/engine/task_future.h"
#include "turnstile/errors.h"
#include "turnstile/mutex.h"

namespace turnstile {
namespace detail {

// What a composite needs from its node locks beyond their public API: to
// act for an owner id captured on the calling task, and to send one node's
// call before waiting for any reply (Lock's two-halves forms).
struct NodeAccess {
  // Settles what earlier attempts on this node left (the single-node
  // acquisition's own step, LockEngine::settle_before_attempt), then
  // describes this attempt's call.
  static PreparedAcquire prepare_acquire(Lock& node, const std::string& owner, std::optional<Duration> lease,
                                         AttemptSettlement& settlement) {
    LockEngine& engine = LockAccess::engine(node);
    PreparedAcquire prepared = engine.prepare_acquire(owner, lease);
    engine.settle_before_attempt(owner, prepared.lease, settlement);
    prepared.call = engine.attempt_call(owner, prepared.lease, prepared.scratch);
    return prepared;
  }
  static bool finish_acquire(Lock& node, PreparedAcquire& prepared, PendingReply& sent, AttemptSettlement& settlement) {
    try {
      return LockAccess::engine(node).finish_acquire(prepared, sent);
    } catch (const std::exception&) {
      LockEngine::note_failed_attempt(settlement, std::current_exception());
      throw;
    }
  }
  static PreparedRelease prepare_release(Lock& node, const std::string& owner) {
    return LockAccess::engine(node).prepare_release(owner);
  }
  static bool finish_release(Lock& node, PreparedRelease& prepared, std::unique_ptr<PendingReply> sent) {
    return LockAccess::engine(node).finish_release(prepared, std::move(sent));
  }
  static Backend& backend(const Lock& node) { return *LockAccess::engine(node).client().backend; }
  static Runtime& runtime(const Lock& node) { return *LockAccess::engine(node).client().runtime; }
  static std::shared_ptr<MetricsRecorder> metrics(const Lock& node) {
    return LockAccess::engine(node).client().metrics;
  }
  static std::shared_ptr<ClientCore> client(const Lock& node) { return LockAccess::engine(node).core().client; }
  static Duration default_lease(const Lock& node) { return LockAccess::engine(node).client().watchdog->lease(); }
  static const LockCore* identity(const Lock& node) { return &LockAccess::engine(node).core(); }
  static std::string next_hold_owner(const Lock& node) { return LockAccess::engine(node).client().next_hold_owner(); }
};

namespace {

// A node's acquisition, sent: one try, no waiting. `settlement` is the
// node's across the attempts of one acquisition (shared: a winning
// attempt's late answers are taken at release, after the acquisition).
class AcquireCall final : public NodeCall {
 public:
  AcquireCall(Lock& node, const std::string& owner, std::optional<Duration> lease,
              std::shared_ptr<AttemptSettlement> settlement)
      : node_(node),
        settlement_(std::move(settlement)),
        prepared_(NodeAccess::prepare_acquire(node, owner, lease, *settlement_)) {
    const ScriptCall& call = prepared_.call;
    sent_ = NodeAccess::backend(node).send_eval(*call.script, call.keys, call.args, EvalSync::replicas);
    TURNSTILE_CHECK(sent_ != nullptr);
  }
  bool wait_for(Duration timeout) override { return sent_->wait_for(timeout); }
  bool finish() override { return NodeAccess::finish_acquire(node_, prepared_, *sent_, *settlement_); }

 private:
  Lock& node_;
  std::shared_ptr<AttemptSettlement> settlement_;
  PreparedAcquire prepared_;
  std::unique_ptr<PendingReply> sent_;
};

// A node's release, sent; or, if it could not be sent (no connection to be
// had), sent by finish() with the retries Lock::unlock() has.
class ReleaseCall final : public NodeCall {
 public:
  ReleaseCall(Lock& node, const std::string& owner) : node_(node), prepared_(NodeAccess::prepare_release(node, owner)) {
    if (!prepared_.call) return;  // nothing of ours there: finish() answers no
    const ScriptCall& call = *prepared_.call;
    try {
      sent_ = NodeAccess::backend(node).send_eval(*call.script, call.keys, call.args, EvalSync::none);
    } catch (const ConnectionError&) {
      // finish() sends it again.
    }
  }
  bool wait_for(Duration timeout) override { return sent_ == nullptr || sent_->wait_for(timeout); }
  bool finish() override { return NodeAccess::finish_release(node_, prepared_, std::move(sent_)); }

 private:
  Lock& node_;
  PreparedRelease prepared_;
  std::unique_ptr<PendingReply> sent_;
};

// A node there is nothing to ask: answers no.
class NoCall final : public NodeCall {
 public:
  bool wait_for(Duration) override { return true; }
  bool finish() override { return false; }
};

}  // namespace

// One task's hold on the composite.
struct CompositeHolding {
  std::vector<std::string> owners;          // per node
  std::shared_ptr<NodeFanout> acquisition;  // the winning attempt (late answers are taken at release)
  std::vector<bool> node_lost;              // per node, reported by its watchdog
  Instant valid_until{};
  bool lost = false;  // reported lost: no longer held
  // Requested when it is lost (reported, or found gone at release): a hold
  // as a value's loss token (turnstile/hold.h).
  std::stop_source loss;
};

struct CompositeState {
  std::vector<Lock*> nodes;
  std::vector<std::unique_ptr<Lock>> owned;
  std::size_t required = 0;
  CompositeLockOptions options;
  Runtime* runtime = nullptr;                // the first node's
  std::shared_ptr<MetricsRecorder> metrics;  // the first node's client's
  std::shared_ptr<ClientCore> client;        // likewise (counts and tells acquisitions)
  Flavor flavor = Flavor::multilock;
  Duration default_lease{};  // the shortest watchdog lease of the nodes

  Mutex mutex;                                                                   // never held across a call
  std::map<std::string, CompositeHolding> holdings TURNSTILE_GUARDED_BY(mutex);  // by the first node's owner id
  LockLostHandler lost_handler TURNSTILE_GUARDED_BY(mutex);

  std::size_t tolerated_failures() const { return nodes.size() - required; }
};

}  // namespace detail

namespace {

using detail::AcquireCall;
using detail::check_lease;
using detail::CompositeHolding;
using detail::CompositeState;
using detail::NoCall;
using detail::NodeAccess;
using detail::NodeAnswer;
using detail::NodeCall;
using detail::NodeFanout;
using detail::ReleaseCall;

void check_options(const CompositeLockOptions& options) {
  if (!(options.clock_drift_factor >= 0 && options.clock_drift_factor <= CompositeLock::kMaxClockDriftFactor)) {
    throw InvalidArgumentError("clock_drift_factor must be within [0, " +
                               std::to_string(CompositeLock::kMaxClockDriftFactor) + "], got " +
                               std::to_string(options.clock_drift_factor));
  }
  if (options.clock_drift_constant < Duration::zero() || options.retry_delay_min < Duration::zero() ||
      options.retry_delay_max < options.retry_delay_min) {
    throw InvalidArgumentError(
        "clock_drift_constant and retry_delay_min must not be negative, retry_delay_max not below retry_delay_min");
  }
}

std::string describe_error(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  }
}

bool is_transport_error(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const ConnectionError&) {
    return true;
  } catch (...) {
    return false;
  }
}

Duration drift_allowance(const CompositeLockOptions& options, Duration lease) {
  return Duration(static_cast<Duration::rep>(static_cast<double>(lease.count()) * options.clock_drift_factor)) +
         options.clock_drift_constant;
}

// Releases, in parallel, every node `should_release` picks (for `owners`);
// takes all the answers.
std::unique_ptr<NodeFanout> release_nodes(const CompositeState& state, const std::vector<std::string>& owners,
                                          const std::vector<bool>& should_release) {
  auto released =
      std::make_unique<NodeFanout>(*state.runtime, state.nodes.size(), [&](std::size_t i) -> std::unique_ptr<NodeCall> {
        if (!should_release[i]) return std::make_unique<NoCall>();
        return std::make_unique<ReleaseCall>(*state.nodes[i], owners[i]);
      });
  released->wait_for_all();
  return released;
}

// Which nodes an attempt may have taken: granted ones, and failed ones (a
// timed-out request may have run); a node that answered "held by another"
// has nothing of ours.
std::vector<bool> possibly_taken(const NodeFanout& acquisition) {
  std::vector<bool> taken(acquisition.size());
  for (std::size_t i = 0; i < taken.size(); ++i) {
    const NodeAnswer answer = acquisition.answer(i);
    taken[i] = answer == NodeAnswer::yes || answer == NodeAnswer::failed;
  }
  return taken;
}

// Per node, what one acquisition's attempts carry from one to the next.
using NodeSettlements = std::vector<std::shared_ptr<detail::AttemptSettlement>>;

struct AttemptResult {
  bool acquired = false;
  Instant valid_until{};
  // Set when too many nodes failed with errors for any attempt to succeed.
  std::exception_ptr fatal;
};

// One attempt: all nodes in parallel, decide, and on failure leave nothing
// behind on any node.
AttemptResult attempt_once(const std::shared_ptr<CompositeState>& state, const std::vector<std::string>& owners,
                           const std::optional<Duration>& lease, const NodeSettlements& settlements,
                           std::shared_ptr<NodeFanout>& fanout) {
  Runtime& runtime = *state->runtime;
  const std::size_t nodes = state->nodes.size();
  const std::size_t required = state->required;
  const std::size_t tolerated = state->tolerated_failures();
  // Validity counts from before the first request is sent.
  const Instant start = runtime.now();
  // Every node's call goes out before any answer is awaited: one try each,
  // no waiting on a node.
  fanout = std::make_shared<NodeFanout>(runtime, nodes, [&](std::size_t i) {
    return std::make_unique<AcquireCall>(*state->nodes[i], owners[i], lease, settlements[i]);
  });
  // Every answer, or the node timeout: on return, the nodes that will ever
  // grant this attempt have (unless one is slower than the timeout).
  const NodeFanout::Tally tally = fanout->wait(start + std::max(state->options.node_timeout, Duration::zero()),
                                               [&](const NodeFanout::Tally& t) { return t.no + t.failed > tolerated; });

  const Duration effective_lease = lease.value_or(state->default_lease);
  // = now + (lease - elapsed - drift allowance): the validity left.
  const Instant valid_until = start + effective_lease - drift_allowance(state->options, effective_lease);
  AttemptResult result;
  if (tally.yes >= required && runtime.now() < valid_until) {
    result.acquired = true;
    result.valid_until = lease ? valid_until : kNoDeadline;
    return result;
  }

  // Lost: wait for the late answers, then release whatever may be ours.
  fanout->wait_for_all();
  const std::unique_ptr<NodeFanout> released = release_nodes(*state, owners, possibly_taken(*fanout));
  std::exception_ptr first_other_error;
  std::string failures;
  for (std::size_t i = 0; i < nodes; ++i) {
    // A node whose attempt failed in transit and whose release then ran has
    // nothing of ours left: the next attempt need not look.
    if (fanout->answer(i) == NodeAnswer::failed && released->answer(i) != NodeAnswer::failed) {
      settlements[i]->uncertain = false;
    }
    if (fanout->answer(i) == NodeAnswer::yes && released->answer(i) == NodeAnswer::failed) {
      // A node we hold that could not be released keeps the key until the
      // lease runs out; the caller should know.
      state->nodes[i]->report_background_error(released->error(i));
    }
    if (fanout->answer(i) != NodeAnswer::failed) continue;
    const std::exception_ptr error = fanout->error(i);
    if (!first_other_error && !is_transport_error(error)) first_other_error = error;
    failures += "; node " + std::to_string(i) + ": " + describe_error(error);
  }
  const std::size_t failed = fanout->tally().failed;
  // A minority of failing nodes does not stop the others; more can never
  // succeed, so the caller hears why (WrongTypeError, say, as it is).
  if (failed <= tolerated) return result;
  result.fatal =
      first_other_error
          ? first_other_error
          : std::make_exception_ptr(ConnectionError(
                "lock " + in_quotes(state->nodes[0]->name()) + ": " + std::to_string(failed) + " of " +
                std::to_string(nodes) + " nodes unreachable, " + std::to_string(required) + " needed" + failures));
  return result;
}

Duration random_retry_delay(const CompositeState& state) {
  const Duration min = state.options.retry_delay_min;
  const auto span = static_cast<std::uint64_t>((state.options.retry_delay_max - min).count());
  const std::uint64_t draw = state.runtime->random_u64();
  return min + Duration(static_cast<Duration::rep>(span == UINT64_MAX ? draw : draw % (span + 1)));
}

void on_node_lost(const std::weak_ptr<CompositeState>& weak_state, std::size_t node, const LockLost& lost) {
  const std::shared_ptr<CompositeState> state = weak_state.lock();
  if (!state) return;
  LockLostHandler handler;
  std::string owner;
  std::stop_source loss{std::nostopstate};
  {
    MutexLock guard(state->mutex);
    auto it = std::find_if(state->holdings.begin(), state->holdings.end(),
                           [&](const auto& entry) { return entry.second.owners[node] == lost.owner; });
    if (it == state->holdings.end() || it->second.lost) return;
    CompositeHolding& holding = it->second;
    holding.node_lost[node] = true;
    std::size_t alive = 0;
    for (std::size_t i = 0; i < state->nodes.size(); ++i) {
      if (holding.acquisition->answer(i) == NodeAnswer::yes && !holding.node_lost[i]) ++alive;
    }
    if (alive >= state->required) return;
    holding.lost = true;
    handler = state->lost_handler;
    owner = holding.owners[0];
    loss = holding.loss;
  }
  loss.request_stop();
  if (handler) handler(LockLost{state->nodes[0]->name(), owner, lost.reason});
}

std::vector<std::string> owners_of_current_task(const CompositeState& state) {
  std::vector<std::string> owners;
  owners.reserve(state.nodes.size());
  for (const Lock* node : state.nodes) owners.push_back(node->current_owner());
  return owners;
}

// Attempts until acquired, the deadline, or a stop requested on `stop`
// (checked before every attempt and during the delay between them; a
// failed attempt leaves nothing taken on any node).
// Its waits are `style`'s (locks/engine/task.h); its arguments are its own.
detail::Task<bool> acquire_task(detail::WaitStyle style, std::shared_ptr<CompositeState> state,
                                std::vector<std::string> owners, std::optional<Duration> lease, Instant deadline,
                                std::stop_token stop) {
  check_lease(lease);
  {
    MutexLock guard(state->mutex);
    if (state->holdings.contains(owners[0])) {
      throw InvalidArgumentError("lock " + in_quotes(state->nodes[0]->name()) +
                                 " is already held by this task; composite locks are not reentrant");
    }
  }
  Runtime& runtime = *state->runtime;
  const detail::AcquisitionTiming timing{.started = runtime.now()};
  const auto gave_up = [&] {
    state->metrics->failed_try();
    return false;
  };
  NodeSettlements settlements;
  for (std::size_t i = 0; i < state->nodes.size(); ++i) {
    settlements.push_back(std::make_shared<detail::AttemptSettlement>());
  }
  // Bounded by the deadline (lock() waits for ever, by contract).
  for (;;) {
    if (stop.stop_requested()) co_return gave_up();
    std::shared_ptr<NodeFanout> fanout;
    const AttemptResult attempt = attempt_once(state, owners, lease, settlements, fanout);
    if (attempt.acquired) {
      {
        MutexLock guard(state->mutex);
        const auto [it, inserted] = state->holdings.try_emplace(owners[0]);
        TURNSTILE_CHECK(inserted);  // one task runs one acquire at a time
        (void)inserted;
        it->second.owners = owners;
        it->second.acquisition = std::move(fanout);
        it->second.node_lost.assign(state->nodes.size(), false);
        it->second.valid_until = attempt.valid_until;
        it->second.loss = std::stop_source();
      }
      state->client->acquired(state->nodes[0]->name(), state->flavor, timing);
      co_return true;
    }
    if (attempt.fatal) std::rethrow_exception(attempt.fatal);
    const Instant now = runtime.now();
    if (now >= deadline) co_return gave_up();
    const Instant retry_at = std::min(deadline, runtime.deadline_after(random_retry_delay(*state)));
    detail::Task<bool> sleeping = detail::sleep_unless_stopped(runtime, style, retry_at, stop);
    if (!co_await std::move(sleeping)) co_return gave_up();
  }
}

bool acquire(const std::shared_ptr<CompositeState>& state, const std::vector<std::string>& owners,
             const std::optional<Duration>& lease, Instant deadline, const std::stop_token& stop = {}) {
  return acquire_task(detail::WaitStyle::blocking, state, owners, lease, deadline, stop).run_blocking();
}

// How release() answers a hold that cannot be released as held.
enum class ReleaseMode {
  // unlock() (lock.h, "Releasing"): a loss goes to the lost handler (once),
  // a failure to the background error handler; nothing is thrown.
  quietly,
  // release_or_throw(): NotOwnerError for a loss, the node error for a failure.
  strictly,
};

void release(const std::shared_ptr<CompositeState>& state, const std::vector<std::string>& owners, ReleaseMode mode) {
  CompositeHolding holding;
  {
    MutexLock guard(state->mutex);
    auto it = state->holdings.find(owners[0]);
    if (it == state->holdings.end()) {
      throw NotOwnerError("attempt to unlock lock " + in_quotes(state->nodes[0]->name()) +
                          ", not locked by current task (owner id " + owners[0] + ")");
    }
    holding = std::move(it->second);
    state->holdings.erase(it);
  }
  // Late answers of the winning attempt first: a node granted after the
  // attempt was decided is ours too.
  holding.acquisition->wait_for_all();
  const std::unique_ptr<NodeFanout> released = release_nodes(*state, owners, possibly_taken(*holding.acquisition));

  std::size_t released_count = 0;
  std::exception_ptr first_error;
  std::vector<std::pair<std::size_t, std::exception_ptr>> node_errors;
  for (std::size_t i = 0; i < state->nodes.size(); ++i) {
    if (holding.acquisition->answer(i) != NodeAnswer::yes) continue;
    switch (released->answer(i)) {
      case NodeAnswer::yes:
        ++released_count;
        break;
      case NodeAnswer::no:
        node_errors.emplace_back(i, std::make_exception_ptr(NotOwnerError(
                                        "lock " + in_quotes(state->nodes[i]->name()) + " on node " + std::to_string(i) +
                                        " was no longer held at unlock (lease ran out, or the node lost it)")));
        break;
      case NodeAnswer::failed:
        if (!first_error) first_error = released->error(i);
        node_errors.emplace_back(i, released->error(i));
        break;
      case NodeAnswer::pending:
        TURNSTILE_UNREACHABLE("a settled fan-out has no pending answer");
        break;
    }
  }
  const bool quiet = mode == ReleaseMode::quietly;
  if (holding.lost) {
    if (quiet) return;  // told when it happened
    throw NotOwnerError("attempt to unlock lock " + in_quotes(state->nodes[0]->name()) +
                        ", which was lost on too many nodes (owner id " + owners[0] + ")");
  }
  if (released_count < state->required) {
    if (first_error && !quiet) std::rethrow_exception(first_error);
    if (!first_error) {
      // Believed held, but too few nodes still had it: a loss, told now,
      // the one way, whichever form of release found it.
      holding.loss.request_stop();
      LockLostHandler handler;
      {
        MutexLock guard(state->mutex);
        handler = state->lost_handler;
      }
      if (handler) handler(LockLost{state->nodes[0]->name(), owners[0], LockLostReason::gone});
      if (quiet) return;
      throw NotOwnerError("attempt to unlock lock " + in_quotes(state->nodes[0]->name()) + ": only " +
                          std::to_string(released_count) + " nodes still held it, " + std::to_string(state->required) +
                          " needed (its lease ran out)");
    }
  }
  for (const auto& [node, error] : node_errors) state->nodes[node]->report_background_error(error);
}

}  // namespace

CompositeLock::CompositeLock(std::vector<Lock*> nodes, std::vector<std::unique_ptr<Lock>> owned, bool majority,
                             const CompositeLockOptions& options) {
  // Owned nodes come without borrowed ones.
  TURNSTILE_CHECK(nodes.empty() || owned.empty());
  for (const std::unique_ptr<Lock>& node : owned) nodes.push_back(node.get());
  if (nodes.empty()) throw InvalidArgumentError("a composite lock needs at least one node lock");
  if (nodes.size() > kMaxNodes) {
    throw InvalidArgumentError("a composite lock takes at most " + std::to_string(kMaxNodes) + " node locks, got " +
                               std::to_string(nodes.size()));
  }
  check_options(options);
  std::set<const detail::LockCore*> seen;
  for (const Lock* node : nodes) {
    if (node == nullptr) throw InvalidArgumentError("a composite lock's node lock must not be null");
    if (!seen.insert(NodeAccess::identity(*node)).second) {
      throw InvalidArgumentError("lock " + in_quotes(node->name()) +
                                 " of one client is given twice to a composite lock");
    }
  }
  state_ = std::make_shared<CompositeState>();
  state_->nodes = std::move(nodes);
  state_->owned = std::move(owned);
  state_->required = turnstile::required_nodes(majority ? Quorum::majority : Quorum::all, state_->nodes.size());
  state_->options = options;
  state_->runtime = &NodeAccess::runtime(*state_->nodes[0]);
  state_->metrics = NodeAccess::metrics(*state_->nodes[0]);
  state_->client = NodeAccess::client(*state_->nodes[0]);
  state_->flavor = majority ? Flavor::redlock : Flavor::multilock;
  state_->default_lease = NodeAccess::default_lease(*state_->nodes[0]);
  for (const Lock* node : state_->nodes) {
    state_->default_lease = std::min(state_->default_lease, NodeAccess::default_lease(*node));
  }
  const std::weak_ptr<CompositeState> weak_state = state_;
  for (std::size_t i = 0; i < state_->nodes.size(); ++i) {
    state_->nodes[i]->set_lost_handler([weak_state, i](const LockLost& lost) { on_node_lost(weak_state, i, lost); });
  }
  TURNSTILE_CHECK(state_->required >= 1 && state_->required <= state_->nodes.size());
}

CompositeLock::CompositeLock(CompositeLock&&) noexcept = default;
CompositeLock& CompositeLock::operator=(CompositeLock&&) noexcept = default;
CompositeLock::~CompositeLock() = default;

const std::string& CompositeLock::name() const { return state_->nodes[0]->name(); }
std::size_t CompositeLock::node_count() const { return state_->nodes.size(); }
namespace detail {

// A composite hold as a value (turnstile/hold.h): each node held for an
// owner id of its own client that no task uses.
class CompositeHold final : public HoldRecord {
 public:
  CompositeHold(std::shared_ptr<CompositeState> state, std::vector<std::string> owners)
      : HoldRecord(state->flavor, state->nodes[0]->name(), owners[0]),
        state_(std::move(state)),
        owners_(std::move(owners)) {
    MutexLock guard(state_->mutex);
    auto it = state_->holdings.find(owners_[0]);
    TURNSTILE_CHECK(it != state_->holdings.end() && it->second.loss.stop_possible());
    loss_ = it->second.loss;
  }

  bool held() const override {
    if (released() || loss_.stop_requested()) return false;
    MutexLock guard(state_->mutex);
    auto it = state_->holdings.find(owners_[0]);
    return it != state_->holdings.end() && !it->second.lost && state_->runtime->now() < it->second.valid_until;
  }
  std::stop_token loss_token() const override { return loss_.get_token(); }
  Runtime& runtime() const override { return *state_->runtime; }
  void extend(Duration) override {
    throw InvalidArgumentError("lock " + in_quotes(name) + " is a composite lock: its holds cannot be extended");
  }

 private:
  void release(bool strict) override {
    ::turnstile::release(state_, owners_, strict ? ReleaseMode::strictly : ReleaseMode::quietly);
  }
  void report_background_error(std::exception_ptr error) const noexcept override {
    state_->nodes[0]->report_background_error(error);
  }

  std::shared_ptr<CompositeState> state_;
  std::vector<std::string> owners_;
  std::stop_source loss_;
};

}  // namespace detail

namespace {

std::vector<std::string> new_hold_owners(const CompositeState& state) {
  std::vector<std::string> owners;
  owners.reserve(state.nodes.size());
  for (const Lock* node : state.nodes) owners.push_back(NodeAccess::next_hold_owner(*node));
  return owners;
}

}  // namespace

LockHold CompositeLock::try_acquire_hold(const AcquireOptions& options) {
  std::vector<std::string> owners = new_hold_owners(*state_);
  if (!acquire(state_, owners, options.lease, state_->runtime->deadline_after(options.wait), options.stop)) return {};
  return detail::wrap_hold(std::make_shared<detail::CompositeHold>(state_, std::move(owners)));
}

Future<LockHold> CompositeLock::try_acquire_hold_async(const AcquireOptions& options) {
  check_lease(options.lease);
  const Instant deadline = state_->runtime->deadline_after(options.wait);
  std::vector<std::string> owners = new_hold_owners(*state_);
  auto acquiring = acquire_task(detail::WaitStyle::suspending, state_, owners, options.lease, deadline, options.stop);
  return detail::start_future<LockHold>(
      *state_->runtime, std::move(acquiring), [state = state_, owners](bool acquired) -> LockHold {
        if (!acquired) return {};
        return detail::wrap_hold(std::make_shared<detail::CompositeHold>(state, owners));
      });
}

std::size_t CompositeLock::required_nodes() const { return state_->required; }

void CompositeLock::lock() {
  const bool acquired = acquire(state_, owners_of_current_task(*state_), std::nullopt, kNoDeadline);
  TURNSTILE_CHECK(acquired);
  (void)acquired;
}

void CompositeLock::lock(Duration lease) {
  const bool acquired = acquire(state_, owners_of_current_task(*state_), lease, kNoDeadline);
  TURNSTILE_CHECK(acquired);
  (void)acquired;
}

bool CompositeLock::try_lock() {
  return acquire(state_, owners_of_current_task(*state_), std::nullopt, state_->runtime->now());
}

bool CompositeLock::try_lock(const AcquireOptions& options) {
  return acquire(state_, owners_of_current_task(*state_), options.lease, state_->runtime->deadline_after(options.wait),
                 options.stop);
}

bool CompositeLock::try_lock_until(Instant deadline) {
  return acquire(state_, owners_of_current_task(*state_), std::nullopt, deadline);
}

void CompositeLock::unlock() { release(state_, owners_of_current_task(*state_), ReleaseMode::quietly); }

std::optional<Instant> CompositeLock::valid_until() const {
  const std::string owner = current_owner();
  MutexLock guard(state_->mutex);
  auto it = state_->holdings.find(owner);
  if (it == state_->holdings.end() || it->second.lost) return std::nullopt;
  return it->second.valid_until;
}

Duration CompositeLock::remaining_validity() const {
  const std::optional<Instant> until = valid_until();
  if (!until) return Duration::zero();
  if (*until == kNoDeadline) return Duration::max();
  return std::max(Duration::zero(), *until - state_->runtime->now());
}

bool CompositeLock::is_held_by_current_thread() const { return valid_until().has_value(); }

Future<void> CompositeLock::lock_async(std::optional<Duration> lease) {
  check_lease(lease);
  auto acquiring =
      acquire_task(detail::WaitStyle::suspending, state_, owners_of_current_task(*state_), lease, kNoDeadline, {});
  return detail::start_future<void>(*state_->runtime, std::move(acquiring),
                                    [](bool acquired) { TURNSTILE_CHECK(acquired); });
}

Future<bool> CompositeLock::try_lock_async(const AcquireOptions& options) {
  check_lease(options.lease);
  const Instant deadline = state_->runtime->deadline_after(options.wait);
  auto acquiring = acquire_task(detail::WaitStyle::suspending, state_, owners_of_current_task(*state_), options.lease,
                                deadline, options.stop);
  return detail::start_future<bool>(*state_->runtime, std::move(acquiring), [](bool acquired) { return acquired; });
}

Future<void> CompositeLock::unlock_async() {
  return detail::post_future<void>(*state_->runtime, [state = state_, owners = owners_of_current_task(*state_)] {
    release(state, owners, ReleaseMode::quietly);
  });
}

void CompositeLock::set_lost_handler(LockLostHandler handler) {
  MutexLock guard(state_->mutex);
  state_->lost_handler = std::move(handler);
}

std::string CompositeLock::current_owner() const { return state_->nodes[0]->current_owner(); }

void CompositeLock::report_background_error(std::exception_ptr error) const noexcept {
  state_->nodes[0]->report_background_error(error);
}

namespace {

std::vector<Lock*> borrowed(const std::vector<std::reference_wrapper<Lock>>& nodes) {
  std::vector<Lock*> pointers;
  pointers.reserve(nodes.size());
  for (Lock& node : nodes) pointers.push_back(&node);
  return pointers;
}

}  // namespace

RedLock::RedLock(std::vector<std::reference_wrapper<Lock>> nodes, const CompositeLockOptions& options)
    : CompositeLock(borrowed(nodes), {}, /*majority=*/true, options) {}
RedLock::RedLock(std::vector<std::unique_ptr<Lock>> nodes, const CompositeLockOptions& options)
    : CompositeLock({}, std::move(nodes), /*majority=*/true, options) {}

MultiLock::MultiLock(std::vector<std::reference_wrapper<Lock>> nodes, const CompositeLockOptions& options)
    : CompositeLock(borrowed(nodes), {}, /*majority=*/false, options) {}
MultiLock::MultiLock(std::vector<std::unique_ptr<Lock>> nodes, const CompositeLockOptions& options)
    : CompositeLock({}, std::move(nodes), /*majority=*/false, options) {}

}  // namespace turnstile
