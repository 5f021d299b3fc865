// A library program for the real-server histories (issue #54): one
// acquisition through the public C++ API, as a service would write it, the
// same Redis types as `turnstile run` takes (fenced reentrant and fair
// locks, the token lock, the crash-safe semaphore), so that both kinds of
// client share one lock in a history:
//
//   history_client URL NAME FLAVOR HISTORY CLIENT HOLD HOLD_MS PERMITS
//
// FLAVOR: reentrant, fair, token or semaphore (PERMITS: its total). The
// lease is renewed by the watchdog (2 s) and the wait is 3 s, as soak.py's
// `run --lease 2s -w 3s`. While it holds, the critical section appends
// "act" events to HISTORY as critical_section.py does (a start, a tick
// every 20 ms, an end; CLOCK_MONOTONIC; the fencing token), and acts only
// while hold.held() says the hold is still believed: a lost hold stops
// acting at once. Exit status: 0 held and released, 1 not had within the
// wait, 75 lost while held, 69 a failure the library named (a
// turnstile::Error), 70 anything else, 64 bad arguments.

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>

#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/flavor.h"
#include "turnstile/hold.h"
#include "turnstile/redis_backend.h"

namespace {

constexpr auto kLease = std::chrono::seconds(2);
constexpr auto kWait = std::chrono::seconds(3);
constexpr auto kTick = std::chrono::milliseconds(20);
constexpr int kExitHeld = 0;
constexpr int kExitNotHad = 1;
constexpr int kExitUsage = 64;
constexpr int kExitUnavailable = 69;
constexpr int kExitInternal = 70;
constexpr int kExitLost = 75;

std::int64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

// JSON string content: the names and ids here are plain ASCII, but a
// quote or a backslash must not break the line.
std::string escaped(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

// One "act" line, appended whole (O_APPEND: lines of concurrent processes
// never interleave).
class History {
 public:
  History(const std::string& path, std::string client, std::string name, std::string hold)
      : fd_(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644)),
        client_(std::move(client)),
        name_(std::move(name)),
        hold_(std::move(hold)) {}
  ~History() {
    if (fd_ >= 0) ::close(fd_);
  }
  History(const History&) = delete;
  History& operator=(const History&) = delete;
  bool open() const { return fd_ >= 0; }

  void act(std::string_view step, std::optional<std::int64_t> token) const {
    const std::string line = "{\"t\": " + std::to_string(monotonic_ns()) + R"(, "kind": "act", "client": ")" +
                             escaped(client_) + R"(", "name": ")" + escaped(name_) + R"(", "hold": ")" +
                             escaped(hold_) + R"(", "token": )" + (token ? std::to_string(*token) : "null") +
                             R"(, "step": ")" + std::string(step) + R"(", "pid": )" + std::to_string(::getpid()) +
                             ", \"lib\": true}\n";
    (void)!::write(fd_, line.data(), line.size());
  }

 private:
  int fd_;
  std::string client_;
  std::string name_;
  std::string hold_;
};

std::optional<turnstile::Flavor> flavor_of(std::string_view word) {
  static const std::map<std::string_view, turnstile::Flavor> kFlavors = {
      {"reentrant", turnstile::Flavor::reentrant},
      {"fair", turnstile::Flavor::fair},
      {"token", turnstile::Flavor::token},
      {"semaphore", turnstile::Flavor::semaphore},
  };
  const auto found = kFlavors.find(word);
  if (found == kFlavors.end()) return std::nullopt;
  return found->second;
}

std::optional<std::int64_t> number_of(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

int hold_once(int argc, char** argv) {
  if (argc != 9) {
    std::fprintf(stderr, "usage: history_client URL NAME FLAVOR HISTORY CLIENT HOLD HOLD_MS PERMITS\n");
    return kExitUsage;
  }
  const std::string url = argv[1];
  const std::string name = argv[2];
  const std::optional<turnstile::Flavor> flavor = flavor_of(argv[3]);
  const History history(argv[4], argv[5], name, argv[6]);
  const std::optional<std::int64_t> hold_ms = number_of(argv[7]);
  const std::optional<std::int64_t> permits = number_of(argv[8]);
  if (!flavor || !history.open() || !hold_ms || *hold_ms < 0 || !permits || *permits < 1) {
    std::fprintf(stderr, "history_client: bad flavor, history file, hold length or permits\n");
    return kExitUsage;
  }
  const bool semaphore = *flavor == turnstile::Flavor::semaphore;
  turnstile::Client client(turnstile::make_redis_backend(turnstile::RedisOptions::from_url(url)),
                           turnstile::ClientOptions{.lease = kLease});
  const std::unique_ptr<turnstile::Holdable> holdable =
      client.holdable(*flavor, name,
                      turnstile::HoldableOptions{
                          .fenced = *flavor == turnstile::Flavor::reentrant || *flavor == turnstile::Flavor::fair,
                          .permits = semaphore ? *permits : 0});
  turnstile::LockHold hold = holdable->try_acquire_hold({.wait = kWait});
  if (!hold) return kExitNotHad;
  const std::optional<std::int64_t> token = hold.fencing_token();
  // The critical section: every act only while the hold is believed.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(*hold_ms);
  bool lost = !hold.held();
  if (!lost) history.act("start", token);
  while (!lost && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        kTick, std::max<std::chrono::steady_clock::duration>(until - std::chrono::steady_clock::now(), {})));
    lost = !hold.held();
    if (!lost) history.act("tick", token);
  }
  if (!lost) history.act("end", token);
  hold.release();
  return lost ? kExitLost : kExitHeld;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return hold_once(argc, argv);
  } catch (const turnstile::Error& error) {
    std::fprintf(stderr, "history_client: %s\n", error.what());
    return kExitUnavailable;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "history_client: internal error: %s\n", error.what());
    return kExitInternal;
  }
}
