#include "core/info_reply.h"

#include <charconv>

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

}  // namespace turnstile::detail
