// benchmarks/latency.h
//
// Latency helpers shared by the contended benchmarks: quantiles of samples
// and the PING round trip every handoff gap is compared with.

#ifndef TURNSTILE_BENCHMARKS_LATENCY_H_
#define TURNSTILE_BENCHMARKS_LATENCY_H_

#include <chrono>
#include <vector>

#include "turnstile/backend.h"

namespace turnstile::benchmarks {

using SteadyClock = std::chrono::steady_clock;

inline constexpr int kPingSamples = 2'000;

double micros_between(SteadyClock::time_point from, SteadyClock::time_point to);

// The `fraction` quantile (0.5 = median, 0.99 = p99) of `samples_us`; 0 if
// there are none.
double percentile_us(std::vector<double> samples_us, double fraction);

// Median PING round trip over `backend`, in microseconds.
double ping_round_trip_us(Backend& backend, int pings = kPingSamples);

}  // namespace turnstile::benchmarks

#endif  // TURNSTILE_BENCHMARKS_LATENCY_H_
