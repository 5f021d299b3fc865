// turnstile/sim/timeline.h
//
// Who waited for and held what, when: a recorder of a simulated run that
// writes a Chrome trace-event JSON file (opens in https://ui.perfetto.dev or
// chrome://tracing). One track per simulated client; a span per wait
// ("waiting <resource>") and per hold ("holding <resource>", with the
// fencing token); an instant for every line of the world's trace (faults:
// crashes, pauses, link and server faults, checker violations). With
// TimelineOptions::commands, also a span per call of every client's links
// (World::set_call_listener): an async slice named after the script (or
// command), category "command", on the client's track, its args the
// server, the script's keys and the reply's kind or the failure.
//
//   turnstile::sim::Timeline timeline(world);   // listens to world's trace
//   timeline.waiting(alice, "orders");  ... timeline.acquired(alice, "orders");
//   ... timeline.released(alice, "orders");
//   timeline.write_chrome_trace("run.json");    // temp file, then rename
//
// A crash closes the client's open spans. Spans still open when the trace is
// written end at the world's current instant. Bounded: past kMaxEvents
// events, recording stops and the file says it was truncated.
//
// Not thread-safe: the world's thread. Must not outlive its world.

#ifndef TURNSTILE_SIM_TIMELINE_H_
#define TURNSTILE_SIM_TIMELINE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "turnstile/export.h"
#include "turnstile/sim/world.h"

namespace turnstile::sim {

struct TURNSTILE_EXPORT TimelineOptions {
  // A span per script or command call (CallSpan): a trace to debug from,
  // several times larger.
  bool commands = false;
};

class TURNSTILE_EXPORT Timeline {
 public:
  static constexpr std::size_t kMaxEvents = 2'000'000;

  explicit Timeline(World& world, TimelineOptions options = {});
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  void waiting(const SimClient& client, std::string_view resource);
  void acquired(const SimClient& client, std::string_view resource,
                std::optional<std::int64_t> fencing_token = std::nullopt);
  void released(const SimClient& client, std::string_view resource);
  void gave_up(const SimClient& client, std::string_view resource);

  std::size_t event_count() const { return events_.size(); }
  bool truncated() const { return truncated_; }

  // The whole trace as one JSON object ({"traceEvents": [...]}).
  std::string chrome_trace_json() const;
  // Writes chrome_trace_json() to `path` through a temporary file renamed
  // into place: on failure (turnstile::Error naming the path) nothing is left.
  void write_chrome_trace(const std::string& path) const;

 private:
  struct Event {
    char phase;  // 'X' span, 'i' instant, 'b'/'e' a call's async span
    std::int64_t start_us;
    std::int64_t duration_us;
    ClientId track;  // 0: the world's track
    std::string name;
    std::string detail;  // args.detail, may be empty
    // A call's: its id (of the 'b'/'e' pair) and args beside the detail.
    std::uint64_t call_id = 0;
    std::vector<std::pair<std::string, std::string>> args;
  };
  enum class SpanKind : std::uint8_t { waiting, holding };
  struct OpenSpan {
    std::int64_t start_us;
    std::string detail;
  };
  using SpanKey = std::pair<ClientId, std::string>;

  std::int64_t now_us() const;
  void open(SpanKind kind, ClientId client, std::string_view resource, std::string detail);
  void close(SpanKind kind, ClientId client, std::string_view resource);
  void close_all(ClientId client);
  void push(Event event);
  void record_call(const CallSpan& span);

  World& world_;
  std::map<SpanKey, OpenSpan, std::less<>> waiting_;
  std::map<SpanKey, OpenSpan, std::less<>> holding_;
  std::vector<Event> events_;
  bool truncated_ = false;
  TimelineOptions options_;
  std::uint64_t calls_ = 0;
};

}  // namespace turnstile::sim

#endif  // TURNSTILE_SIM_TIMELINE_H_
