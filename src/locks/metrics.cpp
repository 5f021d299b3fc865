// Client metrics: the recorder (locks/metrics_recorder.h) and the
// Prometheus text exposition format (turnstile/metrics.h).

#include "turnstile/metrics.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string_view>
#include <sstream>

#include "locks/metrics_recorder.h"
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
  assert(false && "every reason has a name");
  return "unknown";
}

std::uint64_t MetricsSnapshot::total_acquisitions() const {
  std::uint64_t total = 0;
  for (std::uint64_t count : acquisitions) total += count;
  return total;
}

namespace detail {

void LatencyRecorder::record(Duration latency) {
  const std::int64_t us =
      std::max<std::int64_t>(0, std::chrono::duration_cast<std::chrono::microseconds>(latency).count());
  const auto bound = std::lower_bound(kLatencyBucketBoundsUs.begin(), kLatencyBucketBoundsUs.end(), us);
  counts_[static_cast<std::size_t>(bound - kLatencyBucketBoundsUs.begin())].fetch_add(1, std::memory_order_relaxed);
  sum_us_.fetch_add(us, std::memory_order_relaxed);
}

LatencyHistogram LatencyRecorder::snapshot() const {
  LatencyHistogram histogram;
  for (std::size_t i = 0; i < kLatencyBucketCount; ++i) {
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

void MetricsRecorder::lost(LockLostReason reason) {
  locks_lost_[static_cast<std::size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
}

MetricsSnapshot MetricsRecorder::snapshot() const {
  MetricsSnapshot snapshot;
  for (std::size_t i = 0; i < kFlavorCount; ++i)
    snapshot.acquisitions[i] = acquisitions_[i].load(std::memory_order_relaxed);
  snapshot.failed_tries = failed_tries_.load(std::memory_order_relaxed);
  snapshot.handoffs_received = handoffs_received_.load(std::memory_order_relaxed);
  snapshot.renewals = renewals_.load(std::memory_order_relaxed);
  snapshot.renewal_failures = renewal_failures_.load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < kLockLostReasonCount; ++i)
    snapshot.locks_lost[i] = locks_lost_[i].load(std::memory_order_relaxed);
  snapshot.acquire_wait = acquire_wait_.snapshot();
  snapshot.script_round_trip = script_round_trip_.snapshot();
  snapshot.handoff_gap = handoff_gap_.snapshot();
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

struct HistogramFamily {
  std::string_view name;
  std::string_view help;
  LatencyHistogram MetricsSnapshot::*histogram;
};

constexpr std::array kHistogramFamilies = {
    HistogramFamily{"turnstile_acquire_wait_seconds", "From the start of an acquisition to its success.",
                    &MetricsSnapshot::acquire_wait},
    HistogramFamily{"turnstile_script_round_trip_seconds", "Each script call, from sending to the reply.",
                    &MetricsSnapshot::script_round_trip},
    HistogramFamily{"turnstile_handoff_gap_seconds", "From the release message's arrival to the acquisition it woke.",
                    &MetricsSnapshot::handoff_gap},
};

void histogram_samples(std::ostream& out, std::string_view name, const MetricLabels& labels,
                       const LatencyHistogram& histogram) {
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < kLatencyBucketCount; ++i) {
    cumulative += histogram.counts[i];
    const std::string le = i < kLatencyBucketBoundsUs.size() ? seconds_text(kLatencyBucketBoundsUs[i]) : "+Inf";
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

LatencyHistogram& LatencyHistogram::operator+=(const LatencyHistogram& other) {
  for (std::size_t i = 0; i < kLatencyBucketCount; ++i) counts[i] += other.counts[i];
  count += other.count;
  sum_us += other.sum_us;
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
  handoffs_received += other.handoffs_received;
  renewals += other.renewals;
  renewal_failures += other.renewal_failures;
  for (std::size_t i = 0; i < kLockLostReasonCount; ++i) locks_lost[i] += other.locks_lost[i];
  reconnects += other.reconnects;
  script_reloads += other.script_reloads;
  acquire_wait += other.acquire_wait;
  script_round_trip += other.script_round_trip;
  handoff_gap += other.handoff_gap;
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
  for (const HistogramFamily& family : kHistogramFamilies) {
    header(out, family.name, "histogram", family.help);
    for (const LabelledMetrics& metrics : snapshots)
      histogram_samples(out, family.name, metrics.labels, metrics.snapshot.*family.histogram);
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
