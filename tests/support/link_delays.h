// support/link_delays.h
//
// Scheduling noise for the wake-up property worlds: a random delay, drawn
// from the world's seeded sim::Random, on every call, every reply and
// every pub/sub message of each simulated process. Header-only.

#ifndef TURNSTILE_TESTS_SUPPORT_LINK_DELAYS_H_
#define TURNSTILE_TESTS_SUPPORT_LINK_DELAYS_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/fake_backend.h"
#include "sim/random.h"
#include "turnstile/sim/world.h"

namespace turnstile::testing {

// Uniform in [0, bound).
inline std::int64_t below(sim::Random& rng, std::int64_t bound) {
  return static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(bound)));
}

// Gives every link of `processes` a pub/sub delay below `max_delay_us` and
// a fresh request and reply delay below it on each call. `rng` must
// outlive the world (the request filters draw from it).
inline void delay_links_at_random(const std::vector<sim::SimClient*>& processes, sim::Random& rng,
                                  std::int64_t max_delay_us) {
  for (sim::SimClient* process : processes) {
    process->link().set_pubsub_delay(std::chrono::microseconds(below(rng, max_delay_us)));
    process->link().set_request_filter([&rng, max_delay_us](const std::vector<std::string>&) {
      sim::FakeBackend::RequestFate fate;
      fate.extra_request_delay = std::chrono::microseconds(below(rng, max_delay_us));
      fate.extra_reply_delay = std::chrono::microseconds(below(rng, max_delay_us));
      return fate;
    });
  }
}

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_SUPPORT_LINK_DELAYS_H_
