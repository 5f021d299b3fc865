// ForwardingBackend (turnstile/backend.h): every call passed on unchanged.

#include <utility>

#include "core/check.h"
#include "turnstile/backend.h"

namespace turnstile {

ForwardingBackend::ForwardingBackend(std::shared_ptr<Backend> inner) : inner_(std::move(inner)) {
  TURNSTILE_CHECK(inner_ != nullptr);
}

Reply ForwardingBackend::eval(const Script& script, const std::vector<std::string>& keys,
                              const std::vector<std::string>& args) {
  return inner_->eval(script, keys, args);
}

SyncedReply ForwardingBackend::eval_synced(const Script& script, const std::vector<std::string>& keys,
                                           const std::vector<std::string>& args) {
  return inner_->eval_synced(script, keys, args);
}

std::unique_ptr<PendingReply> ForwardingBackend::send_eval(const Script& script, const std::vector<std::string>& keys,
                                                           const std::vector<std::string>& args, EvalSync sync) {
  return inner_->send_eval(script, keys, args, sync);
}

Reply ForwardingBackend::command(const std::vector<std::string>& argv) { return inner_->command(argv); }

std::vector<MasterReply> ForwardingBackend::command_each_master(const std::vector<std::string>& argv) {
  return inner_->command_each_master(argv);
}

ScanResult ForwardingBackend::scan_each_master(const ScanOptions& options) { return inner_->scan_each_master(options); }

Subscription ForwardingBackend::subscribe(std::string_view channel, PubSubHandler handler) {
  return inner_->subscribe(channel, std::move(handler));
}

Subscription ForwardingBackend::subscribe_if_confirmed(std::string_view channel, const PubSubHandler& handler) {
  return inner_->subscribe_if_confirmed(channel, handler);
}

std::string ForwardingBackend::describe() const { return inner_->describe(); }

std::string_view ForwardingBackend::publish_command() const { return inner_->publish_command(); }

std::optional<int> ForwardingBackend::cluster_slot(std::string_view key) const { return inner_->cluster_slot(key); }

BackendCounters ForwardingBackend::counters() const { return inner_->counters(); }

RestartWatch ForwardingBackend::watch_restarts(ServerRestartHandler handler) {
  return inner_->watch_restarts(std::move(handler));
}

RestartWatch ForwardingBackend::watch_reconnects(ServerRestartHandler handler) {
  return inner_->watch_reconnects(std::move(handler));
}

void ForwardingBackend::unsubscribe(std::uint64_t id) noexcept {
  (void)id;
  TURNSTILE_UNREACHABLE("a ForwardingBackend hands out the inner backend's subscriptions only");
}

}  // namespace turnstile
