// locks/node_fanout.h
//
// One call per node of a composite lock (multi_lock.h), all in parallel,
// each as a runtime callback due at once (a task that may block), with a tally the caller waits on until it
// can decide (enough yes, too many no) or a deadline passes. Answers that
// come after the caller stopped waiting are kept: the caller (or whoever it
// hands the fanout to) collects them later with wait_for_all().

#ifndef TURNSTILE_LOCKS_NODE_FANOUT_H_
#define TURNSTILE_LOCKS_NODE_FANOUT_H_

#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "turnstile/runtime.h"

namespace turnstile::detail {

enum class NodeAnswer {
  pending,  // still running
  yes,      // the call returned true (granted, released)
  no,       // the call returned false (held by another, not the owner)
  failed,   // the call threw a std::exception (kept in error())
};

class NodeFanout {
 public:
  // Returns true or false for node `index`; may throw.
  using Call = std::function<bool(std::size_t index)>;

  struct Tally {
    std::size_t yes = 0;
    std::size_t no = 0;
    std::size_t failed = 0;
    std::size_t pending = 0;
  };

  // Starts call(0) .. call(nodes - 1), each as a callback of `runtime`
  // due now.
  static std::shared_ptr<NodeFanout> start(Runtime& runtime, std::size_t nodes, Call call);

  // Waits until decided(tally) holds, nothing is pending, or `deadline`
  // passes (a past deadline: look once); returns the tally then.
  Tally wait(Instant deadline, const std::function<bool(const Tally&)>& decided);
  // Waits until every call has answered (each is bounded by its backend's
  // command timeout).
  Tally wait_for_all();

  Tally tally() const;
  NodeAnswer answer(std::size_t index) const;
  // The exception of a failed call (null otherwise).
  std::exception_ptr error(std::size_t index) const;
  std::size_t size() const { return answers_.size(); }

  // Use start().
  NodeFanout(Runtime& runtime, std::size_t nodes);

 private:
  void record(std::size_t index, NodeAnswer answer, std::exception_ptr error);
  Tally tally_locked() const;

  mutable std::mutex mutex_;  // guards answers_ and errors_; never held while waiting
  std::vector<NodeAnswer> answers_;
  std::vector<std::exception_ptr> errors_;
  std::unique_ptr<Event> answered_;  // notified after every answer
};

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_NODE_FANOUT_H_
