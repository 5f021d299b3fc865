// turnstile/metrics.h
//
// What a Client has done, as counters and latency histograms, readable as a
// struct and writable in Prometheus's text exposition format (version
// 0.0.4). The library serves nothing: a service writes the text on its own
// metrics endpoint.
//
//   turnstile::MetricsSnapshot snapshot = client.metrics();
//   std::string text = turnstile::to_prometheus(snapshot, {{"client", "orders"}});
//
// Every figure counts since the Client was made. Latencies are measured on
// the client's Runtime clock: real time in production, virtual time in a
// simulated world, so a scenario's figures and a real run's are comparable.
//
// The metrics (Prometheus name; the struct member):
//
//   turnstile_acquisitions_total{flavor}      acquisitions
//       Holds taken: a lock acquired (a reentrant re-entry too), a
//       semaphore's permits taken (one per call, whatever the count), a
//       RedLock or MultiLock whole. By flavor (flavor_name()).
//   turnstile_failed_tries_total              failed_tries
//       Acquisitions that gave up: the wait ran out, or a stop was requested,
//       with nothing taken (errors are not counted here).
//   turnstile_unreplicated_grants_total       unreplicated_grants
//       Grants no replica acknowledged within the replica-sync timeout,
//       undone (RedisOptions::replica_sync): a waiting acquisition tries
//       again, a single try throws ReplicaSyncError. Steady growth means
//       a replica out of step (in its first sync, lagging, stopped). Also
//       grants whose AOF fsync the master did not confirm within
//       aof_sync_timeout_ms (RedisOptions::aof_sync; AofSyncError): a disk
//       slower than the timeout.
//   turnstile_handoffs_received_total         handoffs_received
//       Acquisitions that succeeded after a release message woke the waiter
//       (a handoff from another holder, seen from the receiving side).
//   turnstile_renewals_total                  renewals
//       Leases the watchdog renewed (one per lock per renewal).
//   turnstile_renewal_failures_total          renewal_failures
//       Leases whose renewal call failed or got no reply in time (the lock
//       may still be held: the local deadline decides, LockLostReason).
//   turnstile_locks_lost_total{reason}        locks_lost
//       Holds lost while believed held, by LockLostReason ("gone",
//       "lease_expired", "max_hold_reached", "server_restarted").
//   turnstile_reconnects_total                reconnects
//       Connections the backend opened again after one broke (the pool's
//       and the subscriber's). From Backend::counters(): a backend shared by
//       several clients shows its totals in each.
//   turnstile_script_reloads_total            script_reloads
//       Scripts loaded again on a server that had them before and answered
//       NOSCRIPT (a restart, SCRIPT FLUSH); a script's first load on each
//       server is not counted. Also from Backend::counters().
//   turnstile_acquire_wait_seconds            acquire_wait
//       Histogram: from the start of an acquisition to its success.
//   turnstile_script_round_trip_seconds       script_round_trip
//       Histogram: each script call the client's locks made, from sending to
//       the reply (renewals included; failed calls too).
//   turnstile_handoff_gap_seconds             handoff_gap
//       Histogram: for handoffs received, from the release message's
//       arrival to the acquisition (one more script call, usually).
//
//   turnstile_holds{flavor}                   holds
//       Gauge: holds this client believes it has now, by flavor: every
//       hold with a local deadline (lock.h), a reentrant lock's re-entries
//       as one, each crash-safe semaphore permit as one; a RedLock or
//       MultiLock as its node locks (by their flavor). A counting
//       semaphore's permits are nobody's: not counted.
//   turnstile_waiters{flavor}                 waiters
//       Gauge: acquisitions of this client asleep now, waiting for a
//       release (or retrying after a failure in transit), by flavor.
//   turnstile_hold_seconds                    hold_time
//       Histogram: each hold counted by turnstile_holds, from the send
//       instant of its acquisition to its release or loss (a reentrant
//       lock: to its last release). Buckets kHoldBucketBoundsUs.
//
// Histograms have fixed buckets (upper bounds in microseconds, plus +Inf):
// kLatencyBucketBoundsUs for latencies, kHoldBucketBoundsUs for hold
// times; memory is bounded and recording is a few relaxed atomic
// increments.

#ifndef TURNSTILE_METRICS_H_
#define TURNSTILE_METRICS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "turnstile/export.h"
#include "turnstile/flavor.h"

