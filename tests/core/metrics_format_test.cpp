// The Prometheus text exposition of MetricsSnapshot (turnstile/metrics.h):
// the exact text of the counters and of one histogram, cumulative buckets
// in seconds, label escaping and the label names refused.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
  ASSERT_EQ(lines.size(), counters.size() + 3 * histogram_lines);
  for (std::size_t i = 0; i < counters.size(); ++i) EXPECT_EQ(lines[i], counters[i]) << "line " << i + 1;
  for (std::size_t i = 0; i < acquire_wait.size(); ++i)
    EXPECT_EQ(lines[counters.size() + i], acquire_wait[i]) << "line " << counters.size() + i + 1;
  // The handoff gap beyond the last bound: 0 in every finite bucket.
  const std::size_t gap = counters.size() + 2 * histogram_lines;
  EXPECT_EQ(lines[gap + 2 + kLatencyBucketCount - 2], "turnstile_handoff_gap_seconds_bucket{le=\"60\"} 0");
  EXPECT_EQ(lines[gap + 2 + kLatencyBucketCount - 1], "turnstile_handoff_gap_seconds_bucket{le=\"+Inf\"} 1");
  EXPECT_EQ(lines[gap + 2 + kLatencyBucketCount], "turnstile_handoff_gap_seconds_sum 61");
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
}

}  // namespace
}  // namespace turnstile
