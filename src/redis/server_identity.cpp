#include "redis/server_identity.h"

#include <utility>
#include <vector>

#include "core/check.h"
#include "core/info_reply.h"

namespace turnstile::redis {

std::optional<std::string> run_id_from_info(std::string_view info) {
  const std::optional<std::string_view> run_id = detail::info_field(info, "run_id");
  if (!run_id || run_id->empty()) return std::nullopt;
  return std::string(*run_id);
}

RestartWatch ServerIdentities::watch(ServerRestartHandler handler) {
  return add(&ServerIdentities::handlers_, std::move(handler));
}

RestartWatch ServerIdentities::watch_reconnects(ServerRestartHandler handler) {
  return add(&ServerIdentities::reconnect_handlers_, std::move(handler));
}

RestartWatch ServerIdentities::add(Handlers ServerIdentities::*handlers, ServerRestartHandler handler) {
  TURNSTILE_CHECK(handler != nullptr);
  std::uint64_t id = 0;
  {
    const MutexLock lock(mutex_);
    id = ++next_id_;
    (this->*handlers).emplace(id, std::move(handler));
  }
  return RestartWatch([weak = weak_from_this(), handlers, id] {
    if (const std::shared_ptr<ServerIdentities> self = weak.lock()) self->remove(handlers, id);
  });
}

void ServerIdentities::remove(Handlers ServerIdentities::*handlers, std::uint64_t id) {
  const MutexLock dispatching(dispatch_mutex_);
  const MutexLock lock(mutex_);
  (this->*handlers).erase(id);
}

bool ServerIdentities::observe(const std::string& endpoint, const std::string& run_id) {
  if (run_id.empty()) return false;
  {
    const MutexLock lock(mutex_);
    auto [it, inserted] = run_ids_.try_emplace(endpoint, run_id);
    if (inserted || it->second == run_id) return false;
    it->second = run_id;
  }
  restarted(endpoint);
  return true;
}

void ServerIdentities::restarted(std::string_view endpoint) {
  restarts_.fetch_add(1, std::memory_order_relaxed);
  tell(&ServerIdentities::handlers_, endpoint);
}

void ServerIdentities::reconnected(std::string_view endpoint) {
  tell(&ServerIdentities::reconnect_handlers_, endpoint);
}

void ServerIdentities::tell(const Handlers ServerIdentities::*handlers, std::string_view endpoint) {
  const MutexLock dispatching(dispatch_mutex_);
  std::vector<ServerRestartHandler> copies;
  {
    const MutexLock lock(mutex_);
    copies.reserve((this->*handlers).size());
    for (const auto& [id, handler] : this->*handlers) copies.push_back(handler);
  }
  const ServerRestart told{.endpoint = endpoint};
  for (const ServerRestartHandler& handler : copies) handler(told);
}

}  // namespace turnstile::redis
