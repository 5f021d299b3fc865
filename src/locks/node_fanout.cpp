#include "locks/node_fanout.h"

#include <cassert>
#include <utility>

namespace turnstile::detail {

NodeFanout::NodeFanout(Runtime& runtime, std::size_t nodes)
    : answers_(nodes, NodeAnswer::pending), errors_(nodes), answered_(runtime.make_event()) {}

std::shared_ptr<NodeFanout> NodeFanout::start(Runtime& runtime, std::size_t nodes, Call call) {
  assert(nodes > 0);
  auto fanout = std::make_shared<NodeFanout>(runtime, nodes);
  auto shared_call = std::make_shared<const Call>(std::move(call));
  // Timer callbacks due now rather than spawn(): the runtime runs them on a
  // task of its choosing and they may block (RealRuntime: its callback
  // workers, no thread created per call; simulation: a task of the client).
  const Instant now = runtime.now();
  for (std::size_t index = 0; index < nodes; ++index) {
    (void)runtime.schedule_at(now, [fanout, shared_call, index] {
      // Only std::exceptions are answers: anything else (a simulated crash
      // unwinding the task) must go on unwinding.
      try {
        const bool yes = (*shared_call)(index);
        fanout->record(index, yes ? NodeAnswer::yes : NodeAnswer::no, nullptr);
      } catch (const std::exception&) {
        fanout->record(index, NodeAnswer::failed, std::current_exception());
      }
    });
  }
  return fanout;
}

void NodeFanout::record(std::size_t index, NodeAnswer answer, std::exception_ptr error) {
  assert(answer != NodeAnswer::pending);
  {
    std::lock_guard guard(mutex_);
    assert(index < answers_.size());
    assert(answers_[index] == NodeAnswer::pending);
    answers_[index] = answer;
    errors_[index] = std::move(error);
  }
  answered_->notify();
}

NodeFanout::Tally NodeFanout::tally_locked() const {
  Tally tally;
  for (const NodeAnswer answer : answers_) {
    switch (answer) {
      case NodeAnswer::pending: ++tally.pending; break;
      case NodeAnswer::yes: ++tally.yes; break;
      case NodeAnswer::no: ++tally.no; break;
      case NodeAnswer::failed: ++tally.failed; break;
    }
  }
  assert(tally.yes + tally.no + tally.failed + tally.pending == answers_.size());
  return tally;
}

NodeFanout::Tally NodeFanout::tally() const {
  std::lock_guard guard(mutex_);
  return tally_locked();
}

NodeFanout::Tally NodeFanout::wait(Instant deadline, const std::function<bool(const Tally&)>& decided) {
  // Every successful wait consumes at least one answer's notification, so
  // there are at most size() of them before nothing is pending.
  for (std::size_t wakes = 0; wakes <= answers_.size(); ++wakes) {
    const Tally now = tally();
    if (now.pending == 0 || decided(now)) return now;
    if (!answered_->wait_until(deadline)) return tally();
  }
  const Tally last = tally();
  assert(last.pending == 0);
  return last;
}

NodeFanout::Tally NodeFanout::wait_for_all() {
  return wait(kNoDeadline, [](const Tally&) { return false; });
}

NodeAnswer NodeFanout::answer(std::size_t index) const {
  std::lock_guard guard(mutex_);
  assert(index < answers_.size());
  return answers_[index];
}

std::exception_ptr NodeFanout::error(std::size_t index) const {
  std::lock_guard guard(mutex_);
  assert(index < errors_.size());
  return errors_[index];
}

}  // namespace turnstile::detail
