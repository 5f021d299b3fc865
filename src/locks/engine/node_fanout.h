// locks/engine/node_fanout.h
//
// One call per node of a composite lock (multi_lock.h): every node's script
// is sent (Backend::send_eval) before any reply is awaited, so N nodes cost
// one round trip of the slowest, not N, and no thread per node. The task
// that sent them then takes the answers in node order until it can decide
// (enough yes, too many no), or a deadline passes. Answers not taken by
// then stay pending; whoever holds the fanout takes them later with
// wait_for_all().
//
// Not thread-safe: one task drives a fanout. Others may read answer() only
// while nobody drives it (the composite lock reads a stored acquisition
// under its mutex).

#ifndef TURNSTILE_LOCKS_ENGINE_NODE_FANOUT_H_
#define TURNSTILE_LOCKS_ENGINE_NODE_FANOUT_H_

#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "turnstile/runtime.h"

namespace turnstile::detail {

enum class NodeAnswer {
  pending,  // sent, not answered yet
  yes,      // the call returned true (granted, released)
  no,       // the call returned false (held by another, not the owner)
  failed,   // the call threw a std::exception (kept in error())
};

// One node's call, sent.
class NodeCall {
 public:
  NodeCall() = default;
  NodeCall(const NodeCall&) = delete;
  NodeCall& operator=(const NodeCall&) = delete;
  virtual ~NodeCall() = default;
  // Waits up to `timeout` (zero or negative: only looks) for the reply;
  // returns whether finish() can now answer without waiting. Never throws.
  [[nodiscard]] virtual bool wait_for(Duration timeout) = 0;
  // The answer: true or false, or a thrown std::exception. Waits for the
  // reply if it is not in (bounded by the backend's command timeout).
  // Called once.
  virtual bool finish() = 0;
};

class NodeFanout {
 public:
  // Sends node `index`'s call; may throw (a failed answer at once).
  using Send = std::function<std::unique_ptr<NodeCall>(std::size_t index)>;

  struct Tally {
    std::size_t yes = 0;
    std::size_t no = 0;
    std::size_t failed = 0;
    std::size_t pending = 0;
  };

  // Sends the calls of nodes 0 .. nodes - 1, in that order.
  NodeFanout(Runtime& runtime, std::size_t nodes, const Send& send);
  NodeFanout(const NodeFanout&) = delete;
  NodeFanout& operator=(const NodeFanout&) = delete;

  // Takes answers in node order until decided(tally) holds, nothing is
  // pending, or `deadline` passes (a past deadline: takes only the answers
  // already in); returns the tally then. After the deadline, the answers
  // already in are still taken, whatever node an earlier wait timed out on.
  Tally wait(Instant deadline, const std::function<bool(const Tally&)>& decided);
  // Takes every answer (each bounded by its backend's command timeout).
  Tally wait_for_all();

  Tally tally() const;
  NodeAnswer answer(std::size_t index) const;
  // The exception of a failed call (null otherwise).
  std::exception_ptr error(std::size_t index) const;
  std::size_t size() const { return answers_.size(); }

 private:
  // Runs node `index`'s finish() and records its answer.
  void take(std::size_t index);

  Runtime& runtime_;
  std::vector<std::unique_ptr<NodeCall>> calls_;  // null once answered
  std::vector<NodeAnswer> answers_;
  std::vector<std::exception_ptr> errors_;
};

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_ENGINE_NODE_FANOUT_H_
