// benchmarks/handoff_trace.h
//
// Where the time of a real forced handoff goes, measured on the handoffs
// themselves rather than on a reconstruction (handoff_budget.h times the
// physical floor part by part; this times what the library does).
//
// HandoffTrace is a Backend that passes every call on to the backend it
// wraps and stamps, on the steady clock:
//
//   * release_sent: a lock's release script (name ending "_unlock" or
//     "_release") about to be sent, by any thread;
//   * message: a pub/sub message handed to the subscription handlers (on
//     the backend's subscriber thread);
//   * per thread, the latest other script call's send and reply (a
//     waiter's acquire attempts).
//
// A contender that just acquired after a handoff reads the stamps and
// splits the gap (previous holder's release call -> its acquire return)
// into consecutive parts (HandoffParts). Only handoffs woken by a message
// count, of two kinds:
//
//   * woken, then acquired: the release was sent after the release call,
//     the message arrived after that, and the successful attempt was sent
//     after the message (five parts);
//   * granted (a fair lock's direct handoff): the release script granted
//     the lock and its message carried the grant, so the waiter's latest
//     attempt went out before the release was sent and the acquire call
//     returned after the message (three parts: acquire_script_us and
//     return_us stay zero, and wake_up_us runs to the return).
//
// Meant for one process and one key (the forced-handoff shapes run in
// process); stamps from another key or process would not line up.

#ifndef TURNSTILE_BENCHMARKS_HANDOFF_TRACE_H_
#define TURNSTILE_BENCHMARKS_HANDOFF_TRACE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/backend.h"

namespace turnstile::benchmarks {

// One handoff, in microseconds; the parts add up to the gap.
struct HandoffParts {
  double release_prepare_us = 0;     // release call -> release script sent
  double release_to_message_us = 0;  // release script sent -> message at the subscriber thread
  double wake_up_us = 0;             // message -> the woken waiter sends its acquire script
                                     // (granted: message -> the acquire call returns)
  double acquire_script_us = 0;      // that script's round trip (granted: 0)
  double return_us = 0;              // its reply -> the acquire call returns (granted: 0)
  bool granted = false;              // the release message carried the grant
};

class HandoffTrace final : public ForwardingBackend {
 public:
  explicit HandoffTrace(std::shared_ptr<Backend> inner);

  // The parts of the handoff the calling thread's acquisition just ended,
  // acquired at `acquired_ns`, the previous holder having called release
  // at `release_call_ns` (both steady_now_ns()); nullopt if the stamps do
  // not show a waiter woken by the release message.
  std::optional<HandoffParts> parts_of_handoff(std::int64_t release_call_ns, std::int64_t acquired_ns) const;

  Reply eval(const Script& script, const std::vector<std::string>& keys, const std::vector<std::string>& args) override;
  SyncedReply eval_synced(const Script& script, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args) override;
  std::unique_ptr<PendingReply> send_eval(const Script& script, const std::vector<std::string>& keys,
                                          const std::vector<std::string>& args, EvalSync sync) override;
  Subscription subscribe(std::string_view channel, PubSubHandler handler) override;
  Subscription subscribe_if_confirmed(std::string_view channel, const PubSubHandler& handler) override;

 private:
  // Stamps the send of `script` (release or attempt) and returns whether it
  // is an attempt, whose reply the caller stamps.
  bool stamp_send(const Script& script);
  PubSubHandler stamping(PubSubHandler handler);

  std::atomic<std::int64_t> release_sent_ns_{0};
  // Shared with the handlers, which the inner backend may keep after this.
  std::shared_ptr<std::atomic<std::int64_t>> message_ns_;
};

// The median of each part over those of `samples` whose `granted` is
// `granted` (all zero if there are none).
HandoffParts median_parts(const std::vector<HandoffParts>& samples, bool granted);

}  // namespace turnstile::benchmarks

#endif  // TURNSTILE_BENCHMARKS_HANDOFF_TRACE_H_
