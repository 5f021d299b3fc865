// interval_logger: the command the fault harness runs under `turnstile run`.
//
//   interval_logger LOG HOLD_MS [--parent-too]
//
// Appends one line to LOG at once:
//
//   start <pid> <parent pid or 0> <CLOCK_MONOTONIC ns> <TURNSTILE_FENCING_TOKEN or -> [<tag>]
//
// where the tag is INTERVAL_LOGGER_TAG from the environment (absent if
// unset or empty): the test names which of its `turnstile run` processes
// ran this command (turnstile passes its environment on to the command).
//
// then holds: sleeps HOLD_MS, appends
//
//   stop <pid> <CLOCK_MONOTONIC ns>
//
// and exits 0; or with HOLD_MS 0 waits until it is killed (at most
// kMaxLifetime, so a leaked logger never lives long). The harness also
// watches the pid (pidfd): a killed logger's end is when it was seen dead
// (late by the harness's own scheduling, never early), a logger that held
// to the end ends at its stop line (after it the logger does nothing but
// exit, and `turnstile run` only releases once it exited). With --parent-too
// the parent (e.g. `sh -c 'interval_logger ... & wait'`) is part of the
// command and its pid is logged for the harness to watch as well.

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

constexpr long kMaxLifetimeSeconds = 120;
constexpr int kUsage = 64;

long long monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<long long>(now.tv_sec) * 1'000'000'000LL + now.tv_nsec;
}

void sleep_ms(long ms) {
  timespec duration{.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1'000'000L};
  while (clock_nanosleep(CLOCK_MONOTONIC, 0, &duration, &duration) != 0) {
  }
}

// One line in one write(2) on an O_APPEND descriptor: never interleaved
// with another logger's line.
bool append(int log, const std::string& line) {
  return write(log, line.data(), line.size()) == static_cast<ssize_t>(line.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4 || (argc == 4 && std::strcmp(argv[3], "--parent-too") != 0)) {
    std::fprintf(stderr, "usage: interval_logger LOG HOLD_MS [--parent-too]\n");
    return kUsage;
  }
  const long hold_ms = std::strtol(argv[2], nullptr, 10);
  const char* token = std::getenv("TURNSTILE_FENCING_TOKEN");
  const char* tag = std::getenv("INTERVAL_LOGGER_TAG");
  const std::string line = "start " + std::to_string(getpid()) + " " + std::to_string(argc == 4 ? getppid() : 0) + " " +
                           std::to_string(monotonic_ns()) + " " + (token != nullptr && *token != '\0' ? token : "-") +
                           (tag != nullptr && *tag != '\0' ? std::string(" ") + tag : std::string()) + "\n";
  const int log = open(argv[1], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0 || !append(log, line)) {
    std::perror("interval_logger");
    return 1;
  }
  sleep_ms(hold_ms > 0 ? hold_ms : kMaxLifetimeSeconds * 1000);
  if (!append(log, "stop " + std::to_string(getpid()) + " " + std::to_string(monotonic_ns()) + "\n")) {
    std::perror("interval_logger");
    return 1;
  }
  return 0;
}
