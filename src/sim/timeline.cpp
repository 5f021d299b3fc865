#include "turnstile/sim/timeline.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "turnstile/errors.h"

namespace turnstile::sim {
namespace {

constexpr std::string_view kWaitingPrefix = "waiting ";
constexpr std::string_view kHoldingPrefix = "holding ";

void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

}  // namespace

Timeline::Timeline(World& world, TimelineOptions options) : world_(world), options_(options) {
  if (options_.commands) world_.set_call_listener([this](const CallSpan& span) { record_call(span); });
  world_.set_trace_listener([this](Instant when, ClientId who, std::string_view what) {
    (void)when;
    if (what == "crashed") close_all(who);
    push(Event{'i', now_us(), 0, who, std::string(what), {}, 0, {}});
  });
}

Timeline::~Timeline() {
  world_.set_trace_listener(nullptr);
  if (options_.commands) world_.set_call_listener(nullptr);
}

void Timeline::record_call(const CallSpan& span) {
  if (events_.size() + 2 > kMaxEvents) {
    truncated_ = true;
    return;
  }
  auto microseconds = [](Instant when) {
    return std::chrono::duration_cast<std::chrono::microseconds>(when.time_since_epoch()).count();
  };
  std::string keys;
  for (const std::string& key : span.keys) keys += (keys.empty() ? "" : " ") + key;
  Event begin{'b', microseconds(span.sent), 0, span.client, span.name, {}, ++calls_, {}};
  begin.args = {{"server", "server-" + std::to_string(span.server)},
                {"kind", span.script ? "script" : "command"},
                {"reply", span.outcome}};
  if (span.script) begin.args.emplace_back("keys", keys);
  push(std::move(begin));
  push(Event{'e', microseconds(span.finished), 0, span.client, span.name, {}, calls_, {}});
}

std::int64_t Timeline::now_us() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(world_.now().time_since_epoch()).count();
}

void Timeline::push(Event event) {
  if (events_.size() >= kMaxEvents) {
    truncated_ = true;
    return;
  }
  events_.push_back(std::move(event));
}

void Timeline::open(SpanKind kind, ClientId client, std::string_view resource, std::string detail) {
  auto& spans = kind == SpanKind::waiting ? waiting_ : holding_;
  spans.try_emplace(SpanKey{client, std::string(resource)}, OpenSpan{now_us(), std::move(detail)});
}

void Timeline::close(SpanKind kind, ClientId client, std::string_view resource) {
  auto& spans = kind == SpanKind::waiting ? waiting_ : holding_;
  const auto found = spans.find(SpanKey{client, std::string(resource)});
  if (found == spans.end()) return;
  const std::string_view prefix = kind == SpanKind::waiting ? kWaitingPrefix : kHoldingPrefix;
  push(Event{'X',
             found->second.start_us,
             now_us() - found->second.start_us,
             client,
             std::string(prefix) + std::string(resource),
             std::move(found->second.detail),
             0,
             {}});
  spans.erase(found);
}

void Timeline::close_all(ClientId client) {
  for (auto* spans : {&waiting_, &holding_}) {
    std::vector<std::string> resources;
    for (const auto& [key, span] : *spans) {
      if (key.first == client) resources.push_back(key.second);
    }
    for (const std::string& resource : resources) {
      close(spans == &waiting_ ? SpanKind::waiting : SpanKind::holding, client, resource);
    }
  }
}

void Timeline::waiting(const SimClient& client, std::string_view resource) {
  open(SpanKind::waiting, client.id(), resource, {});
}

void Timeline::acquired(const SimClient& client, std::string_view resource, std::optional<std::int64_t> fencing_token) {
  close(SpanKind::waiting, client.id(), resource);
  open(SpanKind::holding, client.id(), resource,
       fencing_token ? "fencing token " + std::to_string(*fencing_token) : "");
}

void Timeline::released(const SimClient& client, std::string_view resource) {
  close(SpanKind::holding, client.id(), resource);
}

void Timeline::gave_up(const SimClient& client, std::string_view resource) {
  close(SpanKind::waiting, client.id(), resource);
}

std::string Timeline::chrome_trace_json() const {
  std::vector<Event> events = events_;
  const std::int64_t end_us = now_us();
  for (const auto* spans : {&waiting_, &holding_}) {
    const std::string_view prefix = spans == &waiting_ ? kWaitingPrefix : kHoldingPrefix;
    for (const auto& [key, span] : *spans) {
      events.push_back(Event{'X',
                             span.start_us,
                             end_us - span.start_us,
                             key.first,
                             std::string(prefix) + key.second,
                             span.detail + " (still open)",
                             0,
                             {}});
    }
  }
  std::string out = "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"seed\":" + std::to_string(world_.seed()) +
                    ",\"truncated\":" + (truncated_ ? "true" : "false") + "},\"traceEvents\":[\n";
  bool first = true;
  auto separator = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  // Track names: the world, then every client by id.
  for (ClientId id = 0; id <= world_.client_count(); ++id) {
    separator();
    out += "{\"ph\":\"M\",\"pid\":1,\"tid\":" + std::to_string(id) + ",\"name\":\"thread_name\",\"args\":{\"name\":";
    append_json_string(out, world_.client_name(id));
    out += "}}";
  }
  for (const Event& event : events) {
    separator();
    out += "{\"ph\":\"";
    out += event.phase;
    out += "\",\"pid\":1,\"tid\":" + std::to_string(event.track) + ",\"ts\":" + std::to_string(event.start_us);
    if (event.phase == 'X') out += ",\"dur\":" + std::to_string(event.duration_us);
    if (event.phase == 'i') out += ",\"s\":\"t\"";
    if (event.phase == 'b' || event.phase == 'e') out += ",\"cat\":\"command\",\"id\":" + std::to_string(event.call_id);
    out += ",\"name\":";
    append_json_string(out, event.name);
    std::vector<std::pair<std::string, std::string>> args = event.args;
    if (!event.detail.empty()) args.emplace_back("detail", event.detail);
    if (!args.empty()) {
      out += ",\"args\":{";
      for (std::size_t i = 0; i < args.size(); ++i) {
        if (i > 0) out += ',';
        append_json_string(out, args[i].first);
        out += ':';
        append_json_string(out, args[i].second);
      }
      out += '}';
    }
    out += '}';
  }
  out += "\n]}\n";
  return out;
}

void Timeline::write_chrome_trace(const std::string& path) const {
  const std::string json = chrome_trace_json();
  const std::string temporary = path + ".tmp";
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  if (file == nullptr) throw Error("cannot write trace '" + path + "': " + std::strerror(errno));
  const bool written = std::fwrite(json.data(), 1, json.size(), file) == json.size();
  const bool closed = std::fclose(file) == 0;
  if (!written || !closed) {
    std::remove(temporary.c_str());
    throw Error("cannot write trace '" + path + "': write failed");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    throw Error("cannot write trace '" + path + "': " + std::strerror(error));
  }
}

}  // namespace turnstile::sim
