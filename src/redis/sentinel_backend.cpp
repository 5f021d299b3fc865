#include "redis/sentinel_backend.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/pending_reply.h"
#include "core/script_call.h"
#include "redis/backoff.h"
#include "redis/node.h"
#include "redis/refresh_thread.h"
#include "redis/subscriber.h"
#include "redis/subscription_router.h"
#include "turnstile/errors.h"
#include "turnstile/mutex.h"

namespace turnstile::redis {
namespace {

constexpr std::string_view kSwitchMasterChannel = "+switch-master";

using Clock = std::chrono::steady_clock;
using Deadline = std::optional<Clock::time_point>;

bool passed(const Deadline& callers_deadline) { return callers_deadline && Clock::now() >= *callers_deadline; }

// How a sentinel is reached: its address, its own credentials, no database.
RedisOptions sentinel_options(const RedisOptions& options, const RedisEndpoint& sentinel) {
  RedisOptions result = options_for_endpoint(options, sentinel);
  result.user = options.sentinel_user;
  result.password = options.sentinel_password;
  result.db = 0;
  return result;
}

class SentinelBackend final : public Backend {
 public:
  explicit SentinelBackend(const RedisOptions& options)
      : options_(options),
        subscriptions_([this](std::string_view, const Deadline& callers_deadline) { return master(callers_deadline); },
                       [this] { resolve(); }),
        refresher_([this] {
          watch_sentinels();
          resolve();
          subscriptions_.rehome();
        }) {}

  ~SentinelBackend() override {
    // First, so no refresh subscribes a watcher while they are dropped.
    refresher_.stop();
    const MutexLock lock(watch_mutex_);
    for (std::size_t i = 0; i < watchers_.size(); ++i) {
      if (watch_ids_[i] != 0) watchers_[i]->unsubscribe(watch_ids_[i]);
    }
  }

  Reply eval(const Script& script, const std::vector<std::string>& keys,
             const std::vector<std::string>& args) override {
    return with_master({}, [&](Node& node) { return node.eval(script, keys, args, false); });
  }

  SyncedReply eval_synced(const Script& script, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args) override {
    return with_master({}, [&](Node& node) { return node.eval_synced(script, keys, args, false); });
  }

  SyncedReply eval_synced_within(const Script& script, const std::vector<std::string>& keys,
                                 const std::vector<std::string>& args, const EvalOptions& options) override {
    // The caller's deadline bounds finding the master too (and the
    // READONLY retries); the pool's wait is bounded afresh by what is left.
    const Deadline callers_deadline = callers_deadline_after(options.send_within);
    return with_master(callers_deadline, [&](Node& node) {
      return node.eval_synced(script, keys, args, false, left_of(callers_deadline));
    });
  }

  // send_eval: Backend's default (the call runs at once). Forwarding to
  // Node::send_eval would bypass with_master: no retry of a READONLY refusal
  // on the new master and no re-resolution after a transport error.

  // send_eval_within: the same call run at once, within the caller's
  // bounds as eval_synced_within() (finding the master, the READONLY
  // retries and the pool's wait end by the deadline); its outcome, a
  // PoolExhaustedError included, is kept for get(). A lock's give-up after
  // its wait's deadline sends its call so.
  std::unique_ptr<PendingReply> send_eval_within(const Script& script, const std::vector<std::string>& keys,
                                                 const std::vector<std::string>& args, EvalSync sync,
                                                 const EvalOptions& options) override {
    return complete_now([&] {
      const Deadline callers_deadline = callers_deadline_after(options.send_within);
      return with_master(callers_deadline, [&](Node& node) {
        if (sync == EvalSync::replicas) {
          return node.eval_synced(script, keys, args, false, left_of(callers_deadline));
        }
        return SyncedReply{node.eval(script, keys, args, false, left_of(callers_deadline)), ReplicaAck{}};
      });
    });
  }

  Reply command(const std::vector<std::string>& argv) override {
    check_pooled_command(argv);
    return with_master({}, [&](Node& node) { return raise_if_error(node.command(argv, false)); });
  }

