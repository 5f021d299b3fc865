// core/pending_reply.h
//
// A PendingReply (turnstile/backend.h) whose outcome is already known: the
// default Backend::send_eval() runs the call to the end and returns one of
// these, and a backend that must answer synchronously (the fake without a
// simulated world) can too.

#ifndef TURNSTILE_CORE_PENDING_REPLY_H_
#define TURNSTILE_CORE_PENDING_REPLY_H_

#include <exception>
#include <functional>
#include <memory>
#include <optional>

#include "turnstile/backend.h"

namespace turnstile {

class CompletedReply final : public PendingReply {
 public:
  explicit CompletedReply(SyncedReply reply) : reply_(std::move(reply)) {}
  explicit CompletedReply(std::exception_ptr error) : error_(std::move(error)) {}

  bool wait_for(std::chrono::nanoseconds) override { return true; }
  SyncedReply get() override;

 private:
  std::optional<SyncedReply> reply_;
  std::exception_ptr error_;
};

// Runs `call` now; its reply, or the std::exception it threw, becomes the
// outcome. Anything else thrown (a simulated crash unwinding) propagates.
std::unique_ptr<PendingReply> complete_now(const std::function<SyncedReply()>& call);

}  // namespace turnstile

#endif  // TURNSTILE_CORE_PENDING_REPLY_H_
