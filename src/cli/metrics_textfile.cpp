// `run --metrics-textfile`: node_exporter's textfile format, written
// atomically (cli/metrics_textfile.h).

#include "cli/metrics_textfile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cli/exit_status.h"
#include "turnstile/metrics.h"

namespace turnstile::cli {
namespace {

// Prometheus wants UTF-8: a byte that is not printable ASCII becomes the
// text \xHH, then the value is escaped as the library escapes labels.
std::string label_value(std::string_view name) {
  std::string printable;
  for (const char c : name) {
    const auto byte = static_cast<unsigned char>(c);
    if (c != '\n' && (byte < 0x20 || byte >= 0x7f)) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", byte);
      printable += hex;
    } else {
      printable += c;
    }
  }
  return escape_label_value(printable);
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.6f", value);
  return text;
}

std::string directory_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

std::string metrics_textfile_text(const RunReport& report) {
  const std::string name = "name=\"" + label_value(report.name) + "\"";
  std::string text;
  const auto metric = [&](std::string_view metric_name, std::string_view help, std::string_view type) {
    text += "# HELP " + std::string(metric_name) + " " + std::string(help) + "\n";
    text += "# TYPE " + std::string(metric_name) + " " + std::string(type) + "\n";
  };
  metric("turnstile_run_outcome", "What the last turnstile run of this lock did: 1 for its outcome.", "gauge");
  for (const std::string_view outcome : kRunOutcomes) {
    text += "turnstile_run_outcome{" + name + ",outcome=\"" + std::string(outcome) + "\"} " +
            (outcome == report.outcome ? "1" : "0") + "\n";
  }
  metric("turnstile_run_wait_seconds", "Seconds the run waited for the lock (or until it gave up).", "gauge");
  text += "turnstile_run_wait_seconds{" + name + "} " + number(report.wait_seconds) + "\n";
  metric("turnstile_run_hold_seconds", "Seconds the run held the lock (0 if never held).", "gauge");
  text += "turnstile_run_hold_seconds{" + name + "} " + number(report.hold_seconds) + "\n";
  metric("turnstile_run_exit_status", "The exit status of turnstile run.", "gauge");
  text += "turnstile_run_exit_status{" + name + "} " + std::to_string(report.exit_status) + "\n";
  metric("turnstile_run_finished_timestamp_seconds", "When the run ended, Unix time.", "gauge");
  text += "turnstile_run_finished_timestamp_seconds{" + name + "} " +
          number(static_cast<double>(report.finished_epoch_ms) / 1000.0) + "\n";
  return text + report.client_metrics;
}

void check_metrics_textfile_path(const std::string& path) {
  if (path.empty()) throw UsageError("--metrics-textfile: empty path");
  struct stat seen {};
  if (stat(path.c_str(), &seen) == 0 && S_ISDIR(seen.st_mode)) {
    throw UsageError("--metrics-textfile: '" + path + "' is a directory");
  }
  const std::string directory = directory_of(path);
  if (access(directory.c_str(), W_OK | X_OK) != 0) {
    throw UsageError("--metrics-textfile: cannot write in '" + directory + "': " + std::strerror(errno));
  }
}

std::string write_metrics_textfile(const std::string& path, const RunReport& report) {
  const std::string text = metrics_textfile_text(report);
  const std::string temporary = path + ".tmp." + std::to_string(getpid());
  const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot create '" + temporary + "': " + std::strerror(errno);
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t count = write(fd, text.data() + written, text.size() - written);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) {
      const std::string why = "cannot write '" + temporary + "': " + std::strerror(errno);
      close(fd);
      unlink(temporary.c_str());
      return why;
    }
    written += static_cast<std::size_t>(count);
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    const std::string why = "cannot write '" + temporary + "': " + std::strerror(errno);
    unlink(temporary.c_str());
    return why;
  }
  if (rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string why = "cannot rename '" + temporary + "' to '" + path + "': " + std::strerror(errno);
    unlink(temporary.c_str());
    return why;
  }
  return {};
}

}  // namespace turnstile::cli
