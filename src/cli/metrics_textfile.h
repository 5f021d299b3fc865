// cli/metrics_textfile.h
//
// `turnstile run --metrics-textfile FILE`: what one run did, for
// node_exporter's textfile collector (a cron job has no endpoint to be
// scraped). Written once, when `run` exits, whatever the way out, and
// atomically (a temporary file in the same directory, renamed over FILE),
// so the collector never reads half a file:
//
//   turnstile_run_outcome{name="backup:db",outcome="acquired"} 1   (one of
//       acquired, skipped, lost, interrupted, error: 1 for what happened,
//       0 for the others)
//   turnstile_run_wait_seconds{name=...}       start of the wait to the lock
//                                              (or to giving up)
//   turnstile_run_hold_seconds{name=...}       lock taken to released (0 if
//                                              never held)
//   turnstile_run_exit_status{name=...}        what `run` exited with
//   turnstile_run_finished_timestamp_seconds{name=...}   Unix time
//
// followed by the run's client's own metrics at its end (turnstile/metrics.h:
// counters, the holds and waiters gauges, the hold-time and latency
// histograms), each sample labelled name=... too.
//
// The name label is the lock name, escaped as Prometheus wants (\\, \",
// \n) with any byte that is not printable ASCII as \xHH.

#ifndef TURNSTILE_CLI_METRICS_TEXTFILE_H_
#define TURNSTILE_CLI_METRICS_TEXTFILE_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace turnstile::cli {

// Every outcome, in the order the file lists them.
inline constexpr std::array<std::string_view, 5> kRunOutcomes = {"acquired", "skipped", "lost", "interrupted", "error"};

struct RunReport {
  std::string name;
  std::string_view outcome = "error";  // one of kRunOutcomes
  double wait_seconds = 0;
  double hold_seconds = 0;
  int exit_status = 0;
  std::int64_t finished_epoch_ms = 0;
  // The client's metrics in the text format (to_prometheus), appended as
  // they are; empty if no client was made.
  std::string client_metrics;
};

// The file's text.
std::string metrics_textfile_text(const RunReport& report);

// Throws UsageError if `path` cannot be written where it is (its directory
// missing, or `path` a directory): checked before anything is held.
void check_metrics_textfile_path(const std::string& path);

// Writes the text to `path` atomically; returns an empty string, or why it
// could not (the caller tells it on stderr; the run's status stands).
std::string write_metrics_textfile(const std::string& path, const RunReport& report);

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_METRICS_TEXTFILE_H_
