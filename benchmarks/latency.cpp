#include "latency.h"

#include <algorithm>
#include <cstddef>

namespace turnstile::benchmarks {

double micros_between(SteadyClock::time_point from, SteadyClock::time_point to) {
  return std::chrono::duration<double, std::micro>(to - from).count();
}

double percentile_us(std::vector<double> samples_us, double fraction) {
  if (samples_us.empty()) return 0;
  const auto index = static_cast<std::size_t>(fraction * static_cast<double>(samples_us.size() - 1));
  std::nth_element(samples_us.begin(), samples_us.begin() + static_cast<std::ptrdiff_t>(index), samples_us.end());
  return samples_us[index];
}

double ping_round_trip_us(Backend& backend, int pings) {
  std::vector<double> samples_us;
  samples_us.reserve(static_cast<std::size_t>(pings));
  for (int i = 0; i < pings; ++i) {
    const auto start = SteadyClock::now();
    backend.command({"PING"});
    samples_us.push_back(micros_between(start, SteadyClock::now()));
  }
  return percentile_us(std::move(samples_us), 0.5);
}

}  // namespace turnstile::benchmarks
