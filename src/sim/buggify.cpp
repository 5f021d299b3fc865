// BUGGIFY points: the names, the per-run draws, the counts.

#include "sim/buggify.h"

#include <array>

#include "core/check.h"

namespace turnstile::sim {
namespace {

// Far from the world's, the clients', the fault plan's and the swarm's
// streams.
constexpr std::uint64_t kBuggifyStreamBase = 1ULL << 43;
constexpr std::uint64_t kOddsResolution = 1ULL << 53;
// One point in two is enabled in a run, as in FoundationDB.
constexpr std::uint64_t kEnabledOneIn = 2;

struct PointInfo {
  std::string_view name;
  double max_odds;  // an enabled point fires with odds in [max/10, max]
};

// The odds are per time asked: a renewal tick, a command, a subscription,
// a script call, a PUBLISH.
constexpr std::array<PointInfo, 5> kPoints = {{
    {"watchdog.renewal_delayed", 0.2},
    {"fake.reply_dropped_after_apply", 0.01},
    {"pubsub.reconnect_mid_wait", 0.05},
    {"fake.slow_script", 0.01},
    {"fake.publish_lost", 0.05},
}};

}  // namespace

const std::vector<std::string_view>& buggify_point_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> list;
    for (const PointInfo& point : kPoints) list.push_back(point.name);
    return list;
  }();
  return names;
}

Buggify::Buggify(std::uint64_t seed, bool on) {
  for (std::size_t index = 0; index < kPoints.size(); ++index) {
    Random random(seed, kBuggifyStreamBase + index);
    BuggifyCount count;
    count.point = kPoints[index].name;
    count.enabled = on && random.below(kEnabledOneIn) == 0;
    const double max = kPoints[index].max_odds * static_cast<double>(kOddsResolution);
    const auto low = static_cast<std::uint64_t>(max / 10);
    const auto high = static_cast<std::uint64_t>(max);
    odds_.push_back(low + random.below(high - low + 1));
    counts_.push_back(count);
    randoms_.push_back(random);
  }
}

std::size_t Buggify::index_of(std::string_view point) const {
  for (std::size_t index = 0; index < kPoints.size(); ++index) {
    if (kPoints[index].name == point) return index;
  }
  TURNSTILE_CHECK_MSG(false, "a BUGGIFY point not in buggify_point_names()");
  return 0;
}

bool Buggify::fires(std::string_view point) {
  const std::size_t index = index_of(point);
  BuggifyCount& count = counts_[index];
  ++count.reached;
  if (!count.enabled) return false;
  if (randoms_[index].below(kOddsResolution) >= odds_[index]) return false;
  ++count.fired;
  return true;
}

void Buggify::force(std::string_view point) {
  const std::size_t index = index_of(point);
  counts_[index].enabled = true;
  odds_[index] = kOddsResolution;
}

std::uint64_t Buggify::below(std::string_view point, std::uint64_t bound) {
  return randoms_[index_of(point)].below(bound);
}

}  // namespace turnstile::sim
