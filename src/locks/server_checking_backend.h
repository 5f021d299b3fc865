// locks/server_checking_backend.h
//
// The Backend a Client's locks call through when ClientOptions::server_check
// is warn: before the first script call (eval, eval_synced, send_eval;
// whichever comes first, on whichever thread), it runs check_server() on
// the backend it wraps, once, and reports a server that evicts lock keys
// to `report` as an UnsafeServerError (turnstile/server_check.h). A server
// found safe or unknown reports nothing. A check that reaches no master
// fails the call with what asking failed with (the call would have), and
// the next call checks again. Calls made by other threads meanwhile do not
// wait for the check. Everything else is
// passed through (ForwardingBackend).
//
// A server found evicting is also listened to: the backend subscribes to
// `__keyevent@<db>__:evicted` (db from CLIENT INFO, else 0) and tells the
// eviction handler the key of every eviction Redis reports, so holders
// learn of it at once (Watchdog::renew_key_now). Redis publishes these
// only with `notify-keyspace-events` containing E and e (or A); without,
// nothing arrives and holders learn at their next renewal. Standalone and
// Sentinel only: a cluster's keyspace events stay on the node that
// evicted, and one subscription reaches one node.

#ifndef TURNSTILE_LOCKS_SERVER_CHECKING_BACKEND_H_
#define TURNSTILE_LOCKS_SERVER_CHECKING_BACKEND_H_

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "turnstile/backend.h"
#include "turnstile/server_check.h"

namespace turnstile::detail {

class ServerCheckingBackend final : public ForwardingBackend {
 public:
  // `report` must not throw.
  ServerCheckingBackend(std::shared_ptr<Backend> inner, std::function<void(std::exception_ptr)> report);

  Reply eval(const Script& script, const std::vector<std::string>& keys, const std::vector<std::string>& args) override;
  SyncedReply eval_synced(const Script& script, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args) override;
  SyncedReply eval_synced_within(const Script& script, const std::vector<std::string>& keys,
                                 const std::vector<std::string>& args, const EvalOptions& options) override;
  std::unique_ptr<PendingReply> send_eval(const Script& script, const std::vector<std::string>& keys,
                                          const std::vector<std::string>& args, EvalSync sync) override;

  // Who is told an evicted key (the file comment); called on the
  // backend's pub/sub thread, must not block. Set once, before any call.
  void set_eviction_handler(std::function<void(const std::string&)> handler);

 private:
  // Runs the check if no call did yet. When no master could be asked (or
  // the masters could not be found), throws what asking failed with, as
  // the call itself would have, and leaves the check to the next call.
  void check_once();
  void listen_for_evictions(const ServerSafety& safety) noexcept;

  const std::function<void(std::exception_ptr)> report_;
  std::function<void(const std::string&)> on_evicted_;
  std::atomic<bool> checked_{false};
  // Made by the one check; destroyed before the inner backend (the base).
  Subscription evictions_;
};

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_SERVER_CHECKING_BACKEND_H_
