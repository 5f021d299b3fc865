// locks/measured_backend.h
//
// The Backend a Client's locks call through: the user's backend, with the
// time of every script call recorded in the client's metrics
// (turnstile/metrics.h, script_round_trip), on the client's Runtime clock.
// A pipelined call (send_eval) is timed from sending until its outcome is
// in (wait_for() says so, or get() returns). Everything else is passed
// through; subscriptions are the inner backend's own.

#ifndef TURNSTILE_LOCKS_MEASURED_BACKEND_H_
#define TURNSTILE_LOCKS_MEASURED_BACKEND_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "locks/metrics_recorder.h"
#include "turnstile/backend.h"
#include "turnstile/runtime.h"

namespace turnstile::detail {

class MeasuredBackend final : public Backend {
 public:
  MeasuredBackend(std::shared_ptr<Backend> inner, std::shared_ptr<Runtime> runtime,
                  std::shared_ptr<MetricsRecorder> metrics);

  Reply eval(const Script& script, const std::vector<std::string>& keys, const std::vector<std::string>& args) override;
  SyncedReply eval_synced(const Script& script, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args) override;
  std::unique_ptr<PendingReply> send_eval(const Script& script, const std::vector<std::string>& keys,
                                          const std::vector<std::string>& args, EvalSync sync) override;
  Reply command(const std::vector<std::string>& argv) override { return inner_->command(argv); }
  Subscription subscribe(std::string_view channel, PubSubHandler handler) override {
    return inner_->subscribe(channel, std::move(handler));
  }
  Subscription subscribe_if_confirmed(std::string_view channel, const PubSubHandler& handler) override {
    return inner_->subscribe_if_confirmed(channel, handler);
  }
  std::string describe() const override { return inner_->describe(); }
  std::string_view publish_command() const override { return inner_->publish_command(); }
  BackendCounters counters() const override { return inner_->counters(); }

  Backend& inner() const { return *inner_; }

 protected:
  // Never called: every Subscription handed out belongs to the inner backend.
  void unsubscribe(std::uint64_t id) noexcept override;

 private:
  const std::shared_ptr<Backend> inner_;
  const std::shared_ptr<Runtime> runtime_;
  const std::shared_ptr<MetricsRecorder> metrics_;
};

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_MEASURED_BACKEND_H_
