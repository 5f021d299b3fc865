#include "locks/engine/measured_backend.h"

#include <utility>

#include "core/check.h"

namespace turnstile::detail {
namespace {

// Records the time from construction to destruction (the reply, or the
// failure thrown).
class RoundTrip {
 public:
  RoundTrip(Runtime& runtime, MetricsRecorder& metrics) : runtime_(runtime), metrics_(metrics), sent_(runtime.now()) {}
  ~RoundTrip() { metrics_.script_round_trip(runtime_.now() - sent_); }
  RoundTrip(const RoundTrip&) = delete;
  RoundTrip& operator=(const RoundTrip&) = delete;

 private:
  Runtime& runtime_;
  MetricsRecorder& metrics_;
  const Instant sent_;
};

class MeasuredPendingReply final : public PendingReply {
 public:
  MeasuredPendingReply(std::unique_ptr<PendingReply> inner, Runtime& runtime, MetricsRecorder& metrics)
      : inner_(std::move(inner)), runtime_(runtime), metrics_(metrics), sent_(runtime.now()) {}

  bool wait_for(std::chrono::nanoseconds timeout) override {
    const bool in = inner_->wait_for(timeout);
    if (in) record();
    return in;
  }

  SyncedReply get() override {
    try {
      SyncedReply reply = inner_->get();
      record();
      return reply;
    } catch (...) {
      record();
      throw;
    }
  }

 private:
  // Once, when the outcome is in. Abandoned before that: not a round trip.
  void record() {
    if (recorded_) return;
    recorded_ = true;
    metrics_.script_round_trip(runtime_.now() - sent_);
  }

  std::unique_ptr<PendingReply> inner_;
  Runtime& runtime_;
  MetricsRecorder& metrics_;
  const Instant sent_;
  bool recorded_ = false;
};

}  // namespace

MeasuredBackend::MeasuredBackend(std::shared_ptr<Backend> inner, std::shared_ptr<Runtime> runtime,
                                 std::shared_ptr<MetricsRecorder> metrics)
    : ForwardingBackend(std::move(inner)), runtime_(std::move(runtime)), metrics_(std::move(metrics)) {
  TURNSTILE_CHECK(runtime_ != nullptr && metrics_ != nullptr);
}

Reply MeasuredBackend::eval(const Script& script, const std::vector<std::string>& keys,
                            const std::vector<std::string>& args) {
  RoundTrip round_trip(*runtime_, *metrics_);
  return ForwardingBackend::eval(script, keys, args);
}

SyncedReply MeasuredBackend::eval_synced(const Script& script, const std::vector<std::string>& keys,
                                         const std::vector<std::string>& args) {
  RoundTrip round_trip(*runtime_, *metrics_);
  return ForwardingBackend::eval_synced(script, keys, args);
}

SyncedReply MeasuredBackend::eval_synced_within(const Script& script, const std::vector<std::string>& keys,
                                                const std::vector<std::string>& args, const EvalOptions& options) {
  RoundTrip round_trip(*runtime_, *metrics_);
  return inner().eval_synced_within(script, keys, args, options);
}

Subscription MeasuredBackend::subscribe_within(std::string_view channel, PubSubHandler handler,
                                               const SubscribeOptions& options) {
  return inner().subscribe_within(channel, std::move(handler), options);
}

std::unique_ptr<PendingReply> MeasuredBackend::send_eval(const Script& script, const std::vector<std::string>& keys,
                                                         const std::vector<std::string>& args, EvalSync sync) {
  return std::make_unique<MeasuredPendingReply>(ForwardingBackend::send_eval(script, keys, args, sync), *runtime_,
                                                *metrics_);
}

std::unique_ptr<PendingReply> MeasuredBackend::send_eval_within(const Script& script,
                                                                const std::vector<std::string>& keys,
                                                                const std::vector<std::string>& args, EvalSync sync,
                                                                const EvalOptions& options) {
  return std::make_unique<MeasuredPendingReply>(inner().send_eval_within(script, keys, args, sync, options), *runtime_,
                                                *metrics_);
}

std::vector<std::unique_ptr<PendingReply>> MeasuredBackend::send_evals(std::vector<EvalRequest> calls) {
  std::vector<std::unique_ptr<PendingReply>> pending = inner().send_evals(std::move(calls));
  for (std::unique_ptr<PendingReply>& sent : pending) {
    sent = std::make_unique<MeasuredPendingReply>(std::move(sent), *runtime_, *metrics_);
  }
  return pending;
}

}  // namespace turnstile::detail
