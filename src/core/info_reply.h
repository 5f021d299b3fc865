// core/info_reply.h
//
// Fields of an INFO reply ("field:value" lines, CRLF or LF, "# Section"
// headers), read by the backends (a connection's run_id, a master's
// attached replicas) and by the server check (the eviction policy). The
// parser knows nothing about connections.

#ifndef TURNSTILE_CORE_INFO_REPLY_H_
#define TURNSTILE_CORE_INFO_REPLY_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace turnstile::detail {

// The value of `field` in `info`: the first line "<field>:<value>", the
// value possibly empty; nullopt if no line names it.
std::optional<std::string_view> info_field(std::string_view info, std::string_view field);

// info_field() read as a non-negative integer; nullopt if absent or not one.
std::optional<std::int64_t> info_count(std::string_view info, std::string_view field);

}  // namespace turnstile::detail

#endif  // TURNSTILE_CORE_INFO_REPLY_H_
