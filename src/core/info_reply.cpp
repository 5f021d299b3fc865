#include "core/info_reply.h"

#include <charconv>
#include <cstdio>

namespace turnstile::detail {

std::optional<std::string_view> info_field(std::string_view info, std::string_view field) {
  // One pass over the lines: each step consumes one line.
  while (!info.empty()) {
    const std::size_t end = info.find('\n');
    std::string_view line = info.substr(0, end);
    info = end == std::string_view::npos ? std::string_view() : info.substr(end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > field.size() && line.starts_with(field) && line[field.size()] == ':') {
      return line.substr(field.size() + 1);
    }
  }
  return std::nullopt;
}

std::optional<std::int64_t> info_count(std::string_view info, std::string_view field) {
  const std::optional<std::string_view> text = info_field(info, field);
  if (!text || text->empty()) return std::nullopt;
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (error != std::errc() || end != text->data() + text->size() || value < 0) return std::nullopt;
  return value;
}

namespace {

// WAITAOF, which aof_sync sends, came with Redis 7.2.
constexpr int kAofSyncMajor = 7;
constexpr int kAofSyncMinor = 2;

}  // namespace

std::optional<std::string> aof_sync_problem(std::string_view info_server, std::string_view info_persistence) {
  const std::string version(info_field(info_server, "redis_version").value_or(""));
  int major = 0;
  int minor = 0;
  if (std::sscanf(version.c_str(), "%d.%d", &major, &minor) != 2) return "its INFO gives no redis_version";
  if (major < kAofSyncMajor || (major == kAofSyncMajor && minor < kAofSyncMinor)) {
    return "it runs " + version + " (no WAITAOF)";
  }
  if (info_field(info_persistence, "aof_enabled") != "1") return "it runs with appendonly no";
  return std::nullopt;
}

std::string aof_sync_refusal(std::string_view endpoint, std::string_view problem) {
  return "redis " + std::string(endpoint) +
         ": aof_sync (durable grants) needs Redis 7.2 or later with appendonly yes; " + std::string(problem);
}

}  // namespace turnstile::detail
