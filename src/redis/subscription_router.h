// redis/subscription_router.h
//
// Subscriptions of a backend whose channels live on a node that can change:
// the cluster backend (a channel lives on the master owning its slot) and
// the sentinel backend (every channel lives on the current master).
//
//   * subscribe() asks `locate` for the channel's node and subscribes the
//     handler with that node's Subscriber. If the node answers MOVED (the
//     caller's map is stale) it calls `refresh` and tries again, at most
//     kMaxClusterAttempts times.
//   * rehome() (after a topology change) moves every subscription whose
//     channel now locates elsewhere: subscribe on the new node first, then
//     drop the old registration, then tell the handler
//     PubSubEvent::Kind::resubscribed, since messages may have been missed
//     in between. A subscription that cannot move yet stays where it is and
//     is tried again at the next rehome(); one that cannot move, or whose
//     node dropped it while the slot map still places it there (read from
//     a node that has not heard of the move), makes rehome() throw
//     ClusterRedirectError once the others are done, so that the refresh
//     thread reads the map again after a backoff.
//   * unsubscribe() returns only when the handler is not running, and the
//     handler is not called afterwards (a per-subscription mutex, recursive
//     so that a handler may drop its own subscription).
//
// Thread-safe. Handlers run on the nodes' reader threads (messages) or on
// the thread calling rehome() (resubscribed).

#ifndef TURNSTILE_REDIS_SUBSCRIPTION_ROUTER_H_
#define TURNSTILE_REDIS_SUBSCRIPTION_ROUTER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "redis/node.h"
#include "turnstile/backend.h"
#include "turnstile/mutex.h"

namespace turnstile::redis {

class SubscriptionRouter {
 public:
  using Deadline = std::optional<std::chrono::steady_clock::time_point>;
  // The node of `channel`; finding it ends by the caller's deadline, if
  // given (PoolExhaustedError when cut short; rehome() gives none).
  using Locate = std::function<std::shared_ptr<Node>(std::string_view channel, const Deadline& callers_deadline)>;

  SubscriptionRouter(Locate locate, std::function<void()> refresh);
  // Every subscription must have been dropped before.
  ~SubscriptionRouter();
  SubscriptionRouter(const SubscriptionRouter&) = delete;
  SubscriptionRouter& operator=(const SubscriptionRouter&) = delete;

  // Returns the new subscription's id once its node confirmed it. Throws
  // what the node's Subscriber throws, or ClusterRedirectError if the
  // channel was still MOVED after kMaxClusterAttempts tries.
  // `callers_deadline` bounds finding the node and every confirmation
  // waited for (not a MOVED refresh).
  std::uint64_t subscribe(std::string_view channel, PubSubHandler handler, const Deadline& callers_deadline = {});
  void unsubscribe(std::uint64_t id) noexcept;
  // Moves subscriptions to their channels' current nodes (see above).
  // Throws ClusterRedirectError if one is left stranded.
  void rehome();

 private:
  struct Entry {
    std::string channel;
    PubSubHandler handler;
    // Held while the handler runs; recursive (so std, not annotated): the
    // handler may unsubscribe or rehome from within.
    std::recursive_mutex call_mutex;
    bool alive = true;  // guarded by call_mutex
    // Where it is registered; guarded by the router's mutex_ (which the
    // analysis cannot name from here).
    std::shared_ptr<Node> node;
    std::uint64_t node_id = 0;
  };

  static PubSubHandler forward_to(const std::shared_ptr<Entry>& entry);

  const Locate locate_;
  const std::function<void()> refresh_;
  Mutex mutex_;
  std::map<std::uint64_t, std::shared_ptr<Entry>> entries_ TURNSTILE_GUARDED_BY(mutex_);
  std::uint64_t next_id_ TURNSTILE_GUARDED_BY(mutex_) = 0;
};

}  // namespace turnstile::redis

#endif  // TURNSTILE_REDIS_SUBSCRIPTION_ROUTER_H_
