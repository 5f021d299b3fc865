// locks/engine/measured_backend.h
//
// The Backend a Client's locks call through: the user's backend, with the
// time of every script call recorded in the client's metrics
// (turnstile/metrics.h, script_round_trip), on the client's Runtime clock.
// A pipelined call (send_eval) is timed from sending until its outcome is
// in (wait_for() says so, or get() returns). Everything else is passed
// through (ForwardingBackend); subscriptions are the inner backend's own.

#ifndef TURNSTILE_LOCKS_ENGINE_MEASURED_BACKEND_H_
#define TURNSTILE_LOCKS_ENGINE_MEASURED_BACKEND_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "locks/engine/metrics_recorder.h"
#include "turnstile/backend.h"
#include "turnstile/runtime.h"

namespace turnstile::detail {

class MeasuredBackend final : public ForwardingBackend {
 public:
  MeasuredBackend(std::shared_ptr<Backend> inner, std::shared_ptr<Runtime> runtime,
                  std::shared_ptr<MetricsRecorder> metrics);

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

 private:
  const std::shared_ptr<Runtime> runtime_;
  const std::shared_ptr<MetricsRecorder> metrics_;
};

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_ENGINE_MEASURED_BACKEND_H_
