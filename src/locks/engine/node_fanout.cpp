#include "locks/engine/node_fanout.h"

#include <utility>

#include "core/check.h"

namespace turnstile::detail {

NodeFanout::NodeFanout(Runtime& runtime, std::size_t nodes, const Send& send)
    : runtime_(runtime), calls_(nodes), answers_(nodes, NodeAnswer::pending), errors_(nodes) {
  TURNSTILE_CHECK(nodes > 0);
  for (std::size_t index = 0; index < nodes; ++index) {
    // Only std::exceptions are answers: anything else (a simulated crash
    // unwinding the task) must go on unwinding.
    try {
      calls_[index] = send(index);
      TURNSTILE_CHECK(calls_[index] != nullptr);
    } catch (const std::exception&) {
      answers_[index] = NodeAnswer::failed;
      errors_[index] = std::current_exception();
    }
  }
}

void NodeFanout::take(std::size_t index) {
  TURNSTILE_CHECK(answers_[index] == NodeAnswer::pending);
  TURNSTILE_CHECK(calls_[index] != nullptr);
  const std::unique_ptr<NodeCall> call = std::move(calls_[index]);
  try {
    answers_[index] = call->finish() ? NodeAnswer::yes : NodeAnswer::no;
  } catch (const std::exception&) {
    answers_[index] = NodeAnswer::failed;
    errors_[index] = std::current_exception();
  }
  TURNSTILE_CHECK(answers_[index] != NodeAnswer::pending);
}

NodeFanout::Tally NodeFanout::tally() const {
  Tally tally;
  for (const NodeAnswer answer : answers_) {
    switch (answer) {
      case NodeAnswer::pending:
        ++tally.pending;
        break;
      case NodeAnswer::yes:
        ++tally.yes;
        break;
      case NodeAnswer::no:
        ++tally.no;
        break;
      case NodeAnswer::failed:
        ++tally.failed;
        break;
    }
  }
  TURNSTILE_CHECK(tally.yes + tally.no + tally.failed + tally.pending == answers_.size());
  return tally;
}

NodeFanout::Tally NodeFanout::wait(Instant deadline, const std::function<bool(const Tally&)>& decided) {
  for (std::size_t index = 0; index < answers_.size(); ++index) {
    if (answers_[index] != NodeAnswer::pending) continue;
    const Tally now = tally();
    if (decided(now)) return now;
    if (calls_[index]->wait_for(deadline - runtime_.now())) take(index);
  }
  return tally();
}

NodeFanout::Tally NodeFanout::wait_for_all() {
  for (std::size_t index = 0; index < answers_.size(); ++index) {
    if (answers_[index] == NodeAnswer::pending) take(index);
  }
  const Tally all = tally();
  TURNSTILE_CHECK(all.pending == 0);
  return all;
}

NodeAnswer NodeFanout::answer(std::size_t index) const {
  TURNSTILE_CHECK(index < answers_.size());
  return answers_[index];
}

std::exception_ptr NodeFanout::error(std::size_t index) const {
  TURNSTILE_CHECK(index < errors_.size());
  return errors_[index];
}

}  // namespace turnstile::detail
