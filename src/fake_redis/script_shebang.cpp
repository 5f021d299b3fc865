#include "fake_redis/script_shebang.h"

#include <algorithm>
#include <iterator>
#include <vector>

#include "fake_redis/redis_errors.h"

namespace turnstile::sim {

ParsedShebang parse_shebang(std::string_view source) {
  static constexpr std::string_view kKnownFlags[] = {"no-writes", "allow-oom", "allow-stale", "no-cluster",
                                                     "allow-cross-slot-keys"};
  ParsedShebang parsed;
  if (!source.starts_with("#!")) return parsed;
  const std::size_t end = source.find('\n');
  if (end == std::string_view::npos) return {false, std::string(redis_errors::kInvalidShebang)};
  parsed.length = end;
  std::vector<std::string_view> parts;
  std::string_view line = source.substr(0, end);
  while (!line.empty()) {
    const std::size_t start = line.find_first_not_of(" \t\r");
    if (start == std::string_view::npos) break;
    line.remove_prefix(start);
    const std::size_t stop = std::min(line.find_first_of(" \t\r"), line.size());
    parts.push_back(line.substr(0, stop));
    line.remove_prefix(stop);
  }
  if (parts.empty() || parts[0] != "#!lua") {
    return {false, redis_errors::unexpected_shebang_engine(parts.empty() ? "" : parts[0])};
  }
  for (std::size_t i = 1; i < parts.size(); ++i) {
    if (!parts[i].starts_with("flags=")) {
      return {false, redis_errors::unknown_shebang_option(parts[i])};
    }
    std::string_view flags = parts[i].substr(6);
    for (;;) {
      const std::size_t comma = flags.find(',');
      const std::string_view flag = flags.substr(0, comma);
      if (std::find(std::begin(kKnownFlags), std::end(kKnownFlags), flag) == std::end(kKnownFlags)) {
        return {false, redis_errors::unexpected_shebang_flag(flag)};
      }
      if (flag == "no-writes") parsed.no_writes = true;
      if (comma == std::string_view::npos) break;
      flags.remove_prefix(comma + 1);
    }
  }
  return parsed;
}

}  // namespace turnstile::sim
