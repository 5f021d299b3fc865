#include "redis/pipelined_evals.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <optional>
#include <utility>

#include "core/check.h"
#include "core/script_call.h"
#include "redis/pending_eval.h"
#include "turnstile/errors.h"
#include "turnstile/mutex.h"

namespace turnstile::redis {
namespace {

// The calls of one batch and what is in flight for them on their
// connection, in the order the server answers.
class EvalPipeline {
 public:
  EvalPipeline(ConnectionPool::Lease lease, std::vector<EvalRequest> calls, std::shared_ptr<Counters> counters)
      : lease_(std::move(lease)),
        calls_(std::move(calls)),
        counters_(std::move(counters)),
        replies_(calls_.size()),
        errors_(calls_.size()),
        sent_again_(calls_.size(), false) {
    TURNSTILE_CHECK(lease_ && counters_ != nullptr);
    TURNSTILE_CHECK(!calls_.empty() && calls_.size() <= kMaxPipelinedEvals);
    const MutexLock guard(mutex_);
    try {
      for (std::size_t i = 0; i < calls_.size(); ++i) {
        TURNSTILE_CHECK(calls_[i].script != nullptr);
        lease_->append(evalsha_argv(*calls_[i].script, calls_[i].keys, calls_[i].args));
        in_flight_.push_back(InFlight{.kind = InFlight::Kind::call, .call = i});
      }
      lease_->flush();
    } catch (const std::exception&) {
      fail_locked();
    }
  }

  EvalPipeline(const EvalPipeline&) = delete;
  EvalPipeline& operator=(const EvalPipeline&) = delete;
  // The lease's destructor drops a connection with replies still due.
  ~EvalPipeline() = default;

  bool wait_for(std::size_t call, std::chrono::nanoseconds timeout) {
    const MutexLock guard(mutex_);
    if (decided(call)) return true;
    const auto deadline = wait_deadline(timeout);
    try {
      for (int reads = 0; reads < kMaxReadsPerWait; ++reads) {
        take_replies_locked();
        if (decided(call)) return true;
        if (!lease_->wait_readable(deadline)) return false;
        lease_->read_available();  // does not block: input (or EOF) is there
      }
    } catch (const std::exception&) {
      fail_locked();
    }
    return decided(call);
  }

  SyncedReply get(std::size_t call) {
    const MutexLock guard(mutex_);
    try {
      for (int reads = 0; reads < kMaxReadsPerWait && !decided(call); ++reads) {
        take_replies_locked();
        if (decided(call)) break;
        lease_->read_available();  // blocks up to the command timeout, then TimeoutError
      }
      if (!decided(call)) {
        throw ProtocolError("redis " + lease_->endpoint() + ": no complete reply after " +
                            std::to_string(kMaxReadsPerWait) + " reads");
      }
    } catch (const std::exception&) {
      fail_locked();
    }
    TURNSTILE_CHECK(decided(call));
    TURNSTILE_CHECK_MSG((errors_[call] != nullptr) != replies_[call].has_value(), "a reply or an error, never both");
    if (errors_[call] != nullptr) std::rethrow_exception(errors_[call]);
    // Error replies raised as the call's own outcome (PipelinedReply
    // takes it once).
    return SyncedReply{raise_if_error(std::move(*replies_[call])), ReplicaAck{}};
  }

 private:
  // One reply due on the connection: a call's (sent, or sent again after
  // NOSCRIPT), or the SCRIPT LOAD a call's NOSCRIPT asked for.
  struct InFlight {
    enum class Kind : std::uint8_t { call, load };
    Kind kind = Kind::call;
    std::size_t call = 0;
  };

  bool decided(std::size_t call) const TURNSTILE_REQUIRES(mutex_) {
    TURNSTILE_CHECK(call < calls_.size());
    return replies_[call].has_value() || errors_[call] != nullptr;
  }

  // Takes the replies hiredis has buffered, in the order they answer.
  void take_replies_locked() TURNSTILE_REQUIRES(mutex_) {
    // Each call's reply, its reply once more, and a load per call at most.
    const std::size_t max_replies = 3 * calls_.size();
    for (std::size_t taken = 0; taken < max_replies && !in_flight_.empty(); ++taken) {
      std::optional<Reply> reply = lease_->next_reply();
      if (!reply) return;
      const InFlight answered = in_flight_.front();
      in_flight_.pop_front();
      take_locked(answered, std::move(*reply));
    }
    if (in_flight_.empty() && lease_) lease_.give_back();
  }

