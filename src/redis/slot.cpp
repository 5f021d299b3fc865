#include "redis/slot.h"

#include <array>

#include "core/check.h"

namespace turnstile::redis {
namespace {

constexpr std::uint16_t kPolynomial = 0x1021;

constexpr std::array<std::uint16_t, 256> make_table() {
  std::array<std::uint16_t, 256> table{};
  for (int byte = 0; byte < 256; ++byte) {
    auto crc = static_cast<std::uint16_t>(byte << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) != 0 ? static_cast<std::uint16_t>((crc << 1) ^ kPolynomial)
                                : static_cast<std::uint16_t>(crc << 1);
    }
    table[static_cast<std::size_t>(byte)] = crc;
  }
  return table;
}

constexpr std::array<std::uint16_t, 256> kTable = make_table();

}  // namespace

std::uint16_t crc16(std::string_view data) {
  std::uint16_t crc = 0;
  for (const char c : data) {
    const auto index = static_cast<std::uint8_t>((crc >> 8) ^ static_cast<std::uint8_t>(c));
    crc = static_cast<std::uint16_t>((crc << 8) ^ kTable[index]);
  }
  return crc;
}

std::string_view hash_tag(std::string_view key) {
  const std::size_t open = key.find('{');
  if (open == std::string_view::npos) return key;
  const std::size_t close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

int key_slot(std::string_view key) {
  static_assert((kClusterSlotCount & (kClusterSlotCount - 1)) == 0, "a mask picks the slot");
  const int slot = crc16(hash_tag(key)) & (kClusterSlotCount - 1);
  TURNSTILE_CHECK(slot >= 0 && slot < kClusterSlotCount);
  return slot;
}

}  // namespace turnstile::redis