namespace turnstile {

// Upper bounds of the histogram buckets, in microseconds (the last bucket,
// +Inf, is implicit): 50 µs to 60 s, about 2.5 per decade.
inline constexpr std::array<std::int64_t, 19> kLatencyBucketBoundsUs = {
    50,      100,     250,     500,       1'000,     2'500,     5'000,      10'000,     25'000,    50'000,
    100'000, 250'000, 500'000, 1'000'000, 2'500'000, 5'000'000, 10'000'000, 30'000'000, 60'000'000};
inline constexpr std::size_t kLatencyBucketCount = kLatencyBucketBoundsUs.size() + 1;

// Upper bounds of the hold-time buckets, in microseconds: 10 ms to a day.
inline constexpr std::array<std::int64_t, 16> kHoldBucketBoundsUs = {
    10'000,         100'000,        1'000'000,      5'000'000,     10'000'000,    30'000'000,
    60'000'000,     300'000'000,    600'000'000,    1'800'000'000, 3'600'000'000, 7'200'000'000,
    14'400'000'000, 28'800'000'000, 43'200'000'000, 86'400'000'000};
inline constexpr std::size_t kHoldBucketCount = kHoldBucketBoundsUs.size() + 1;

inline constexpr std::size_t kFlavorCount = kAllFlavors.size();
inline constexpr std::array kAllLockLostReasons = {LockLostReason::gone, LockLostReason::lease_expired,
                                                   LockLostReason::max_hold_reached, LockLostReason::server_restarted};
inline constexpr std::size_t kLockLostReasonCount = kAllLockLostReasons.size();

// "gone", "lease_expired", "max_hold_reached", "server_restarted".
TURNSTILE_EXPORT std::string_view lock_lost_reason_name(LockLostReason reason);

struct TURNSTILE_EXPORT LatencyHistogram {
  // counts[i]: observations at most kLatencyBucketBoundsUs[i] (and above the
  // bound before); counts.back(): above the last bound. Not cumulative.
  std::array<std::uint64_t, kLatencyBucketCount> counts{};
  std::uint64_t count = 0;  // the sum of counts
  std::int64_t sum_us = 0;  // of every observation

  // Adds `other`'s observations (the same buckets).
  LatencyHistogram& operator+=(const LatencyHistogram& other);
};

// The same for hold times (kHoldBucketBoundsUs).
struct TURNSTILE_EXPORT HoldTimeHistogram {
  std::array<std::uint64_t, kHoldBucketCount> counts{};
  std::uint64_t count = 0;
  std::int64_t sum_us = 0;

  HoldTimeHistogram& operator+=(const HoldTimeHistogram& other);
};

struct TURNSTILE_EXPORT MetricsSnapshot {
  std::array<std::uint64_t, kFlavorCount> acquisitions{};  // by Flavor, as kAllFlavors orders them
  std::uint64_t failed_tries = 0;
  std::uint64_t unreplicated_grants = 0;
  std::uint64_t handoffs_received = 0;
  std::uint64_t renewals = 0;
  std::uint64_t renewal_failures = 0;
  std::array<std::uint64_t, kLockLostReasonCount> locks_lost{};  // by kAllLockLostReasons
  std::uint64_t reconnects = 0;
  std::uint64_t script_reloads = 0;
  LatencyHistogram acquire_wait;
  LatencyHistogram script_round_trip;
  LatencyHistogram handoff_gap;
  // Gauges, read when the snapshot was taken.
  std::array<std::int64_t, kFlavorCount> holds{};    // by Flavor, as kAllFlavors orders them
  std::array<std::int64_t, kFlavorCount> waiters{};  // likewise
  HoldTimeHistogram hold_time;

  std::uint64_t acquisitions_of(Flavor flavor) const { return acquisitions[static_cast<std::size_t>(flavor)]; }
  std::uint64_t total_acquisitions() const;
  std::uint64_t locks_lost_by(LockLostReason reason) const { return locks_lost[static_cast<std::size_t>(reason)]; }
  std::uint64_t total_locks_lost() const;
  std::int64_t holds_of(Flavor flavor) const { return holds[static_cast<std::size_t>(flavor)]; }
  std::int64_t waiters_of(Flavor flavor) const { return waiters[static_cast<std::size_t>(flavor)]; }

  // Adds every figure of `other` (several clients of one process, or one
  // simulated process's clients on several servers, as one); gauges too.
  MetricsSnapshot& operator+=(const MetricsSnapshot& other);
};

// Labels added to every sample ({"client", "orders"}), in this order. Names
// must match [a-zA-Z_][a-zA-Z0-9_]*, not start with "__" and not be one the
// metrics use ("flavor", "reason", "le"), else InvalidArgumentError; values
// are escaped (\\, \", \n).
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// A label value as the text format writes it: \, " and newline escaped
// (\\, \", \n); other bytes as they are.
TURNSTILE_EXPORT std::string escape_label_value(std::string_view value);

// One client's snapshot and the labels that tell it from the others.
struct TURNSTILE_EXPORT LabelledMetrics {
  MetricLabels labels;
  MetricsSnapshot snapshot;
};

// Writes `snapshot` in the Prometheus text format: for each metric a
// "# HELP" and a "# TYPE" line, then its samples (counters, then gauges,
// then histograms); histograms as cumulative
// _bucket{le="..."} samples in seconds ending with le="+Inf", then _sum
// (seconds) and _count. Label names are checked before anything is written.
TURNSTILE_EXPORT void write_prometheus(std::ostream& out, const MetricsSnapshot& snapshot,
                                       const MetricLabels& labels = {});
TURNSTILE_EXPORT std::string to_prometheus(const MetricsSnapshot& snapshot, const MetricLabels& labels = {});
// Several snapshots in one exposition (each metric's HELP and TYPE once,
// then the samples of every snapshot in order): several Clients of one
// process, or every client of a simulation. Their label sets should
// differ, or a scraper sees duplicate series.
TURNSTILE_EXPORT void write_prometheus(std::ostream& out, const std::vector<LabelledMetrics>& snapshots);

}  // namespace turnstile

#endif  // TURNSTILE_METRICS_H_