  // The current master only: replicas do not evict on their own (they
  // apply the master's deletions).
  std::vector<MasterReply> command_each_master(const std::vector<std::string>& argv) override {
    check_pooled_command(argv);
    std::shared_ptr<Node> node;
    try {
      node = master();
    } catch (...) {
      return {MasterReply{.node = options_.endpoint(), .reply = Reply::nil(), .failure = std::current_exception()}};
    }
    return {ask_master(*node, argv)};
  }

  Subscription subscribe(std::string_view channel, PubSubHandler handler) override {
    return Subscription(this, subscriptions_.subscribe(channel, std::move(handler)));
  }

  Subscription subscribe_within(std::string_view channel, PubSubHandler handler,
                                const SubscribeOptions& options) override {
    return Subscription(
        this, subscriptions_.subscribe(channel, std::move(handler), callers_deadline_after(options.confirm_within)));
  }

  std::string describe() const override { return options_.describe(); }
  BackendCounters counters() const override { return counters_->read(); }
  RestartWatch watch_restarts(ServerRestartHandler handler) override {
    return counters_->identities->watch(std::move(handler));
  }
  RestartWatch watch_reconnects(ServerRestartHandler handler) override {
    return counters_->identities->watch_reconnects(std::move(handler));
  }

 protected:
  void unsubscribe(std::uint64_t id) noexcept override { subscriptions_.unsubscribe(id); }

 private:
  // What is left before the caller's deadline (none: nullopt).
  static std::optional<std::chrono::nanoseconds> left_of(const Deadline& callers_deadline) {
    if (!callers_deadline) return std::nullopt;
    return std::max<std::chrono::nanoseconds>(*callers_deadline - Clock::now(), std::chrono::nanoseconds::zero());
  }

  // `call` on the master, found by the caller's deadline if given.
  template <typename Call>
  std::invoke_result_t<Call, Node&> with_master(const Deadline& callers_deadline, Call&& call) {
    Backoff backoff;
    for (int attempt = 1;; ++attempt) {
      const std::shared_ptr<Node> node = master(callers_deadline);
      try {
        return call(*node);
      } catch (const ServerError& refusal) {
        // A write refused, so it did not run, by a demoted master
        // (READONLY) or by one with min-replicas-to-write whose replica was
        // promoted away (NOREPLICAS: the old master of a failover, still a
        // master until the sentinels demote it, seconds later): find the
        // master again and try there. Sentinels may still name the old one
        // for a moment during a failover. A retry that would start past the
        // caller's deadline is not made: the refusal is the answer.
        if (dynamic_cast<const ReadOnlyError*>(&refusal) == nullptr &&
            dynamic_cast<const NoReplicasError*>(&refusal) == nullptr) {
          throw;
        }
        if (attempt == kMaxSentinelAttempts) throw;
        const auto pause = backoff.next();
        if (callers_deadline && Clock::now() + pause >= *callers_deadline) throw;
        std::this_thread::sleep_for(pause);
        resolve(callers_deadline);
      } catch (const ConnectionError&) {
        refresher_.request();
        throw;
      }
    }
  }

  std::shared_ptr<Node> master(const Deadline& callers_deadline = {}) {
    {
      const MutexLock lock(mutex_);
      if (master_ != nullptr) return master_;
    }
    resolve(callers_deadline);
    refresher_.request();  // starts watching the sentinels
    const MutexLock lock(mutex_);
    TURNSTILE_CHECK_MSG(master_ != nullptr, "resolve() throws rather than leave no master");
    return master_;
  }

  void resolve(const Deadline& callers_deadline = {}) {
    const RedisEndpoint endpoint = resolve_master(options_, callers_deadline);
    std::string failed_over_to;
    {
      const MutexLock lock(mutex_);
      if (master_ != nullptr && master_->options().host == endpoint.host && master_->options().port == endpoint.port) {
        return;
      }
      if (master_ != nullptr) failed_over_to = endpoint.host + ":" + std::to_string(endpoint.port);
      master_ = std::make_shared<Node>(options_for_endpoint(options_, endpoint), false, nullptr, counters_);
      refresher_.request();  // move the subscriptions
    }
    // Another master: it may lack what the old one granted (asynchronous
    // replication), so it counts as a restart (Backend::watch_restarts).
    if (!failed_over_to.empty()) counters_->identities->restarted(failed_over_to);
  }

