// World::apply_fault_plan: random faults drawn from the world's seed.
// Timed faults (crash, pause, link down, server restart) are Poisson
// arrivals scheduled up front; per-call and per-message faults are link
// filters, each with its own random stream so that one link's traffic does
// not shift another's draws.

#include <array>
#include <cmath>
#include <memory>
#include <string>

#include "sim/fake_backend.h"
#include "sim/random.h"
#include "sim/sim_runtime.h"
#include "sim/scheduler.h"
#include "turnstile/errors.h"
#include "turnstile/sim/faults.h"
#include "turnstile/sim/world.h"

namespace turnstile::sim {
namespace {

using std::chrono::milliseconds;

// Streams of the fault plan, far above client streams (ids < 2^32).
constexpr std::uint64_t kTimedFaultStream = 1ULL << 40;
constexpr std::uint64_t kLinkFaultStreamBase = 1ULL << 41;
constexpr std::uint64_t kClockSkewStream = 1ULL << 44;
constexpr std::uint64_t kServerClockSkewStream = 1ULL << 46;
constexpr std::uint64_t kOddsResolution = 1ULL << 53;
constexpr std::uint64_t kMaxArrivalsPerKind = 100'000;
constexpr Duration kDefaultWindow = std::chrono::hours(1);

bool chance(Random& random, double odds) {
  if (odds <= 0) return false;
  return static_cast<double>(random.below(kOddsResolution)) < odds * static_cast<double>(kOddsResolution);
}

Duration up_to(Random& random, Duration max) {
  const auto max_ms = std::chrono::duration_cast<milliseconds>(max).count();
  return milliseconds(
      1 + static_cast<std::int64_t>(random.below(static_cast<std::uint64_t>(std::max<std::int64_t>(max_ms, 1)))));
}

// The instants of a Poisson process of `per_hour` in [from, until).
std::vector<Instant> arrivals(Random& random, double per_hour, Instant from, Instant until) {
  std::vector<Instant> times;
  if (per_hour <= 0) return times;
  const double mean_ms = 3'600'000.0 / per_hour;
  Instant when = from;
  while (times.size() < kMaxArrivalsPerKind) {
    const double uniform =
        (static_cast<double>(random.below(kOddsResolution)) + 1) / static_cast<double>(kOddsResolution);
    when += milliseconds(1 + static_cast<std::int64_t>(-std::log(uniform) * mean_ms));
    if (when >= until) break;
    times.push_back(when);
  }
  return times;
}

// Uniform in -max..max.
std::int64_t symmetric_draw(Random& random, std::int64_t max) {
  if (max <= 0) return 0;
  return static_cast<std::int64_t>(random.below(static_cast<std::uint64_t>(2 * max + 1))) - max;
}

void check_odds(double odds, const char* field) {
  if (!(odds >= 0 && odds <= 1))
    throw InvalidArgumentError(std::string("fault plan: ") + field + " must be within 0..1");
}

void check_rate(double rate, const char* field) {
  if (!(rate >= 0 && rate <= FaultPlan::kMaxRatePerHour)) {
    throw InvalidArgumentError(std::string("fault plan: ") + field + " must be within 0.." +
                               std::to_string(static_cast<long long>(FaultPlan::kMaxRatePerHour)) + " per hour");
  }
}

}  // namespace

void FaultPlan::validate() const {
  check_rate(crash_per_client_hour, "crash_per_client_hour");
  check_rate(pause_per_client_hour, "pause_per_client_hour");
  check_rate(link_down_per_client_hour, "link_down_per_client_hour");
  check_rate(server_restart_per_hour, "server_restart_per_hour");
  check_rate(partition_per_client_hour, "partition_per_client_hour");
  check_odds(request_drop, "request_drop");
  check_odds(reply_drop, "reply_drop");
  check_odds(request_duplicate, "request_duplicate");
  check_odds(reply_duplicate, "reply_duplicate");
  check_odds(request_delay, "request_delay");
  check_odds(message_drop, "message_drop");
  check_odds(message_duplicate, "message_duplicate");
  check_odds(message_delay, "message_delay");
  if (wall_clock_offset_max < Duration::zero() || wall_clock_offset_max > std::chrono::hours(1)) {
    throw InvalidArgumentError("fault plan: wall_clock_offset_max must be within 0..1h");
  }
  if (clock_drift_ppm_max < 0 || clock_drift_ppm_max > kMaxClockDriftPpm) {
    throw InvalidArgumentError("fault plan: clock_drift_ppm_max must be within 0.." +
                               std::to_string(kMaxClockDriftPpm));
  }
  if (server_clock_offset_max < Duration::zero() || server_clock_offset_max > std::chrono::hours(1)) {
    throw InvalidArgumentError("fault plan: server_clock_offset_max must be within 0..1h");
  }
  if (server_clock_drift_ppm_max < 0 || server_clock_drift_ppm_max > kMaxClockDriftPpm) {
    throw InvalidArgumentError("fault plan: server_clock_drift_ppm_max must be within 0.." +
                               std::to_string(kMaxClockDriftPpm));
  }
  if (pause_max <= Duration::zero() || link_down_max <= Duration::zero() || delay_max <= Duration::zero() ||
      partition_max <= Duration::zero()) {
    throw InvalidArgumentError("fault plan: pause_max, link_down_max, partition_max and delay_max must be positive");
  }
}

const std::vector<std::string_view>& fault_kind_names() {
  static const std::vector<std::string_view> names = {"crash",
                                                      "pause",
                                                      "link-down",
                                                      "server-restart",
                                                      "partition",
                                                      "request-drop",
                                                      "reply-drop",
                                                      "request-duplicate",
                                                      "reply-duplicate",
                                                      "request-delay",
                                                      "message-drop",
                                                      "message-duplicate",
                                                      "message-delay",
                                                      "clock-skew",
                                                      "server-clock-skew",
                                                      "server-restart-everysec",
                                                      "server-restart-always"};
  return names;
}

std::vector<std::string_view> fault_kinds(const FaultPlan& plan) {
  const bool clock_skew = plan.wall_clock_offset_max > Duration::zero() || plan.clock_drift_ppm_max > 0;
  const bool server_clock_skew = plan.server_clock_offset_max > Duration::zero() || plan.server_clock_drift_ppm_max > 0;
  // A restart is a kind of its own per persistence (a plan that leaves it
  // to the world's servers counts as none, their default).
  const Persistence persistence = plan.server_persistence.value_or(Persistence::none);
  const bool restarts = plan.server_restart_per_hour > 0;
  const std::array<bool, 17> in = {plan.crash_per_client_hour > 0,
                                   plan.pause_per_client_hour > 0,
                                   plan.link_down_per_client_hour > 0,
                                   restarts && persistence == Persistence::none,
                                   plan.partition_per_client_hour > 0,
                                   plan.request_drop > 0,
                                   plan.reply_drop > 0,
                                   plan.request_duplicate > 0,
                                   plan.reply_duplicate > 0,
                                   plan.request_delay > 0,
                                   plan.message_drop > 0,
                                   plan.message_duplicate > 0,
                                   plan.message_delay > 0,
                                   clock_skew,
                                   server_clock_skew,
                                   restarts && persistence == Persistence::everysec,
                                   restarts && persistence == Persistence::always};
  std::vector<std::string_view> kinds;
  for (std::size_t kind = 0; kind < in.size(); ++kind) {
    if (in[kind]) kinds.push_back(fault_kind_names()[kind]);
  }
  return kinds;
}

void World::apply_fault_plan(const FaultPlan& plan) {
  plan.validate();
  const Instant from = now();
  const Instant until = plan.until == Instant{} ? from + kDefaultWindow : plan.until;
  auto timed = std::make_shared<Random>(seed_, kTimedFaultStream);

  for (const Instant when : arrivals(*timed, plan.server_restart_per_hour, from, until)) {
    const std::size_t index = timed->below(servers_.size());
    at(when, [this, index] {
      ++fault_counts_.server_restarts;
      restart_server(index);
    });
  }
  if (plan.server_persistence) {
    for (const auto& server : servers_) server->set_persistence(*plan.server_persistence);
  }
  // Server clocks from a stream of their own: a plan without them draws as before.
  Random server_skew(seed_, kServerClockSkewStream);
  for (std::size_t index = 0; index < servers_.size(); ++index) {
    if (plan.server_clock_offset_max <= Duration::zero() && plan.server_clock_drift_ppm_max == 0) break;
    const std::int64_t offset_ms =
        symmetric_draw(server_skew, std::chrono::duration_cast<milliseconds>(plan.server_clock_offset_max).count());
    const std::int64_t drift = symmetric_draw(server_skew, plan.server_clock_drift_ppm_max);
    set_server_clock_skew(index, milliseconds(offset_ms), drift);
  }
  // Clock skew from a stream of its own: a plan without it draws as before.
  Random skew(seed_, kClockSkewStream);
  for (const auto& owned : clients_) {
    SimClient* client = owned.get();
    if (plan.wall_clock_offset_max > Duration::zero()) {
      const std::int64_t offset_ms =
          symmetric_draw(skew, std::chrono::duration_cast<milliseconds>(plan.wall_clock_offset_max).count());
      client->sim_runtime().set_wall_clock_offset(milliseconds(offset_ms));
      add_trace(client->id(), "wall clock off by " + std::to_string(offset_ms) + " ms");
    }
    if (plan.clock_drift_ppm_max > 0) {
      const std::int64_t drift = symmetric_draw(skew, plan.clock_drift_ppm_max);
      client->sim_runtime().set_clock_drift_ppm(drift);
      add_trace(client->id(), "wall clock drifts " + std::to_string(drift) + " ppm");
    }
  }
  for (const auto& owned : clients_) {
    SimClient* client = owned.get();
    for (const Instant when : arrivals(*timed, plan.crash_per_client_hour, from, until)) {
      at(when, [this, client] {
        if (client->crashed()) return;
        ++fault_counts_.crashes;
        crash(*client);
      });
    }
    for (const Instant when : arrivals(*timed, plan.pause_per_client_hour, from, until)) {
      const Duration pause_for = up_to(*timed, plan.pause_max);
      at(when, [this, client, pause_for] {
        if (client->crashed() || scheduler_->client_paused(client->id())) return;
        ++fault_counts_.pauses;
        pause(*client, pause_for);
      });
    }
    for (const Instant when : arrivals(*timed, plan.link_down_per_client_hour, from, until)) {
      const std::size_t index = timed->below(servers_.size());
      const Duration down_for = up_to(*timed, plan.link_down_max);
      at(when, [this, client, index, down_for] {
        FakeBackend& link = client->link(index);
        if (link.down()) return;
        ++fault_counts_.links_down;
        add_trace(client->id(), "link to server-" + std::to_string(index) + " down");
        link.set_down(true);
        after(down_for, [this, client, index] {
          if (client->crashed()) return;
          add_trace(client->id(), "link to server-" + std::to_string(index) + " up");
          client->link(index).set_down(false);
        });
      });
    }
    // Drawn after the older kinds: a plan without partitions draws as before.
    for (const Instant when : arrivals(*timed, plan.partition_per_client_hour, from, until)) {
      const std::size_t index = timed->below(servers_.size());
      const Duration hang_for = up_to(*timed, plan.partition_max);
      at(when, [this, client, index, hang_for] {
        if (client->crashed() || client->link(index).hanging()) return;
        ++fault_counts_.partitions;
        partition(*client, index);
        after(hang_for, [this, client, index] { heal(*client, index); });
      });
    }

    for (std::size_t index = 0; index < servers_.size(); ++index) {
      const std::uint64_t stream = kLinkFaultStreamBase + client->id() * kMaxServers + index;
      auto random = std::make_shared<Random>(seed_, stream);
      const ClientId id = client->id();
      const std::string to_server = " server-" + std::to_string(index);
      client->link(index).set_request_filter(
          [this, plan, until, random, id, to_server](const std::vector<std::string>& argv) {
            FakeBackend::RequestFate fate;
            if (now() >= until) return fate;
            const std::string command = argv.empty() ? std::string() : argv[0];
            if (chance(*random, plan.request_drop)) {
              fate.drop_request = true;
              ++fault_counts_.requests_dropped;
              add_trace(id, command + " to" + to_server + ": request dropped");
            } else if (chance(*random, plan.reply_drop)) {
              fate.drop_reply = true;
              ++fault_counts_.replies_dropped;
              add_trace(id, command + " to" + to_server + ": reply dropped");
            } else if (chance(*random, plan.request_duplicate)) {
              fate.duplicate_request = true;
              ++fault_counts_.requests_duplicated;
              add_trace(id, command + " to" + to_server + ": request duplicated");
            } else if (chance(*random, plan.reply_duplicate)) {
              fate.duplicate_reply = true;
              ++fault_counts_.replies_duplicated;
              add_trace(id, command + " to" + to_server + ": reply duplicated");
            }
            if (chance(*random, plan.request_delay)) {
              fate.extra_request_delay = up_to(*random, plan.delay_max);
              ++fault_counts_.requests_delayed;
            }
            return fate;
          });
      client->link(index).set_message_filter(
          [this, plan, until, random, id, to_server](std::string_view channel, std::string_view) {
            FakeBackend::MessageFate fate;
            if (now() >= until) return fate;
            if (chance(*random, plan.message_drop)) {
              fate.drop = true;
              ++fault_counts_.messages_dropped;
              add_trace(id, "message on " + std::string(channel) + " from" + to_server + " dropped");
            } else if (chance(*random, plan.message_duplicate)) {
              fate.copies = 2;
              ++fault_counts_.messages_duplicated;
              add_trace(id, "message on " + std::string(channel) + " from" + to_server + " duplicated");
            }
            if (chance(*random, plan.message_delay)) {
              fate.extra_delay = up_to(*random, plan.delay_max);
              ++fault_counts_.messages_delayed;
            }
            return fate;
          });
    }
  }
  add_trace(kWorldClient,
            "fault plan applied until " +
                std::to_string(std::chrono::duration_cast<milliseconds>(until.time_since_epoch()).count()) + " ms");
}

}  // namespace turnstile::sim
