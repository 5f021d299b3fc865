// fake_redis/sha1.h
//
// Scripts are named by the SHA-1 of their source, as Redis names them: 40
// lower-case hex digits (OpenSSL computes the digest). EVALSHA and SCRIPT
// EXISTS accept the hex in any case, so names are lower-cased before lookup.

#ifndef TURNSTILE_FAKE_REDIS_SHA1_H_
#define TURNSTILE_FAKE_REDIS_SHA1_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace turnstile::sim {

// Length of a script's name: 20 digest bytes as hex.
inline constexpr std::size_t kSha1HexLength = 40;

// Lower-case hex SHA-1 of `bytes` (OpenSSL), as Redis's sha1hex.
std::string sha1_hex(std::string_view bytes);

// `sha1` with its hex letters A-F lower-cased (nothing else changes).
std::string lower_case_sha(std::string_view sha1);

}  // namespace turnstile::sim

#endif  // TURNSTILE_FAKE_REDIS_SHA1_H_