  // Subscribes to +switch-master on every sentinel not yet watched.
  void watch_sentinels() {
    const MutexLock lock(watch_mutex_);
    if (watchers_.empty()) {
      for (const RedisEndpoint& sentinel : options_.seeds) {
        watchers_.push_back(std::make_unique<Subscriber>(sentinel_options(options_, sentinel)));
        watch_ids_.push_back(0);
      }
    }
    TURNSTILE_CHECK(watchers_.size() == watch_ids_.size());
    for (std::size_t i = 0; i < watchers_.size(); ++i) {
      if (watch_ids_[i] != 0) continue;
      try {
        watch_ids_[i] =
            watchers_[i]->subscribe(kSwitchMasterChannel, [this](const PubSubEvent&) { refresher_.request(); });
      } catch (const Error&) {
        // That sentinel is down; the others watch, and the next refresh
        // tries it again.
      }
    }
  }

  const RedisOptions options_;
  const std::shared_ptr<Counters> counters_ = std::make_shared<Counters>();
  Mutex mutex_;
  std::shared_ptr<Node> master_ TURNSTILE_GUARDED_BY(mutex_);
  SubscriptionRouter subscriptions_;
  Mutex watch_mutex_;
  std::vector<std::unique_ptr<Subscriber>> watchers_ TURNSTILE_GUARDED_BY(watch_mutex_);
  std::vector<std::uint64_t> watch_ids_ TURNSTILE_GUARDED_BY(watch_mutex_);
  RefreshThread refresher_;  // last: destroyed first, its thread uses the rest
};

}  // namespace

RedisEndpoint resolve_master(const RedisOptions& options, const Deadline& callers_deadline) {
  std::string failures;
  bool verification_failed = false;
  // Cut short by the caller's deadline: no sign the sentinels are down.
  const auto cut_short = [&] {
    return PoolExhaustedError("redis sentinel: finding the master '" + options.sentinel_master_name + "' of " +
                              options.endpoint() + " did not finish by the caller's deadline; nothing was sent" +
                              failures);
  };
  for (const RedisEndpoint& sentinel : options.seeds) {
    const RedisOptions reach = sentinel_options(options, sentinel);
    if (passed(callers_deadline)) throw cut_short();
    try {
      const std::unique_ptr<Connection> connection = Connection::open(reach, callers_deadline);
      const Reply reply = raise_if_error(connection->command_by(
          {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options.sentinel_master_name}, callers_deadline));
      if (reply.is_array() && reply.as_array().size() == 2 && reply.as_array()[0].is_bulk() &&
          reply.as_array()[1].is_bulk()) {
        const int port = std::stoi(reply.as_array()[1].as_string());
        return RedisEndpoint{reply.as_array()[0].as_string(), port};
      }
      failures += "; " + reach.endpoint() + " does not know master '" + options.sentinel_master_name + "'";
    } catch (const Error& error) {
      // A handshake or an answer the caller's deadline ended.
      if (passed(callers_deadline)) throw cut_short();
      verification_failed = verification_failed || dynamic_cast<const TlsVerificationError*>(&error) != nullptr;
      failures += std::string("; ") + error.what();
    } catch (const std::exception&) {
      failures += "; " + reach.endpoint() + " answered a malformed port";
    }
  }
  const std::string message = "redis sentinel: no sentinel of " + options.endpoint() + " named the master '" +
                              options.sentinel_master_name + "'" + failures;
  // A certificate that fails verification does not fix itself: the caller
  // gets that (not retried) rather than a broken connection.
  if (verification_failed) throw TlsVerificationError(message);
  throw ConnectionError(message);
}

std::unique_ptr<Backend> make_sentinel_backend(const RedisOptions& options) {
  return std::make_unique<SentinelBackend>(options);
}

}  // namespace turnstile::redis
