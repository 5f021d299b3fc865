// core/info_reply.h
//
// Fields of an INFO reply ("field:value" lines, CRLF or LF, "# Section"
// headers), read by the backends (a connection's run_id, a master's
// attached replicas, whether it can fsync a grant: aof_sync) and by the
// server check (the eviction policy). The parser knows nothing about
// connections.

#ifndef TURNSTILE_CORE_INFO_REPLY_H_
#define TURNSTILE_CORE_INFO_REPLY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace turnstile::detail {

// The value of `field` in `info`: the first line "<field>:<value>", the
// value possibly empty; nullopt if no line names it.
std::optional<std::string_view> info_field(std::string_view info, std::string_view field);

// info_field() read as a non-negative integer; nullopt if absent or not one.
std::optional<std::int64_t> info_count(std::string_view info, std::string_view field);

// Why a server whose INFO server and INFO persistence say so cannot
// confirm a grant's fsync to its append-only file (RedisOptions::aof_sync:
// WAITAOF is Redis 7.2's, appendonly must be on), or nullopt if it can.
// Valkey reports the Redis release it is compatible with as redis_version.
std::optional<std::string> aof_sync_problem(std::string_view info_server, std::string_view info_persistence);

// The text of the UnsafeServerError an acquisition throws, nothing sent,
// when `endpoint`'s server has `problem` (aof_sync_problem()).
std::string aof_sync_refusal(std::string_view endpoint, std::string_view problem);

}  // namespace turnstile::detail

#endif  // TURNSTILE_CORE_INFO_REPLY_H_
