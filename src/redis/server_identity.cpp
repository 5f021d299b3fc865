#include "redis/server_identity.h"

#include <utility>
#include <vector>

#include "core/check.h"

namespace turnstile::redis {

std::optional<std::string> run_id_from_info(std::string_view info) {
  constexpr std::string_view kField = "run_id:";
  std::size_t at = 0;
  while (at < info.size()) {
    std::size_t end = info.find('\n', at);
    if (end == std::string_view::npos) end = info.size();
    std::string_view line = info.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.starts_with(kField) && line.size() > kField.size()) return std::string(line.substr(kField.size()));
    at = end + 1;
  }
  return std::nullopt;
}

RestartWatch ServerIdentities::watch(ServerRestartHandler handler) {
  TURNSTILE_CHECK(handler != nullptr);
  std::uint64_t id = 0;
  {
    const std::lock_guard lock(mutex_);
    id = ++next_id_;
    handlers_.emplace(id, std::move(handler));
  }
  return RestartWatch([weak = weak_from_this(), id] {
    if (const std::shared_ptr<ServerIdentities> self = weak.lock()) self->remove(id);
  });
}

void ServerIdentities::remove(std::uint64_t id) {
  const std::lock_guard dispatching(dispatch_mutex_);
  const std::lock_guard lock(mutex_);
  handlers_.erase(id);
}

void ServerIdentities::observe(const std::string& endpoint, const std::string& run_id) {
  if (run_id.empty()) return;
  {
    const std::lock_guard lock(mutex_);
    auto [it, inserted] = run_ids_.try_emplace(endpoint, run_id);
    if (inserted || it->second == run_id) return;
    it->second = run_id;
  }
  restarted(endpoint);
}

void ServerIdentities::restarted(std::string_view endpoint) {
  restarts_.fetch_add(1, std::memory_order_relaxed);
  const std::lock_guard dispatching(dispatch_mutex_);
  std::vector<ServerRestartHandler> handlers;
  {
    const std::lock_guard lock(mutex_);
    handlers.reserve(handlers_.size());
    for (const auto& [id, handler] : handlers_) handlers.push_back(handler);
  }
  const ServerRestart restart{.endpoint = endpoint};
  for (const ServerRestartHandler& handler : handlers) handler(restart);
}

}  // namespace turnstile::redis
