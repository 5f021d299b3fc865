#include "redis/pending_eval.h"

#include <algorithm>
#include <utility>

#include "core/check.h"
#include "core/script_call.h"
#include "redis/node.h"
#include "turnstile/errors.h"

namespace turnstile::redis {

PendingEval::PendingEval(ConnectionPool::Lease lease, const Script& script, std::vector<std::string> evalsha,
                         GrantSync sync, std::shared_ptr<Counters> counters)
    : lease_(std::move(lease)),
      script_(script),
      evalsha_(std::move(evalsha)),
      sync_(std::move(sync)),
      counters_(std::move(counters)) {
  TURNSTILE_CHECK(counters_ != nullptr);
  TURNSTILE_CHECK(lease_);
  TURNSTILE_CHECK(!evalsha_.empty());
  TURNSTILE_CHECK_MSG(sync_.pipelined.size() == (sync_.replicas > 0 ? 1u : 0u),
                      "WAIT is sent exactly when replicas must acknowledge");
  try {
    send_step();
  } catch (const std::exception&) {
    fail();
  }
}

void PendingEval::send_step() {
  TURNSTILE_CHECK(!done() && lease_);
  replies_.clear();
  if (step_ == Step::load) {
    lease_->append(script_load_argv(script_));
    expected_ = 1;
  } else if (step_ == Step::fsync) {
    lease_->append(sync_.waitaof);
    expected_ = 1;
  } else {
    lease_->append(evalsha_);
    for (const std::vector<std::string>& wait : sync_.pipelined) lease_->append(wait);
    expected_ = 1 + sync_.pipelined.size();
  }
  TURNSTILE_CHECK(expected_ == 1 || (expected_ == 2 && (step_ == Step::call || step_ == Step::call_again)));
  lease_->flush();
}

void PendingEval::take_replies() {
  // At most every reply of every step: call (2) + load (1) + call again (2)
  // + fsync (1).
  constexpr int kMaxReplies = 6;
  for (int taken = 0; taken < kMaxReplies && !done(); ++taken) {
    TURNSTILE_CHECK(replies_.size() < expected_);
    std::optional<Reply> reply = lease_->next_reply();
    if (!reply) return;
    replies_.push_back(std::move(*reply));
    if (replies_.size() == expected_) finish_step();
  }
}

void PendingEval::finish_step() {
  TURNSTILE_CHECK(replies_.size() == expected_ && !replies_.empty());
  switch (step_) {
    case Step::load:
      check_script_loaded(script_, replies_.front());
      counters_->script_loads.loaded(lease_->endpoint(), script_);
      step_ = Step::call_again;
      send_step();
      return;
    case Step::call:
    case Step::call_again:
      if (step_ == Step::call && is_noscript(replies_.front())) {
        step_ = Step::load;
        send_step();
        return;
      }
      if (sync_.aof() && !replies_.front().is_error()) {
        // The script answered: its writes are flushed (as Node::eval_synced).
        call_replies_ = std::move(replies_);
        step_ = Step::fsync;
        send_step();
        return;
      }
      break;
    case Step::fsync:
      break;
  }
  const bool fsynced = step_ == Step::fsync;
  std::vector<Reply>& call = fsynced ? call_replies_ : replies_;
  // Raised before the WAIT reply is looked at, as in Node::eval_synced.
  Reply reply = raise_if_error(std::move(call.front()));
  const std::vector<Reply> wait_replies(std::make_move_iterator(call.begin() + 1), std::make_move_iterator(call.end()));
  const ReplicaAck ack = grant_ack(sync_, wait_replies, fsynced ? &replies_.front() : nullptr, lease_->endpoint());
  result_ = SyncedReply{std::move(reply), ack};
  lease_.give_back();
}

void PendingEval::fail() noexcept {
  error_ = std::current_exception();
  TURNSTILE_CHECK_MSG(error_ != nullptr, "fail() runs in a catch block");
  TURNSTILE_CHECK(!result_);
  // A broken connection goes back for the pool to drop; a healthy one with
  // replies still due (bad_alloc halfway) must never be lent again.
  if (lease_ && !lease_->broken() && replies_.size() < expected_) {
    lease_.drop();
  } else {
    lease_.give_back();
  }
}

std::chrono::steady_clock::time_point wait_deadline(std::chrono::nanoseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  if (timeout >= Clock::time_point::max() - start) return Clock::time_point::max();
  return start + std::max<std::chrono::nanoseconds>(timeout, {});
}

bool PendingEval::wait_for(std::chrono::nanoseconds timeout) {
  if (done()) return true;
  const auto deadline = wait_deadline(timeout);
  try {
    for (int reads = 0; reads < kMaxReadsPerWait; ++reads) {
      take_replies();
      if (done()) return true;
      if (!lease_->wait_readable(deadline)) return false;
      lease_->read_available();  // does not block: input (or EOF) is there
    }
  } catch (const std::exception&) {
    fail();
  }
  return done();
}

SyncedReply PendingEval::get() {
  TURNSTILE_CHECK_MSG(!taken_, "get() is called once");
  taken_ = true;
  try {
    for (int reads = 0; reads < kMaxReadsPerWait && !done(); ++reads) {
      take_replies();
      if (done()) break;
      lease_->read_available();  // blocks up to the command timeout, then TimeoutError
    }
    if (!done())
      throw ProtocolError("redis " + lease_->endpoint() + ": no complete reply after " +
                          std::to_string(kMaxReadsPerWait) + " reads");
  } catch (const std::exception&) {
    fail();
  }
  TURNSTILE_CHECK(done());
  TURNSTILE_CHECK_MSG((error_ != nullptr) != result_.has_value(), "a result or an error, never both");
  if (error_ != nullptr) std::rethrow_exception(error_);
  return std::move(*result_);
}

}  // namespace turnstile::redis
