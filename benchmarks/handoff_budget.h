// benchmarks/handoff_budget.h
//
// The physical parts of a forced handoff, measured one by one on the same
// backend, so that a handoff gap can be compared with the sum of what it
// cannot avoid: the release script's round trip (its PUBLISH inside),
// the message's way to the subscriber connection and its thread, the
// subscriber thread waking the waiting thread, and the waiter's acquire
// script round trip.
//
//   * publish_to_handler_us: PUBLISH sent by one thread -> the subscription
//     handler runs on the backend's subscriber thread;
//   * publish_reply_us: the same PUBLISH's round trip to its caller;
//   * handler_to_waiter_us: the handler notifies a condition variable ->
//     the thread blocked on it runs (the wake-up a waiter gets);
//   * acquire_script_us: EVALSHA of the reentrant acquire script (the
//     holder again: EXISTS, HEXISTS, HINCRBY, PEXPIRE) round trip.
//
// Each is a median of kBudgetSamples.

#ifndef TURNSTILE_BENCHMARKS_HANDOFF_BUDGET_H_
#define TURNSTILE_BENCHMARKS_HANDOFF_BUDGET_H_

#include "turnstile/backend.h"

namespace turnstile::benchmarks {

inline constexpr int kBudgetSamples = 2'000;

struct HandoffBudget {
  double publish_to_handler_us = 0;
  double publish_reply_us = 0;
  double handler_to_waiter_us = 0;
  double acquire_script_us = 0;
};

// Measures the parts on `backend` (which must support pub/sub), using
// channel and key names that start with `prefix`.
HandoffBudget measure_handoff_budget(Backend& backend, const std::string& prefix);

}  // namespace turnstile::benchmarks

#endif  // TURNSTILE_BENCHMARKS_HANDOFF_BUDGET_H_
