// The Prometheus text exposition of MetricsSnapshot (turnstile/metrics.h):
// the exact text of the counters and of one histogram, cumulative buckets
// in seconds, label escaping and the label names refused.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "turnstile/errors.h"
#include "turnstile/metrics.h"

namespace turnstile {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}

MetricsSnapshot sample_snapshot() {
  MetricsSnapshot snapshot;
  snapshot.acquisitions[static_cast<std::size_t>(Flavor::reentrant)] = 3;
  snapshot.acquisitions[static_cast<std::size_t>(Flavor::fair)] = 1;
  snapshot.failed_tries = 2;
  snapshot.unreplicated_grants = 3;
  snapshot.handoffs_received = 1;
  snapshot.renewals = 5;
  snapshot.renewal_failures = 1;
  snapshot.locks_lost[static_cast<std::size_t>(LockLostReason::lease_expired)] = 1;
  snapshot.reconnects = 4;
  snapshot.script_reloads = 2;
  // 40 µs, 300 µs and 3 s: buckets <= 50 µs, <= 500 µs and <= 5 s.
  snapshot.acquire_wait.counts[0] = 1;
  snapshot.acquire_wait.counts[3] = 1;
  snapshot.acquire_wait.counts[15] = 1;
  snapshot.acquire_wait.count = 3;
  snapshot.acquire_wait.sum_us = 3'000'340;
  // One beyond the last bound (60 s): only +Inf holds it.
  snapshot.handoff_gap.counts.back() = 1;
  snapshot.handoff_gap.count = 1;
  snapshot.handoff_gap.sum_us = 61'000'000;
  return snapshot;
}

