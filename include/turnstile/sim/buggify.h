// turnstile/sim/buggify.h
//
// BUGGIFY, in FoundationDB's manner: named fault-injection points inside
// the library and the fake Redis, active only in simulation. A world made
// with WorldOptions::buggify draws, per point and from its seed, whether
// the point is enabled in this run (one in two) and how often it then
// fires; a point asked while disabled never fires. With a real Runtime
// (Runtime::buggify returns false) the points are unreachable.
//
//   turnstile::sim::WorldOptions options;
//   options.buggify = true;
//   turnstile::sim::World world(42, options);
//   ...                                   // run it
//   for (const turnstile::sim::BuggifyCount& count : world.buggify_counts())
//     std::printf("%s reached %llu fired %llu\n", ...);
//
// The points, by their stable names:
//   watchdog.renewal_delayed        the watchdog's renewal tick waits one
//                                   renewal period before renewing
//                                   (src/locks/engine/watchdog.cpp)
//   fake.reply_dropped_after_apply  a command ran on the server, its reply
//                                   never arrives (the caller times out)
//   pubsub.reconnect_mid_wait       a new subscription's connection drops
//                                   soon after: messages meanwhile are lost,
//                                   then it resubscribes and says so
//   fake.slow_script                a script call costs virtual time: the
//                                   server is busy (every client waits) and
//                                   the reply comes that much later
//   fake.publish_lost               a PUBLISH reaches no subscriber
//
// Same seed, same draws: a run with BUGGIFY replays exactly.

#ifndef TURNSTILE_SIM_BUGGIFY_H_
#define TURNSTILE_SIM_BUGGIFY_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "turnstile/export.h"

namespace turnstile::sim {

struct TURNSTILE_EXPORT BuggifyCount {
  std::string_view point;
  bool enabled = false;       // drawn for this run
  std::uint64_t reached = 0;  // times the point was asked
  std::uint64_t fired = 0;    // times it fired
};

// Every point's name, in a stable order (the order of counts).
TURNSTILE_EXPORT const std::vector<std::string_view>& buggify_point_names();

}  // namespace turnstile::sim

#endif  // TURNSTILE_SIM_BUGGIFY_H_
