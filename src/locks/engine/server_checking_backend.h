// locks/engine/server_checking_backend.h
//
// The Backend a Client's locks call through when ClientOptions::server_check
// is warn: before the first script call (eval, eval_synced, send_eval;
// whichever comes first, on whichever thread), it runs check_server() on
// the backend it wraps, once, and reports a server that evicts lock keys
// to `report` as an UnsafeServerError (turnstile/server_check.h). A server
// found safe or unknown reports nothing. A check that reaches no master
// fails the calls that waited for it with what asking failed with (the
// call would have), and the next call checks again.
//
// Every call made before the check finished waits for that one check,
// each only as long as its own bound (started by a call with a bound, the
// check runs on a task of its own, Runtime::spawn; by one without, on that
// call's thread, as nothing could leave it early): a call with EvalOptions::send_within (a wait's try, with
// what is left of its deadline) gives up when that passes, nothing sent,
// as a busy pool makes it (PoolExhaustedError): try_lock_for(50ms) against
// a stalled server returns false at 50 ms, not after the command timeout.
// The check goes on meanwhile, bounded by the backend's own timeouts; if
// it then fails, it is not remembered as done and the next call checks
// again. A call without a bound waits for the check to end. The task holds
// the wrapped backend, never this one: a Client may go while it runs.
// Everything else is passed through (ForwardingBackend).
//
// A checked server is also listened to: the check reads which keyspace
// events it publishes (CONFIG GET notify-keyspace-events: E with e, g or
// x, or A; with the check, before the calls waiting for it go on), and a
// task of its own subscribes to those of `__keyevent@<db>__:evicted`, `:del` and
// `:expired` (db from CLIENT INFO, else 0), and tells the key-lost handler
// the key of every such event, so holders learn of an evicted, deleted or
// expired lock at once (Watchdog::renew_key_now, one lookup per event),
// whatever the policy the check found (a policy set later still reports
// its evictions). Where CONFIG is refused, `evicted` alone is subscribed,
// if the server evicts. Events the server starts publishing after the
// check are not listened to; without any, holders learn at their next
// renewal or wipe check. Every such event of the database reaches every
// Client that listens. Standalone and Sentinel only: a cluster's keyspace
// events stay on the node that made them, and one subscription reaches
// one node.

#ifndef TURNSTILE_LOCKS_ENGINE_SERVER_CHECKING_BACKEND_H_
#define TURNSTILE_LOCKS_ENGINE_SERVER_CHECKING_BACKEND_H_

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "turnstile/backend.h"
#include "turnstile/mutex.h"
#include "turnstile/runtime.h"
#include "turnstile/server_check.h"

namespace turnstile::detail {

class ServerCheckingBackend final : public ForwardingBackend {
 public:
  // `report` must not throw.
  ServerCheckingBackend(std::shared_ptr<Backend> inner, std::shared_ptr<Runtime> runtime,
                        std::function<void(std::exception_ptr)> report);

  Reply eval(const Script& script, const std::vector<std::string>& keys, const std::vector<std::string>& args) override;
  SyncedReply eval_synced(const Script& script, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args) override;
  SyncedReply eval_synced_within(const Script& script, const std::vector<std::string>& keys,
                                 const std::vector<std::string>& args, const EvalOptions& options) override;
  std::unique_ptr<PendingReply> send_eval(const Script& script, const std::vector<std::string>& keys,
                                          const std::vector<std::string>& args, EvalSync sync) override;
  std::unique_ptr<PendingReply> send_eval_within(const Script& script, const std::vector<std::string>& keys,
                                                 const std::vector<std::string>& args, EvalSync sync,
                                                 const EvalOptions& options) override;
  // The batch passed on whole (Backend::send_evals).
  std::vector<std::unique_ptr<PendingReply>> send_evals(std::vector<EvalRequest> calls) override;
  // Passes the caller's bound on (Backend::subscribe_within).
  Subscription subscribe_within(std::string_view channel, PubSubHandler handler,
                                const SubscribeOptions& options) override;

  // Who is told an evicted, deleted or expired key (the file comment);
  // called on the backend's pub/sub thread, must not block. Set once,
  // before any call.
  void set_key_lost_handler(std::function<void(const std::string&)> handler);

  // One check: shared by the calls that wait for it and the task that runs
  // it (server_checking_backend.cpp).
  struct Run;

 private:
  // Returns once a check finished, started by this call or an earlier one,
  // if none did yet. Throws what the check failed with (no master could be
  // asked, the masters could not be found; the next call checks again),
  // or PoolExhaustedError when `within` passes first.
  void check_once(std::optional<Duration> within);

  const std::shared_ptr<Backend> checked_;
  const std::shared_ptr<Runtime> runtime_;
  const std::function<void(std::exception_ptr)> report_;
  std::function<void(const std::string&)> on_key_lost_;
  // A check finished and its finding was reported: no call waits again.
  std::atomic<bool> done_{false};
  Mutex mutex_;
  // The check running or done; null before the first call. A failed one
  // is replaced by the next call's.
  std::shared_ptr<Run> run_ TURNSTILE_GUARDED_BY(mutex_);
};

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_ENGINE_SERVER_CHECKING_BACKEND_H_
