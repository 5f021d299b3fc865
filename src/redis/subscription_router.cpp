#include "redis/subscription_router.h"

#include <utility>
#include <vector>

#include "core/check.h"
#include "turnstile/errors.h"

namespace turnstile::redis {

SubscriptionRouter::SubscriptionRouter(Locate locate, std::function<void()> refresh)
    : locate_(std::move(locate)), refresh_(std::move(refresh)) {}

SubscriptionRouter::~SubscriptionRouter() {
  TURNSTILE_CHECK_MSG(entries_.empty(), "destroy every Subscription before its backend");
}

PubSubHandler SubscriptionRouter::forward_to(const std::shared_ptr<Entry>& entry) {
  return [entry](const PubSubEvent& event) {
    const std::lock_guard guard(entry->call_mutex);
    if (entry->alive) entry->handler(event);
  };
}

std::uint64_t SubscriptionRouter::subscribe(std::string_view channel, PubSubHandler handler,
                                            const Deadline& callers_deadline) {
  auto entry = std::make_shared<Entry>();
  entry->channel = std::string(channel);
  entry->handler = std::move(handler);
  std::string last_error;
  for (int attempt = 1; attempt <= kMaxClusterAttempts; ++attempt) {
    std::shared_ptr<Node> node = locate_(channel, callers_deadline);
    TURNSTILE_CHECK_MSG(node != nullptr, "locate() throws rather than answer no node");
    try {
      const std::uint64_t node_id = node->subscriber().subscribe(channel, forward_to(entry), callers_deadline);
      const MutexLock lock(mutex_);
      entry->node = std::move(node);
      entry->node_id = node_id;
      const std::uint64_t id = ++next_id_;
      const bool inserted = entries_.emplace(id, entry).second;
      TURNSTILE_CHECK_MSG(inserted, "subscription ids are never reused");
      return id;
    } catch (const ServerError& error) {
      if (error.code() != "MOVED" && error.code() != "CLUSTERDOWN") throw;
      last_error = error.server_message();
      refresh_();
    }
  }
  throw ClusterRedirectError("redis cluster: subscribing to channel '" + std::string(channel) + "' was refused " +
                             std::to_string(kMaxClusterAttempts) + " times (kMaxClusterAttempts), last: " + last_error);
}

void SubscriptionRouter::unsubscribe(std::uint64_t id) noexcept {
  std::shared_ptr<Entry> entry;
  std::shared_ptr<Node> node;
  std::uint64_t node_id = 0;
  {
    const MutexLock lock(mutex_);
    const auto it = entries_.find(id);
    if (it == entries_.end()) return;
    entry = std::move(it->second);
    entries_.erase(it);
    node = entry->node;
    node_id = entry->node_id;
  }
  TURNSTILE_CHECK(entry != nullptr && node != nullptr && entry->alive);
  {
    const std::lock_guard guard(entry->call_mutex);  // waits out a running handler
    entry->alive = false;
  }
  node->subscriber().unsubscribe(node_id);
}

void SubscriptionRouter::rehome() {
  std::vector<std::pair<std::uint64_t, std::shared_ptr<Entry>>> all;
  {
    const MutexLock lock(mutex_);
    all.assign(entries_.begin(), entries_.end());
  }
  // A subscription its node dropped, which the slot map (read from a node
  // that has not heard of the move yet) still places there.
  std::string stranded;
  for (const auto& [id, entry] : all) {
    std::shared_ptr<Node> target;
    std::uint64_t new_id = 0;
    try {
      target = locate_(entry->channel, std::nullopt);
      TURNSTILE_CHECK(target != nullptr);
      std::shared_ptr<Node> current;
      {
        const MutexLock lock(mutex_);
        current = entry->node;
      }
      if (target == current) {
        if (current->subscriber().moved_away(entry->channel)) stranded = entry->channel;
        continue;
      }
      new_id = target->subscriber().subscribe(entry->channel, forward_to(entry));
    } catch (const std::exception&) {
      stranded = entry->channel;
      continue;  // stays where it is; the next rehome() tries again
    }
    std::shared_ptr<Node> old_node;
    std::uint64_t old_id = 0;
    {
      const MutexLock lock(mutex_);
      if (entries_.contains(id)) {
        old_node = std::exchange(entry->node, target);
        old_id = std::exchange(entry->node_id, new_id);
      }
    }
    if (old_node == nullptr) {  // dropped meanwhile
      target->subscriber().unsubscribe(new_id);
      continue;
    }
    old_node->subscriber().unsubscribe(old_id);
    const std::lock_guard guard(entry->call_mutex);
    if (entry->alive) entry->handler(PubSubEvent{PubSubEvent::Kind::resubscribed, entry->channel, {}});
  }
  // Thrown to the refresh thread, which reads the slot map again after a
  // backoff (redis/refresh_thread.h) until the move is seen.
  if (!stranded.empty()) {
    throw ClusterRedirectError("redis cluster: the subscription to channel '" + stranded +
                               "' is not on its slot's owner yet");
  }
}

}  // namespace turnstile::redis
