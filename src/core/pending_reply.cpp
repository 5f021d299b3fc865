#include "core/pending_reply.h"

#include <utility>

#include "core/check.h"

namespace turnstile {

SyncedReply CompletedReply::get() {
  TURNSTILE_CHECK_MSG((reply_.has_value() != (error_ != nullptr)), "get() is called once");
  if (error_) {
    std::exception_ptr error = std::move(error_);
    error_ = nullptr;
    std::rethrow_exception(error);
  }
  SyncedReply reply = std::move(*reply_);
  reply_.reset();
  return reply;
}

std::unique_ptr<PendingReply> complete_now(const std::function<SyncedReply()>& call) {
  try {
    return std::make_unique<CompletedReply>(call());
  } catch (const std::exception&) {
    return std::make_unique<CompletedReply>(std::current_exception());
  }
}

std::unique_ptr<PendingReply> Backend::send_eval(const Script& script, const std::vector<std::string>& keys,
                                                 const std::vector<std::string>& args, EvalSync sync) {
  return complete_now([&] {
    if (sync == EvalSync::replicas) return eval_synced(script, keys, args);
    return SyncedReply{eval(script, keys, args), ReplicaAck{}};
  });
}

std::vector<std::unique_ptr<PendingReply>> Backend::send_evals(std::vector<EvalRequest> calls) {
  std::vector<std::unique_ptr<PendingReply>> pending;
  pending.reserve(calls.size());
  for (const EvalRequest& call : calls) {
    TURNSTILE_CHECK(call.script != nullptr);
    pending.push_back(send_eval(*call.script, call.keys, call.args, EvalSync::none));
  }
  return pending;
}

}  // namespace turnstile
