#include "handoff_budget.h"

#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "latency.h"
#include "ceiling.h"

namespace turnstile::benchmarks {
namespace {

constexpr auto kWaitLimit = std::chrono::seconds(10);

// One message in flight at a time: the publisher (main thread) sets
// `sent`, the handler stamps `handled` and notifies the waiter thread,
// which stamps `woken`.
struct Relay {
  std::mutex mutex;
  std::condition_variable handled_cv;
  std::condition_variable woken_cv;
  std::optional<SteadyClock::time_point> handled;
  std::optional<SteadyClock::time_point> woken;
  bool stop = false;
};

}  // namespace

HandoffBudget measure_handoff_budget(Backend& backend, const std::string& prefix) {
  HandoffBudget budget;
  Relay relay;
  // The waiter: sleeps until the handler stamped a message, stamps its own
  // wake-up.
  std::thread waiter([&relay] {
    std::unique_lock lock(relay.mutex);
    while (!relay.stop) {
      relay.handled_cv.wait(lock, [&] { return relay.stop || (relay.handled && !relay.woken); });
      if (relay.stop) break;
      relay.woken = SteadyClock::now();
      relay.woken_cv.notify_all();
    }
  });
  const std::string channel = prefix + ":channel";
  std::vector<double> to_handler_us;
  std::vector<double> reply_us;
  std::vector<double> to_waiter_us;
  {
    Subscription subscription = backend.subscribe(channel, [&relay](const PubSubEvent& event) {
      if (event.kind != PubSubEvent::Kind::message) return;
      const auto now = SteadyClock::now();
      const std::lock_guard lock(relay.mutex);
      relay.handled = now;
      relay.handled_cv.notify_all();
    });
    for (int sample = 0; sample < kBudgetSamples; ++sample) {
      const auto sent = SteadyClock::now();
      backend.command({"PUBLISH", channel, "1"});
      const auto replied = SteadyClock::now();
      std::unique_lock lock(relay.mutex);
      if (!relay.woken_cv.wait_for(lock, kWaitLimit, [&] { return relay.woken.has_value(); })) break;
      to_handler_us.push_back(micros_between(sent, *relay.handled));
      reply_us.push_back(micros_between(sent, replied));
      to_waiter_us.push_back(micros_between(*relay.handled, *relay.woken));
      relay.handled.reset();
      relay.woken.reset();
    }
  }
  {
    const std::lock_guard lock(relay.mutex);
    relay.stop = true;
    relay.handled_cv.notify_all();
  }
  waiter.join();
  budget.publish_to_handler_us = percentile_us(std::move(to_handler_us), 0.5);
  budget.publish_reply_us = percentile_us(std::move(reply_us), 0.5);
  budget.handler_to_waiter_us = percentile_us(std::move(to_waiter_us), 0.5);

  const Script& acquire = embedded_script("reentrant_lock_acquire");
  const std::vector<std::string> keys = {prefix + ":key"};
  const std::vector<std::string> args = {"30000", "budget-owner"};
  std::vector<double> script_us;
  script_us.reserve(kBudgetSamples);
  for (int sample = 0; sample < kBudgetSamples; ++sample) {
    const auto start = SteadyClock::now();
    backend.eval(acquire, keys, args);
    script_us.push_back(micros_between(start, SteadyClock::now()));
  }
  backend.command({"DEL", keys[0]});
  budget.acquire_script_us = percentile_us(std::move(script_us), 0.5);
  return budget;
}

}  // namespace turnstile::benchmarks
