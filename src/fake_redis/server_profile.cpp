#include "fake_redis/server_profile.h"

#include <algorithm>
#include <array>
#include <charconv>

#include "core/check.h"

namespace turnstile::sim {
namespace {

// A profile of `release` with 7.0's behaviours.
constexpr ServerProfile named(ServerRelease release, std::string_view label, std::string_view redis_version) {
  ServerProfile profile;
  profile.release = release;
  profile.label = label;
  profile.redis_version = redis_version;
  return profile;
}

constexpr ServerProfile redis_6_2() {
  ServerProfile profile = named(ServerRelease::redis_6_2, "Redis 6.2.16", "6.2.16");
  profile.has_version_in_scripts = false;
  profile.sandbox_keeps_fenv = true;
  profile.redis_6_texts = true;
  profile.has_expire_options = false;
  profile.set_nx_get_allowed = false;
  profile.decrby_checks_minimum = false;
  profile.has_sharded_pubsub = false;
  profile.subcommands_are_commands = false;
  profile.has_shebang = false;
  profile.script_error_tables = false;
  profile.has_big_number_reply = false;
  profile.sandbox_keeps_print = true;
  profile.compact_zset_keeps_negative_zero = true;
  return profile;
}

constexpr ServerProfile redis_7_0() { return named(ServerRelease::redis_7_0, "Redis 7.0.15", "7.0.15"); }

constexpr ServerProfile redis_7_2() {
  ServerProfile profile = named(ServerRelease::redis_7_2, "Redis 7.2.6", "7.2.6");
  profile.shortest_double_text = true;
  profile.sandbox_keeps_fenv = true;
  profile.script_errors_keep_newlines = true;
  profile.set_repl_arity_fixed = true;
  profile.lpos_rank_range_checked = true;
  profile.help_says_print = true;
  return profile;
}

constexpr ServerProfile valkey_8_0() {
  ServerProfile profile = redis_7_2();
  profile.release = ServerRelease::valkey_8_0;
  profile.label = "Valkey 8.0.1";
  profile.redis_version = "7.2.4";  // the Redis release Valkey forked from
  profile.server_name = "valkey";
  profile.server_version = "8.0.1";
  profile.valkey_texts = true;
  profile.sandbox_has_os_clock = true;
  return profile;
}

// By ServerRelease, oldest first.
constexpr std::array<ServerProfile, 4> kProfiles{redis_6_2(), redis_7_0(), redis_7_2(), valkey_8_0()};

}  // namespace

std::int64_t ServerProfile::redis_version_number() const {
  constexpr int kBitsPerPart = 8;
  std::int64_t number = 0;
  std::string_view rest = redis_version;
  while (!rest.empty()) {
    const std::size_t dot = std::min(rest.find('.'), rest.size());
    int part = 0;
    const auto [end, error] = std::from_chars(rest.data(), rest.data() + dot, part);
    TURNSTILE_CHECK(error == std::errc() && end == rest.data() + dot);
    number = (number << kBitsPerPart) | part;
    rest.remove_prefix(std::min(dot + 1, rest.size()));
  }
  return number;
}

const ServerProfile& ServerProfile::of(ServerRelease release) {
  const auto index = static_cast<std::size_t>(release);
  TURNSTILE_CHECK(index < kProfiles.size() && kProfiles[index].release == release);
  return kProfiles[index];
}

std::span<const ServerProfile> ServerProfile::all() { return kProfiles; }

std::optional<ServerRelease> ServerProfile::find(std::string_view redis_version, std::string_view server_name,
                                                 std::string_view server_version) {
  for (const ServerProfile& profile : kProfiles) {
    if (profile.redis_version == redis_version && profile.server_name == server_name &&
        profile.server_version == server_version) {
      return profile.release;
    }
  }
  return std::nullopt;
}

}  // namespace turnstile::sim
