// Client metrics: the recorder (locks/engine/metrics_recorder.h) and the
// Prometheus text exposition format (turnstile/metrics.h).

#include "turnstile/metrics.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <functional>
#include <span>
#include <string_view>
#include <sstream>
#include <tuple>

#include "core/check.h"
#include "locks/engine/metrics_recorder.h"
#include "turnstile/errors.h"

namespace turnstile {

static_assert(static_cast<std::size_t>(LockLostReason::server_restarted) == kLockLostReasonCount - 1,
              "locks_lost is indexed by LockLostReason");

std::string_view lock_lost_reason_name(LockLostReason reason) {
  switch (reason) {
    case LockLostReason::gone:
      return "gone";
    case LockLostReason::lease_expired:
      return "lease_expired";
    case LockLostReason::max_hold_reached:
      return "max_hold_reached";
    case LockLostReason::server_restarted:
      return "server_restarted";
  }
  TURNSTILE_UNREACHABLE("every reason has a name");
  return "unknown";
}

std::uint64_t MetricsSnapshot::total_acquisitions() const {
  std::uint64_t total = 0;
  for (std::uint64_t count : acquisitions) total += count;
  return total;
}

namespace detail {

template <const auto& Bounds, typename Histogram>
void HistogramRecorder<Bounds, Histogram>::record(Duration value) {
  const std::int64_t us =
      std::max<std::int64_t>(0, std::chrono::duration_cast<std::chrono::microseconds>(value).count());
  const auto bound = std::lower_bound(Bounds.begin(), Bounds.end(), us);
  counts_[static_cast<std::size_t>(bound - Bounds.begin())].fetch_add(1, std::memory_order_relaxed);
  sum_us_.fetch_add(us, std::memory_order_relaxed);
}

template <const auto& Bounds, typename Histogram>
Histogram HistogramRecorder<Bounds, Histogram>::snapshot() const {
  Histogram histogram;
  static_assert(std::tuple_size_v<decltype(histogram.counts)> == Bounds.size() + 1);
  for (std::size_t i = 0; i < histogram.counts.size(); ++i) {
    histogram.counts[i] = counts_[i].load(std::memory_order_relaxed);
    histogram.count += histogram.counts[i];
  }
  histogram.sum_us = sum_us_.load(std::memory_order_relaxed);
  return histogram;
}

void MetricsRecorder::acquired(Flavor flavor, const AcquisitionTiming& timing, Instant now) {
  acquisitions_[static_cast<std::size_t>(flavor)].fetch_add(1, std::memory_order_relaxed);
  acquire_wait_.record(now - timing.started);
  if (timing.woken_at) {
    handoffs_received_.fetch_add(1, std::memory_order_relaxed);
    handoff_gap_.record(now - *timing.woken_at);
  }
}

template class HistogramRecorder<kLatencyBucketBoundsUs, LatencyHistogram>;
template class HistogramRecorder<kHoldBucketBoundsUs, HoldTimeHistogram>;

void MetricsRecorder::hold_ended(Flavor flavor, Duration held) {
  const std::int64_t before = holds_[static_cast<std::size_t>(flavor)].fetch_sub(1, std::memory_order_relaxed);
  TURNSTILE_CHECK_MSG(before > 0, "a hold ends once, after it started");
  hold_time_.record(held);
}

void MetricsRecorder::lost(LockLostReason reason) {
  locks_lost_[static_cast<std::size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
}

MetricsSnapshot MetricsRecorder::snapshot() const {
  MetricsSnapshot snapshot;
  for (std::size_t i = 0; i < kFlavorCount; ++i)
    snapshot.acquisitions[i] = acquisitions_[i].load(std::memory_order_relaxed);
  snapshot.failed_tries = failed_tries_.load(std::memory_order_relaxed);
  snapshot.unreplicated_grants = unreplicated_grants_.load(std::memory_order_relaxed);
  snapshot.handoffs_received = handoffs_received_.load(std::memory_order_relaxed);
  snapshot.renewals = renewals_.load(std::memory_order_relaxed);
  snapshot.renewal_failures = renewal_failures_.load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < kLockLostReasonCount; ++i)
    snapshot.locks_lost[i] = locks_lost_[i].load(std::memory_order_relaxed);
  snapshot.acquire_wait = acquire_wait_.snapshot();
  snapshot.script_round_trip = script_round_trip_.snapshot();
  snapshot.handoff_gap = handoff_gap_.snapshot();
  for (std::size_t i = 0; i < kFlavorCount; ++i) {
    snapshot.holds[i] = holds_[i].load(std::memory_order_relaxed);
    snapshot.waiters[i] = waiters_[i].load(std::memory_order_relaxed);
  }
  snapshot.hold_time = hold_time_.snapshot();
  return snapshot;
}

}  // namespace detail

namespace {

void check_label_name(const std::string& name) {
  const bool valid = !name.empty() && !name.starts_with("__") &&
                     (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
                     std::all_of(name.begin(), name.end(),
                                 [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
  if (!valid) throw InvalidArgumentError("metric label name " + in_quotes(name) + " is not [a-zA-Z_][a-zA-Z0-9_]*");
  if (name == "flavor" || name == "reason" || name == "le")
    throw InvalidArgumentError("metric label name " + in_quotes(name) + " is one the metrics use themselves");
}

// "{a=\"x\",b=\"y\"}" of the constant labels plus `extra` (empty: no braces).
std::string label_set(const MetricLabels& labels, const MetricLabels& extra = {}) {
  std::string text;
  for (const MetricLabels* set : {&labels, &extra}) {
    for (const auto& [name, value] : *set) {
      text += text.empty() ? "{" : ",";
      text += name + "=\"" + escape_label_value(value) + "\"";
    }
  }
  return text.empty() ? text : text + "}";
}

// Seconds from microseconds, exactly as a decimal ("0.00025", "60").
std::string seconds_text(std::int64_t us) {
  char text[48];
  std::snprintf(text, sizeof(text), "%lld.%06lld", static_cast<long long>(us / 1'000'000),
                static_cast<long long>(us % 1'000'000));
  std::string seconds(text);
  seconds.erase(seconds.find_last_not_of('0') + 1);
  if (seconds.back() == '.') seconds.pop_back();
  return seconds;
}

void header(std::ostream& out, std::string_view name, std::string_view type, std::string_view help) {
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

// A counter family: its samples of one snapshot (one per sub-label value).
struct CounterFamily {
  std::string_view name;
  std::string_view help;
  std::function<void(std::ostream&, const LabelledMetrics&)> samples;
};

// A counter without a sub-label.
CounterFamily plain_counter(std::string_view name, std::string_view help,
                            std::uint64_t (*value)(const MetricsSnapshot&)) {
  return {name, help, [name, value](std::ostream& out, const LabelledMetrics& metrics) {
            out << name << label_set(metrics.labels) << ' ' << value(metrics.snapshot) << '\n';
          }};
}

const std::vector<CounterFamily>& counter_families() {
  static const std::vector<CounterFamily> families = {
      {"turnstile_acquisitions_total", "Holds taken (locks, semaphore permits, composite locks), by flavor.",
       [](std::ostream& out, const LabelledMetrics& metrics) {
         for (Flavor flavor : kAllFlavors) {
           out << "turnstile_acquisitions_total"
               << label_set(metrics.labels, {{"flavor", std::string(flavor_name(flavor))}}) << ' '
               << metrics.snapshot.acquisitions_of(flavor) << '\n';
         }
       }},
      plain_counter("turnstile_failed_tries_total", "Acquisitions that gave up with nothing taken.",
                    [](const MetricsSnapshot& s) { return s.failed_tries; }),
      plain_counter("turnstile_unreplicated_grants_total",
                    "Grants undone: no replica acknowledged them within the replica-sync timeout, or the "
                    "master did not confirm their AOF fsync within aof_sync_timeout_ms.",
                    [](const MetricsSnapshot& s) { return s.unreplicated_grants; }),
      plain_counter("turnstile_handoffs_received_total",
                    "Acquisitions that succeeded after a release message woke the waiter.",
                    [](const MetricsSnapshot& s) { return s.handoffs_received; }),
      plain_counter("turnstile_renewals_total", "Leases the watchdog renewed.",
                    [](const MetricsSnapshot& s) { return s.renewals; }),
      plain_counter("turnstile_renewal_failures_total", "Leases whose renewal call failed or timed out.",
                    [](const MetricsSnapshot& s) { return s.renewal_failures; }),
      {"turnstile_locks_lost_total", "Holds lost while believed held, by reason.",
       [](std::ostream& out, const LabelledMetrics& metrics) {
         for (LockLostReason reason : kAllLockLostReasons) {
           out << "turnstile_locks_lost_total"
               << label_set(metrics.labels, {{"reason", std::string(lock_lost_reason_name(reason))}}) << ' '
               << metrics.snapshot.locks_lost_by(reason) << '\n';
         }
       }},
      plain_counter("turnstile_reconnects_total", "Connections the backend opened again after one broke.",
                    [](const MetricsSnapshot& s) { return s.reconnects; }),
      plain_counter("turnstile_script_reloads_total", "Scripts loaded again after NOSCRIPT.",
                    [](const MetricsSnapshot& s) { return s.script_reloads; }),
  };
  return families;
}

// A gauge family by flavor.
struct GaugeFamily {
  std::string_view name;
  std::string_view help;
  std::array<std::int64_t, kFlavorCount> MetricsSnapshot::*values;
};

constexpr std::array kGaugeFamilies = {
    GaugeFamily{"turnstile_holds", "Holds this client believes it has now, by flavor.", &MetricsSnapshot::holds},
    GaugeFamily{"turnstile_waiters", "Acquisitions of this client waiting now, by flavor.", &MetricsSnapshot::waiters},
};

// One histogram of a snapshot: its bucket counts (not cumulative) and
// their upper bounds (µs), its sum (µs) and count.
struct HistogramView {
  std::span<const std::uint64_t> counts;
  std::span<const std::int64_t> bounds_us;
  std::int64_t sum_us = 0;
  std::uint64_t count = 0;
};

template <typename Histogram, std::size_t N>
HistogramView view_of(const Histogram& histogram, const std::array<std::int64_t, N>& bounds_us) {
  static_assert(std::tuple_size_v<decltype(histogram.counts)> == N + 1);
  return {histogram.counts, bounds_us, histogram.sum_us, histogram.count};
}

struct HistogramFamily {
  std::string_view name;
  std::string_view help;
  HistogramView (*view)(const MetricsSnapshot&);
};

constexpr std::array kHistogramFamilies = {
    HistogramFamily{"turnstile_acquire_wait_seconds", "From the start of an acquisition to its success.",
                    [](const MetricsSnapshot& s) { return view_of(s.acquire_wait, kLatencyBucketBoundsUs); }},
    HistogramFamily{"turnstile_script_round_trip_seconds", "Each script call, from sending to the reply.",
                    [](const MetricsSnapshot& s) { return view_of(s.script_round_trip, kLatencyBucketBoundsUs); }},
    HistogramFamily{"turnstile_handoff_gap_seconds", "From the release message's arrival to the acquisition it woke.",
                    [](const MetricsSnapshot& s) { return view_of(s.handoff_gap, kLatencyBucketBoundsUs); }},
    HistogramFamily{"turnstile_hold_seconds", "Each hold, from its acquisition to its release or loss.",
                    [](const MetricsSnapshot& s) { return view_of(s.hold_time, kHoldBucketBoundsUs); }},
};

void histogram_samples(std::ostream& out, std::string_view name, const MetricLabels& labels,
                       const HistogramView& histogram) {
  TURNSTILE_CHECK(histogram.counts.size() == histogram.bounds_us.size() + 1);
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < histogram.counts.size(); ++i) {
    cumulative += histogram.counts[i];
    const std::string le = i < histogram.bounds_us.size() ? seconds_text(histogram.bounds_us[i]) : "+Inf";
    out << name << "_bucket" << label_set(labels, {{"le", le}}) << ' ' << cumulative << '\n';
  }
  out << name << "_sum" << label_set(labels) << ' ' << seconds_text(histogram.sum_us) << '\n';
  out << name << "_count" << label_set(labels) << ' ' << histogram.count << '\n';
}

}  // namespace

std::string escape_label_value(std::string_view value) {
  std::string escaped;
  escaped.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      escaped += "\\\\";
    } else if (c == '"') {
      escaped += "\\\"";
    } else if (c == '\n') {
      escaped += "\\n";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

namespace {

template <typename Histogram>
void add_histogram(Histogram& sum, const Histogram& other) {
  for (std::size_t i = 0; i < sum.counts.size(); ++i) sum.counts[i] += other.counts[i];
  sum.count += other.count;
  sum.sum_us += other.sum_us;
}

}  // namespace

LatencyHistogram& LatencyHistogram::operator+=(const LatencyHistogram& other) {
  add_histogram(*this, other);
  return *this;
}

HoldTimeHistogram& HoldTimeHistogram::operator+=(const HoldTimeHistogram& other) {
  add_histogram(*this, other);
  return *this;
}

std::uint64_t MetricsSnapshot::total_locks_lost() const {
  std::uint64_t total = 0;
  for (std::uint64_t count : locks_lost) total += count;
  return total;
}

MetricsSnapshot& MetricsSnapshot::operator+=(const MetricsSnapshot& other) {
  for (std::size_t i = 0; i < kFlavorCount; ++i) acquisitions[i] += other.acquisitions[i];
  failed_tries += other.failed_tries;
  unreplicated_grants += other.unreplicated_grants;
  handoffs_received += other.handoffs_received;
  renewals += other.renewals;
  renewal_failures += other.renewal_failures;
  for (std::size_t i = 0; i < kLockLostReasonCount; ++i) locks_lost[i] += other.locks_lost[i];
  reconnects += other.reconnects;
  script_reloads += other.script_reloads;
  acquire_wait += other.acquire_wait;
  script_round_trip += other.script_round_trip;
  handoff_gap += other.handoff_gap;
  for (std::size_t i = 0; i < kFlavorCount; ++i) {
    holds[i] += other.holds[i];
    waiters[i] += other.waiters[i];
  }
  hold_time += other.hold_time;
  return *this;
}

void write_prometheus(std::ostream& out, const std::vector<LabelledMetrics>& snapshots) {
  for (const LabelledMetrics& metrics : snapshots) {
    for (const auto& [name, value] : metrics.labels) check_label_name(name);
  }
  for (const CounterFamily& family : counter_families()) {
    header(out, family.name, "counter", family.help);
    for (const LabelledMetrics& metrics : snapshots) family.samples(out, metrics);
  }
  for (const GaugeFamily& family : kGaugeFamilies) {
    header(out, family.name, "gauge", family.help);
    for (const LabelledMetrics& metrics : snapshots) {
      for (Flavor flavor : kAllFlavors) {
        out << family.name << label_set(metrics.labels, {{"flavor", std::string(flavor_name(flavor))}}) << ' '
            << (metrics.snapshot.*family.values)[static_cast<std::size_t>(flavor)] << '\n';
      }
    }
  }
  for (const HistogramFamily& family : kHistogramFamilies) {
    header(out, family.name, "histogram", family.help);
    for (const LabelledMetrics& metrics : snapshots)
      histogram_samples(out, family.name, metrics.labels, family.view(metrics.snapshot));
  }
}

void write_prometheus(std::ostream& out, const MetricsSnapshot& snapshot, const MetricLabels& labels) {
  write_prometheus(out, {LabelledMetrics{.labels = labels, .snapshot = snapshot}});
}

std::string to_prometheus(const MetricsSnapshot& snapshot, const MetricLabels& labels) {
  std::ostringstream out;
  write_prometheus(out, snapshot, labels);
  return out.str();
}

}  // namespace turnstile
