#include "handoff_trace.h"

#include <algorithm>
#include <utility>

#include "latency.h"
#include "workload.h"

namespace turnstile::benchmarks {
namespace {

// The calling thread's latest attempt (any script but a release): sent and
// replied, steady_now_ns(). Per thread, shared by every HandoffTrace of
// the process (there is one per benchmark client).
thread_local std::int64_t t_attempt_sent_ns = 0;
thread_local std::int64_t t_attempt_reply_ns = 0;

bool is_release(std::string_view name) { return name.ends_with("_unlock") || name.ends_with("_release"); }

double micros(std::int64_t from_ns, std::int64_t to_ns) { return static_cast<double>(to_ns - from_ns) / 1e3; }

// Stamps the reply of an attempt when it goes out of scope (reply or throw).
class ReplyStamp {
 public:
  explicit ReplyStamp(bool attempt) : attempt_(attempt) {}
  ~ReplyStamp() {
    if (attempt_) t_attempt_reply_ns = steady_now_ns();
  }
  ReplyStamp(const ReplyStamp&) = delete;
  ReplyStamp& operator=(const ReplyStamp&) = delete;

 private:
  const bool attempt_;
};

}  // namespace

HandoffTrace::HandoffTrace(std::shared_ptr<Backend> inner)
    : ForwardingBackend(std::move(inner)), message_ns_(std::make_shared<std::atomic<std::int64_t>>(0)) {}

bool HandoffTrace::stamp_send(const Script& script) {
  const std::int64_t now_ns = steady_now_ns();
  if (is_release(script.name)) {
    release_sent_ns_.store(now_ns);
    return false;
  }
  t_attempt_sent_ns = now_ns;
  t_attempt_reply_ns = 0;
  return true;
}

Reply HandoffTrace::eval(const Script& script, const std::vector<std::string>& keys,
                         const std::vector<std::string>& args) {
  const ReplyStamp stamp(stamp_send(script));
  return ForwardingBackend::eval(script, keys, args);
}

SyncedReply HandoffTrace::eval_synced(const Script& script, const std::vector<std::string>& keys,
                                      const std::vector<std::string>& args) {
  const ReplyStamp stamp(stamp_send(script));
  return ForwardingBackend::eval_synced(script, keys, args);
}

std::unique_ptr<PendingReply> HandoffTrace::send_eval(const Script& script, const std::vector<std::string>& keys,
                                                      const std::vector<std::string>& args, EvalSync sync) {
  // The reply of a pipelined attempt is not stamped: its parts are left out.
  (void)stamp_send(script);
  return ForwardingBackend::send_eval(script, keys, args, sync);
}

PubSubHandler HandoffTrace::stamping(PubSubHandler handler) {
  return [message_ns = message_ns_, handler = std::move(handler)](const PubSubEvent& event) {
    if (event.kind == PubSubEvent::Kind::message) message_ns->store(steady_now_ns());
    handler(event);
  };
}

Subscription HandoffTrace::subscribe(std::string_view channel, PubSubHandler handler) {
  return ForwardingBackend::subscribe(channel, stamping(std::move(handler)));
}

Subscription HandoffTrace::subscribe_if_confirmed(std::string_view channel, const PubSubHandler& handler) {
  return ForwardingBackend::subscribe_if_confirmed(channel, stamping(handler));
}

std::optional<HandoffParts> HandoffTrace::parts_of_handoff(std::int64_t release_call_ns,
                                                           std::int64_t acquired_ns) const {
  const std::int64_t release_sent_ns = release_sent_ns_.load();
  const std::int64_t message_ns = message_ns_->load();
  const std::int64_t sent_ns = t_attempt_sent_ns;
  const std::int64_t reply_ns = t_attempt_reply_ns;
  const bool released_then_messaged =
      release_call_ns <= release_sent_ns && release_sent_ns <= message_ns && message_ns <= acquired_ns;
  if (!released_then_messaged) return std::nullopt;
  if (sent_ns < release_sent_ns && reply_ns <= release_sent_ns) {
    // Its last attempt (the offer) went out before the release: granted.
    return HandoffParts{
        .release_prepare_us = micros(release_call_ns, release_sent_ns),
        .release_to_message_us = micros(release_sent_ns, message_ns),
        .wake_up_us = micros(message_ns, acquired_ns),
        .granted = true,
    };
  }
  const bool woken_then_tried = message_ns <= sent_ns && sent_ns <= reply_ns && reply_ns <= acquired_ns;
  if (!woken_then_tried) return std::nullopt;
  return HandoffParts{
      .release_prepare_us = micros(release_call_ns, release_sent_ns),
      .release_to_message_us = micros(release_sent_ns, message_ns),
      .wake_up_us = micros(message_ns, sent_ns),
      .acquire_script_us = micros(sent_ns, reply_ns),
      .return_us = micros(reply_ns, acquired_ns),
  };
}

HandoffParts median_parts(const std::vector<HandoffParts>& samples, bool granted) {
  HandoffParts median{.granted = granted};
  const auto median_of = [&](double HandoffParts::*part) {
    std::vector<double> values;
    values.reserve(samples.size());
    for (const HandoffParts& sample : samples) {
      if (sample.granted == granted) values.push_back(sample.*part);
    }
    return percentile_us(std::move(values), 0.5);
  };
  median.release_prepare_us = median_of(&HandoffParts::release_prepare_us);
  median.release_to_message_us = median_of(&HandoffParts::release_to_message_us);
  median.wake_up_us = median_of(&HandoffParts::wake_up_us);
  median.acquire_script_us = median_of(&HandoffParts::acquire_script_us);
  median.return_us = median_of(&HandoffParts::return_us);
  return median;
}

}  // namespace turnstile::benchmarks
