// redis/slot.h
//
// Redis Cluster key hashing, exactly as the cluster specification defines it
// (https://redis.io/docs/reference/cluster-spec/, "Keys hash tags"):
//
//   slot(key) = CRC16(tag or key) mod 16384
//
// where CRC16 is the XMODEM variant (polynomial 0x1021, initial value 0) and
// the tag is the text between the first '{' and the first '}' after it, if
// that text is not empty. "{user1000}.following" and "{user1000}.followers"
// share a slot; "foo{}{bar}" hashes the whole key; "foo{{bar}}zap" hashes
// "{bar". Channels of sharded pub/sub hash the same way.
//
// Pure functions; no I/O.

#ifndef TURNSTILE_REDIS_SLOT_H_
#define TURNSTILE_REDIS_SLOT_H_

#include <cstdint>
#include <string_view>

namespace turnstile::redis {

inline constexpr int kClusterSlotCount = 16384;

// CRC16/XMODEM of `data`: CRC16("123456789") == 0x31C3.
std::uint16_t crc16(std::string_view data);

// The part of `key` that is hashed: the hash tag if there is a non-empty
// one, else the whole key.
std::string_view hash_tag(std::string_view key);

// The cluster slot of `key`, in 0..kClusterSlotCount-1.
int key_slot(std::string_view key);

}  // namespace turnstile::redis

#endif  // TURNSTILE_REDIS_SLOT_H_