TEST(MetricsFormatTest, CountersAndAHistogramWordForWord) {
  const std::vector<std::string> lines = lines_of(to_prometheus(sample_snapshot()));
  const std::vector<std::string> counters = {
      "# HELP turnstile_acquisitions_total Holds taken (locks, semaphore permits, composite locks), by flavor.",
      "# TYPE turnstile_acquisitions_total counter",
      "turnstile_acquisitions_total{flavor=\"reentrant\"} 3",
      "turnstile_acquisitions_total{flavor=\"token\"} 0",
      "turnstile_acquisitions_total{flavor=\"fair\"} 1",
      "turnstile_acquisitions_total{flavor=\"semaphore\"} 0",
      "turnstile_acquisitions_total{flavor=\"counting-semaphore\"} 0",
      "turnstile_acquisitions_total{flavor=\"redlock\"} 0",
      "turnstile_acquisitions_total{flavor=\"multilock\"} 0",
      "turnstile_acquisitions_total{flavor=\"read-write\"} 0",
      "# HELP turnstile_failed_tries_total Acquisitions that gave up with nothing taken.",
      "# TYPE turnstile_failed_tries_total counter",
      "turnstile_failed_tries_total 2",
      "# HELP turnstile_unreplicated_grants_total Grants undone: no replica acknowledged them within the "
      "replica-sync timeout, or the master did not confirm their AOF fsync within aof_sync_timeout_ms.",
      "# TYPE turnstile_unreplicated_grants_total counter",
      "turnstile_unreplicated_grants_total 3",
      "# HELP turnstile_handoffs_received_total Acquisitions that succeeded after a release message woke the waiter.",
      "# TYPE turnstile_handoffs_received_total counter",
      "turnstile_handoffs_received_total 1",
      "# HELP turnstile_renewals_total Leases the watchdog renewed.",
      "# TYPE turnstile_renewals_total counter",
      "turnstile_renewals_total 5",
      "# HELP turnstile_renewal_failures_total Leases whose renewal call failed or timed out.",
      "# TYPE turnstile_renewal_failures_total counter",
      "turnstile_renewal_failures_total 1",
      "# HELP turnstile_locks_lost_total Holds lost while believed held, by reason.",
      "# TYPE turnstile_locks_lost_total counter",
      "turnstile_locks_lost_total{reason=\"gone\"} 0",
      "turnstile_locks_lost_total{reason=\"lease_expired\"} 1",
      "turnstile_locks_lost_total{reason=\"max_hold_reached\"} 0",
      "turnstile_locks_lost_total{reason=\"server_restarted\"} 0",
      "# HELP turnstile_reconnects_total Connections the backend opened again after one broke.",
      "# TYPE turnstile_reconnects_total counter",
      "turnstile_reconnects_total 4",
      "# HELP turnstile_script_reloads_total Scripts loaded again after NOSCRIPT.",
      "# TYPE turnstile_script_reloads_total counter",
      "turnstile_script_reloads_total 2",
  };
  const std::vector<std::string> acquire_wait = {
      "# HELP turnstile_acquire_wait_seconds From the start of an acquisition to its success.",
      "# TYPE turnstile_acquire_wait_seconds histogram",
      "turnstile_acquire_wait_seconds_bucket{le=\"0.00005\"} 1",
      "turnstile_acquire_wait_seconds_bucket{le=\"0.0001\"} 1",
      "turnstile_acquire_wait_seconds_bucket{le=\"0.00025\"} 1",
      "turnstile_acquire_wait_seconds_bucket{le=\"0.0005\"} 2",
      "turnstile_acquire_wait_seconds_bucket{le=\"0.001\"} 2",
      "turnstile_acquire_wait_seconds_bucket{le=\"0.0025\"} 2",
      "turnstile_acquire_wait_seconds_bucket{le=\"0.005\"} 2",
      "turnstile_acquire_wait_seconds_bucket{le=\"0.01\"} 2",
      "turnstile_acquire_wait_seconds_bucket{le=\"0.025\"} 2",
      "turnstile_acquire_wait_seconds_bucket{le=\"0.05\"} 2",
      "turnstile_acquire_wait_seconds_bucket{le=\"0.1\"} 2",
      "turnstile_acquire_wait_seconds_bucket{le=\"0.25\"} 2",
      "turnstile_acquire_wait_seconds_bucket{le=\"0.5\"} 2",
      "turnstile_acquire_wait_seconds_bucket{le=\"1\"} 2",
      "turnstile_acquire_wait_seconds_bucket{le=\"2.5\"} 2",
      "turnstile_acquire_wait_seconds_bucket{le=\"5\"} 3",
      "turnstile_acquire_wait_seconds_bucket{le=\"10\"} 3",
      "turnstile_acquire_wait_seconds_bucket{le=\"30\"} 3",
      "turnstile_acquire_wait_seconds_bucket{le=\"60\"} 3",
      "turnstile_acquire_wait_seconds_bucket{le=\"+Inf\"} 3",
      "turnstile_acquire_wait_seconds_sum 3.00034",
      "turnstile_acquire_wait_seconds_count 3",
  };
  const std::size_t histogram_lines = 2 + kLatencyBucketCount + 2;
  const std::size_t gauge_lines = 2 * (2 + kFlavorCount);
  const std::size_t hold_histogram_lines = 2 + kHoldBucketCount + 2;
  ASSERT_EQ(lines.size(), counters.size() + gauge_lines + 3 * histogram_lines + hold_histogram_lines);
  for (std::size_t i = 0; i < counters.size(); ++i) EXPECT_EQ(lines[i], counters[i]) << "line " << i + 1;
  const std::size_t histograms = counters.size() + gauge_lines;
  for (std::size_t i = 0; i < acquire_wait.size(); ++i)
    EXPECT_EQ(lines[histograms + i], acquire_wait[i]) << "line " << histograms + i + 1;
  // The handoff gap beyond the last bound: 0 in every finite bucket.
  const std::size_t gap = histograms + 2 * histogram_lines;
  EXPECT_EQ(lines[gap + 2 + kLatencyBucketCount - 2], "turnstile_handoff_gap_seconds_bucket{le=\"60\"} 0");
  EXPECT_EQ(lines[gap + 2 + kLatencyBucketCount - 1], "turnstile_handoff_gap_seconds_bucket{le=\"+Inf\"} 1");
  EXPECT_EQ(lines[gap + 2 + kLatencyBucketCount], "turnstile_handoff_gap_seconds_sum 61");
}

