#include "locks/server_checking_backend.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

#include "turnstile/errors.h"
#include "turnstile/server_check.h"

namespace turnstile::detail {
namespace {

// The database of the connection CLIENT INFO ran on ("... db=2 ..."), or
// 0 when it cannot be read (Redis before 6.2, an ACL user without it).
int connection_db(Backend& backend) {
  try {
    const Reply info = backend.command({"CLIENT", "INFO"});
    if (!info.is_bulk() && !info.is_status()) return 0;
    const std::string_view text = info.as_string();
    const std::size_t at = text.find(" db=");
    if (at == std::string_view::npos) return 0;
    int db = 0;
    const char* begin = text.data() + at + 4;
    if (std::from_chars(begin, text.data() + text.size(), db).ec != std::errc()) return 0;
    return db;
  } catch (...) {
    return 0;
  }
}

}  // namespace

ServerCheckingBackend::ServerCheckingBackend(std::shared_ptr<Backend> inner,
                                             std::function<void(std::exception_ptr)> report)
    : ForwardingBackend(std::move(inner)), report_(std::move(report)) {
  assert(report_);
}

void ServerCheckingBackend::check_once() {
  if (checked_.load(std::memory_order_acquire) || checked_.exchange(true, std::memory_order_acq_rel)) return;
  std::optional<ServerSafety> safety;
  try {
    safety = check_server(inner());
  } catch (...) {
    // The masters could not be found (a cluster's slot map): the call
    // fails as it would have, and the next one checks again.
    checked_.store(false, std::memory_order_release);
    throw;
  }
  if (!safety->masters.empty() && std::all_of(safety->masters.begin(), safety->masters.end(),
                                              [](const MasterSafety& master) { return master.failure != nullptr; })) {
    // No master could be asked: the call fails with what asking it failed
    // with (a TlsVerificationError stays one), and the next one checks
    // again.
    checked_.store(false, std::memory_order_release);
    std::rethrow_exception(safety->masters.front().failure);
  }
  if (!safety->evicts_locks()) return;
  try {
    report_(std::make_exception_ptr(UnsafeServerError(unsafe_server_message(*safety))));
  } catch (...) {
    // report_ must not throw; the lock goes on either way.
  }
  listen_for_evictions(*safety);
}

void ServerCheckingBackend::set_eviction_handler(std::function<void(const std::string&)> handler) {
  on_evicted_ = std::move(handler);
}

void ServerCheckingBackend::listen_for_evictions(const ServerSafety& safety) noexcept {
  if (!on_evicted_ || safety.masters.size() != 1) return;
  try {
    const std::string channel = "__keyevent@" + std::to_string(connection_db(inner())) + "__:evicted";
    evictions_ = inner().subscribe(channel, [handler = on_evicted_](const PubSubEvent& event) {
      if (event.kind == PubSubEvent::Kind::message) handler(std::string(event.payload));
    });
  } catch (...) {
    // Not allowed (an ACL without the channel) or not reachable: holders
    // learn of an eviction at their next renewal, as without events.
  }
}

Reply ServerCheckingBackend::eval(const Script& script, const std::vector<std::string>& keys,
                                  const std::vector<std::string>& args) {
  check_once();
  return ForwardingBackend::eval(script, keys, args);
}

SyncedReply ServerCheckingBackend::eval_synced(const Script& script, const std::vector<std::string>& keys,
                                               const std::vector<std::string>& args) {
  check_once();
  return ForwardingBackend::eval_synced(script, keys, args);
}

SyncedReply ServerCheckingBackend::eval_synced_within(const Script& script, const std::vector<std::string>& keys,
                                                      const std::vector<std::string>& args,
                                                      const EvalOptions& options) {
  check_once();
  return inner().eval_synced_within(script, keys, args, options);
}

std::unique_ptr<PendingReply> ServerCheckingBackend::send_eval(const Script& script,
                                                               const std::vector<std::string>& keys,
                                                               const std::vector<std::string>& args, EvalSync sync) {
  check_once();
  return ForwardingBackend::send_eval(script, keys, args, sync);
}

}  // namespace turnstile::detail
