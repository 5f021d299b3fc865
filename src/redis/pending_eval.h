// redis/pending_eval.h
//
// A script call pipelined on one leased pooled connection: what
// Node::send_eval() returns. The request is written at once; the replies are
// read when the caller asks, so one thread can have calls in flight on
// several servers.
//
// Steps, in eval_with_reload's order (core/script_call.h), each one write of
// its commands followed by their replies:
//
//   call        EVALSHA, then WAIT 1 <ms> if replica sync applies (as
//               Node::eval_synced pipelines them)
//   load        SCRIPT LOAD, only if `call` answered NOSCRIPT
//   call again  EVALSHA (and WAIT) once more
//   fsync       WAITAOF 1 0 <ms> with aof_sync, once the script answered
//               (GrantSync)
//
// wait_for() reads whatever has arrived, never waiting past its timeout, and
// sends the next step itself; get() reads the rest with blocking reads,
// each bounded by the connection's command timeout as in the blocking path.
// The outcome is that of Node::eval_synced: the reply (top-level error
// replies raised as ServerError), the follow-ups' replies checked
// (grant_ack), or
// the transport error naming the endpoint.
//
// The connection: given back to the pool as soon as the outcome is known
// and every reply sent for was read (a broken one is then dropped by the
// pool, with the idle ones if the server closed it); a pending destroyed
// earlier drops it (the lease's destructor), never to be lent again with a
// stale reply in flight.
//
// Used by one thread at a time.

#ifndef TURNSTILE_REDIS_PENDING_EVAL_H_
#define TURNSTILE_REDIS_PENDING_EVAL_H_

#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "redis/connection_pool.h"
#include "redis/node.h"
#include "turnstile/backend.h"
#include "turnstile/script.h"

namespace turnstile::redis {

// Reads wait_for() or get() make before they give up on a reply that keeps
// arriving in pieces (a bound on the loop, far above any lock script's
// reply).
inline constexpr int kMaxReadsPerWait = 1 << 16;

// Now + `timeout` for a wait_for(): a negative timeout only looks (now),
// and one beyond the clock's range saturates (no deadline).
std::chrono::steady_clock::time_point wait_deadline(std::chrono::nanoseconds timeout);

class PendingEval final : public PendingReply {
 public:
  // Sends the first step on `lease`'s connection, which has nothing in
  // flight. `evalsha` is the EVALSHA argv of `script` (which must outlive
  // the pending); `sync` what to pipeline after each EVALSHA (none when
  // empty). A failure to send becomes the outcome. A reload is counted in
  // `counters`.
  PendingEval(ConnectionPool::Lease lease, const Script& script, std::vector<std::string> evalsha, GrantSync sync,
              std::shared_ptr<Counters> counters);

  bool wait_for(std::chrono::nanoseconds timeout) override;
  SyncedReply get() override;

 private:
  enum class Step : std::uint8_t { call, load, call_again, fsync };

  bool done() const { return result_.has_value() || error_ != nullptr; }
  // Appends the commands of step_ and writes them out.
  void send_step();
  // Takes the replies hiredis has buffered; handles each completed step.
  void take_replies();
  // The replies of step_ are all in: the next step, or the outcome.
  void finish_step();
  // The current exception becomes the outcome; the connection is given back
  // if nothing is left in flight on it, else dropped.
  void fail() noexcept;

  ConnectionPool::Lease lease_;
  const Script script_;
  const std::vector<std::string> evalsha_;
  const GrantSync sync_;
  const std::shared_ptr<Counters> counters_;
  Step step_ = Step::call;
  std::size_t expected_ = 0;  // replies step_ was sent for
  std::vector<Reply> replies_;
  std::vector<Reply> call_replies_;  // the script's and WAIT's, during fsync
  std::optional<SyncedReply> result_;
  std::exception_ptr error_;
  bool taken_ = false;  // get() was called
};

}  // namespace turnstile::redis

#endif  // TURNSTILE_REDIS_PENDING_EVAL_H_