TEST(MetricsFormatTest, GaugesAndTheHoldTimeHistogramWordForWord) {
  MetricsSnapshot snapshot;
  snapshot.holds[static_cast<std::size_t>(Flavor::reentrant)] = 2;
  snapshot.holds[static_cast<std::size_t>(Flavor::semaphore)] = 3;
  snapshot.waiters[static_cast<std::size_t>(Flavor::fair)] = 4;
  // 50 ms and 2 h: buckets <= 100 ms and <= 2 h.
  snapshot.hold_time.counts[1] = 1;
  snapshot.hold_time.counts[11] = 1;
  snapshot.hold_time.count = 2;
  snapshot.hold_time.sum_us = 7'200'050'000;
  const std::string text = to_prometheus(snapshot, {{"client", "c"}});
  EXPECT_THAT(text, HasSubstr("# HELP turnstile_holds Holds this client believes it has now, by flavor.\n"
                              "# TYPE turnstile_holds gauge\n"
                              "turnstile_holds{client=\"c\",flavor=\"reentrant\"} 2\n"
                              "turnstile_holds{client=\"c\",flavor=\"token\"} 0\n"
                              "turnstile_holds{client=\"c\",flavor=\"fair\"} 0\n"
                              "turnstile_holds{client=\"c\",flavor=\"semaphore\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE turnstile_waiters gauge\n"));
  EXPECT_THAT(text, HasSubstr("turnstile_waiters{client=\"c\",flavor=\"fair\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE turnstile_hold_seconds histogram\n"
                              "turnstile_hold_seconds_bucket{client=\"c\",le=\"0.01\"} 0\n"
                              "turnstile_hold_seconds_bucket{client=\"c\",le=\"0.1\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("turnstile_hold_seconds_bucket{client=\"c\",le=\"3600\"} 1\n"
                              "turnstile_hold_seconds_bucket{client=\"c\",le=\"7200\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("turnstile_hold_seconds_bucket{client=\"c\",le=\"86400\"} 2\n"
                              "turnstile_hold_seconds_bucket{client=\"c\",le=\"+Inf\"} 2\n"
                              "turnstile_hold_seconds_sum{client=\"c\"} 7200.05\n"
                              "turnstile_hold_seconds_count{client=\"c\"} 2\n"));
}

// What `promtool check metrics` and Prometheus's parser require of the
// whole exposition: every sample's family declared once by a TYPE line
// before its samples, no family twice, a histogram's buckets cumulative
// with le ascending and ending at +Inf equal to its _count, no sample
// (name and labels) twice.
TEST(MetricsFormatTest, TheWholeExpositionIsWellFormed) {
  MetricsSnapshot snapshot = sample_snapshot();
  snapshot.holds[0] = 1;
  snapshot.waiters[2] = 1;
  snapshot.hold_time.counts[4] = 3;
  snapshot.hold_time.count = 3;
  snapshot.hold_time.sum_us = 21'000'000;
  std::map<std::string, std::string> types;
  std::set<std::string> samples;
  std::string family;
  double last_le = -1;
  std::uint64_t last_bucket = 0;
  std::uint64_t inf_bucket = 0;
  for (const std::string& line : lines_of(to_prometheus(snapshot, {{"client", "x"}}))) {
    if (line.starts_with("# HELP ")) continue;
    if (line.starts_with("# TYPE ")) {
      std::istringstream words(line.substr(7));
      std::string type;
      words >> family >> type;
      ASSERT_TRUE(types.emplace(family, type).second) << "family twice: " << family;
      ASSERT_TRUE(type == "counter" || type == "gauge" || type == "histogram") << line;
      last_le = -1;
      last_bucket = 0;
      continue;
    }
    ASSERT_TRUE(samples.insert(line.substr(0, line.rfind(' '))).second) << "sample twice: " << line;
    const std::string name = line.substr(0, line.find_first_of("{ "));
    const std::string value = line.substr(line.rfind(' ') + 1);
    if (types[family] != "histogram") {
      ASSERT_EQ(name, family) << line;
      continue;
    }
    if (name == family + "_bucket") {
      const std::size_t le_at = line.find("le=\"") + 4;
      const std::string le = line.substr(le_at, line.find('"', le_at) - le_at);
      const double bound = le == "+Inf" ? 1e300 : std::stod(le);
      EXPECT_GT(bound, last_le) << line;
      EXPECT_GE(std::stoull(value), last_bucket) << line;
      last_le = bound;
      last_bucket = std::stoull(value);
      if (le == "+Inf") inf_bucket = last_bucket;
    } else if (name == family + "_count") {
      EXPECT_EQ(last_le, 1e300) << family << ": +Inf is the last bucket";
      EXPECT_EQ(std::stoull(value), inf_bucket) << line;
    } else {
      ASSERT_EQ(name, family + "_sum") << line;
    }
  }
  EXPECT_EQ(types["turnstile_holds"], "gauge");
  EXPECT_EQ(types["turnstile_waiters"], "gauge");
  EXPECT_EQ(types["turnstile_hold_seconds"], "histogram");
}

TEST(MetricsFormatTest, LabelsComeFirstAndValuesAreEscaped) {
  const std::string text = to_prometheus(sample_snapshot(), {{"client", "a\"b\\c\nd"}, {"service", "orders"}});
  EXPECT_THAT(text, HasSubstr("turnstile_acquisitions_total{client=\"a\\\"b\\\\c\\nd\",service=\"orders\","
                              "flavor=\"reentrant\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("turnstile_failed_tries_total{client=\"a\\\"b\\\\c\\nd\",service=\"orders\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("turnstile_acquire_wait_seconds_bucket{client=\"a\\\"b\\\\c\\nd\",service=\"orders\","
                              "le=\"+Inf\"} 3\n"));
  // No raw newline inside a sample: every line is a comment or a sample.
  for (const std::string& line : lines_of(text)) {
    EXPECT_TRUE(line.starts_with("# ") || line.starts_with("turnstile_")) << line;
  }
}

TEST(MetricsFormatTest, SeveralSnapshotsShareOneHelpAndTypePerMetric) {
  MetricsSnapshot other;
  other.failed_tries = 7;
  std::ostringstream out;
  write_prometheus(out, {LabelledMetrics{.labels = {{"client", "a"}}, .snapshot = sample_snapshot()},
                         LabelledMetrics{.labels = {{"client", "b"}}, .snapshot = other}});
  const std::string text = out.str();
  EXPECT_EQ(count_of(text, "# TYPE turnstile_failed_tries_total counter\n"), 1u);
  EXPECT_EQ(count_of(text, "# TYPE turnstile_acquire_wait_seconds histogram\n"), 1u);
  EXPECT_THAT(text, HasSubstr("# TYPE turnstile_failed_tries_total counter\n"
                              "turnstile_failed_tries_total{client=\"a\"} 2\n"
                              "turnstile_failed_tries_total{client=\"b\"} 7\n"));
}

TEST(MetricsFormatTest, RefusesLabelNamesPrometheusWouldRejectBeforeWriting) {
  for (const char* name : {"", "1x", "a-b", "__reserved", "le", "flavor", "reason", "caf\xc3\xa9"}) {
    std::ostringstream out;
    EXPECT_THROW(write_prometheus(out, sample_snapshot(), {{name, "v"}}), InvalidArgumentError) << name;
    EXPECT_TRUE(out.str().empty()) << "nothing written for " << name;
  }
  EXPECT_NO_THROW(to_prometheus(sample_snapshot(), {{"_ok", "v"}, {"Client2", ""}}));
}

TEST(MetricsFormatTest, SnapshotsAdd) {
  MetricsSnapshot total = sample_snapshot();
  total += sample_snapshot();
  EXPECT_EQ(total.acquisitions_of(Flavor::reentrant), 6u);
  EXPECT_EQ(total.total_acquisitions(), 8u);
  EXPECT_EQ(total.locks_lost_by(LockLostReason::lease_expired), 2u);
  EXPECT_EQ(total.total_locks_lost(), 2u);
  EXPECT_EQ(total.reconnects, 8u);
  EXPECT_EQ(total.acquire_wait.count, 6u);
  EXPECT_EQ(total.acquire_wait.counts[15], 2u);
  EXPECT_EQ(total.acquire_wait.sum_us, 6'000'680);
  EXPECT_EQ(total.handoff_gap.counts.back(), 2u);
  MetricsSnapshot held;
  held.holds[1] = 2;
  held.waiters[3] = 1;
  held.hold_time.counts[0] = 1;
  held.hold_time.count = 1;
  total += held;
  EXPECT_EQ(total.holds_of(Flavor::token), 2);
  EXPECT_EQ(total.waiters_of(Flavor::semaphore), 1);
  EXPECT_EQ(total.hold_time.count, 1u);
}

}  // namespace
}  // namespace turnstile