  void take_locked(const InFlight& answered, Reply reply) TURNSTILE_REQUIRES(mutex_) {
    const EvalRequest& call = calls_[answered.call];
    if (answered.kind == InFlight::Kind::load) {
      try {
        check_script_loaded(*call.script, reply);
        counters_->script_loads.loaded(lease_->endpoint(), *call.script);
      } catch (const std::exception&) {
        // The call sent again behind the load fails with this, not with
        // the NOSCRIPT it will get.
        if (!decided(answered.call)) errors_[answered.call] = std::current_exception();
      }
      return;
    }
    if (is_noscript(reply) && !sent_again_[answered.call]) {
      // Loaded once per batch, before the first call sent again; the
      // calls of that script sent again later find it loaded.
      sent_again_[answered.call] = true;
      if (std::find(loaded_.begin(), loaded_.end(), call.script) == loaded_.end()) {
        loaded_.push_back(call.script);
        lease_->append(script_load_argv(*call.script));
        in_flight_.push_back(InFlight{.kind = InFlight::Kind::load, .call = answered.call});
      }
      lease_->append(evalsha_argv(*call.script, call.keys, call.args));
      in_flight_.push_back(InFlight{.kind = InFlight::Kind::call, .call = answered.call});
      lease_->flush();
      return;
    }
    if (!decided(answered.call)) replies_[answered.call] = std::move(reply);
  }

  // The current exception is the outcome of every call not answered yet;
  // the connection is given back if nothing is due on it, else dropped.
  void fail_locked() noexcept TURNSTILE_REQUIRES(mutex_) {
    const std::exception_ptr error = std::current_exception();
    TURNSTILE_CHECK_MSG(error != nullptr, "fail_locked() runs in a catch block");
    for (std::size_t i = 0; i < calls_.size(); ++i) {
      if (!decided(i)) errors_[i] = error;
    }
    if (lease_ && !lease_->broken() && !in_flight_.empty()) {
      lease_.drop();
    } else if (lease_) {
      lease_.give_back();
    }
    in_flight_.clear();
  }

  Mutex mutex_;
  ConnectionPool::Lease lease_ TURNSTILE_GUARDED_BY(mutex_);
  const std::vector<EvalRequest> calls_;
  const std::shared_ptr<Counters> counters_;
  std::deque<InFlight> in_flight_ TURNSTILE_GUARDED_BY(mutex_);
  std::vector<std::optional<Reply>> replies_ TURNSTILE_GUARDED_BY(mutex_);
  std::vector<std::exception_ptr> errors_ TURNSTILE_GUARDED_BY(mutex_);
  std::vector<bool> sent_again_ TURNSTILE_GUARDED_BY(mutex_);
  std::vector<const Script*> loaded_ TURNSTILE_GUARDED_BY(mutex_);  // SCRIPT LOAD sent on this connection
};

// One call's view of its batch.
class PipelinedReply final : public PendingReply {
 public:
  PipelinedReply(std::shared_ptr<EvalPipeline> pipeline, std::size_t call)
      : pipeline_(std::move(pipeline)), call_(call) {
    TURNSTILE_CHECK(pipeline_ != nullptr);
  }

  bool wait_for(std::chrono::nanoseconds timeout) override { return pipeline_->wait_for(call_, timeout); }

  SyncedReply get() override {
    TURNSTILE_CHECK_MSG(!taken_, "get() is called once");
    taken_ = true;
    return pipeline_->get(call_);
  }

 private:
  const std::shared_ptr<EvalPipeline> pipeline_;
  const std::size_t call_;
  bool taken_ = false;
};

}  // namespace

std::vector<std::unique_ptr<PendingReply>> pipeline_evals(ConnectionPool::Lease lease, std::vector<EvalRequest> calls,
                                                          std::shared_ptr<Counters> counters) {
  const std::size_t count = calls.size();
  const auto pipeline = std::make_shared<EvalPipeline>(std::move(lease), std::move(calls), std::move(counters));
  std::vector<std::unique_ptr<PendingReply>> pending;
  pending.reserve(count);
  for (std::size_t i = 0; i < count; ++i) pending.push_back(std::make_unique<PipelinedReply>(pipeline, i));
  return pending;
}

}  // namespace turnstile::redis
