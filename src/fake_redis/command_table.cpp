#include "fake_redis/command_table.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "core/check.h"
#include "fake_redis/command_args.h"

namespace turnstile::sim {
namespace {

// Each byte of `word` in 'A'..'Z' lowered, the others kept (eight at a time:
// a byte's low seven bits plus a bias carry into its top bit exactly when it
// is at least the bound; bytes with the top bit set are no letters).
std::uint64_t lower_ascii_letters(std::uint64_t word) {
  constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
  constexpr std::uint64_t kTopBits = 0x8080808080808080ULL;
  const std::uint64_t low_bits = word & ~kTopBits;
  const std::uint64_t at_least_a = low_bits + (0x80 - 'A') * kOnes;
  const std::uint64_t beyond_z = low_bits + (0x80 - 'Z' - 1) * kOnes;
  const std::uint64_t upper = at_least_a & ~beyond_z & ~word & kTopBits;
  return word | (upper >> 2);  // 0x80 >> 2 is 'a' - 'A'
}

}  // namespace

// ASCII lower case (A-Z only, as before: no locale), zero-padded to 16
// bytes. Only called with names of at most kMaxNameBytes.
CommandTable::PackedName CommandTable::pack(std::string_view name) {
  TURNSTILE_CHECK(name.size() <= kMaxNameBytes);
  PackedName packed;
  std::memcpy(packed.words, name.data(), name.size());
  for (std::uint64_t& word : packed.words) word = lower_ascii_letters(word);
  packed.size = name.size();
  return packed;
}

std::size_t CommandTable::slot_of(const PackedName& name) {
  const std::uint64_t mixed =
      (name.words[0] ^ (name.words[1] * 0x9e3779b97f4a7c15ULL) ^ name.size) * 0xbf58476d1ce4e5b9ULL;
  return static_cast<std::size_t>(mixed >> (64 - kSlotBits));
}

void CommandTable::add(const CommandSpec& spec) {
  TURNSTILE_CHECK(spec.handler != nullptr && spec.arity != 0);
  TURNSTILE_CHECK(lower_case(spec.name) == spec.name);
  TURNSTILE_CHECK_MSG(spec.name.size() <= kMaxNameBytes, "name too long for the table");
  TURNSTILE_CHECK_MSG(commands_.size() + 1 < slots_.size(), "command table full");
  TURNSTILE_CHECK_MSG(find(spec.name) == nullptr, "command registered twice");
  commands_.push_back(std::make_unique<CommandSpec>(spec));
  const PackedName name = pack(spec.name);
  std::size_t slot = slot_of(name);
  while (slots_[slot].spec != nullptr) slot = (slot + 1) % slots_.size();
  slots_[slot] = Slot{name, commands_.back().get()};
  TURNSTILE_CHECK(find(spec.name) == commands_.back().get());
}

const CommandSpec* CommandTable::find(std::string_view name) const {
  if (name.empty() || name.size() > kMaxNameBytes) return nullptr;
  const PackedName packed = pack(name);
  for (std::size_t slot = slot_of(packed);; slot = (slot + 1) % slots_.size()) {
    const Slot& candidate = slots_[slot];
    if (candidate.spec == nullptr) return nullptr;
    if (candidate.name == packed) return candidate.spec;
  }
}

const CommandTable& command_table() {
  static const CommandTable table = [] {
    CommandTable built;
    register_key_commands(built);
    register_string_commands(built);
    register_hash_commands(built);
    register_list_commands(built);
    register_sorted_set_commands(built);
    register_pubsub_commands(built);
    register_server_commands(built);
    register_scripting_commands(built);
    return built;
  }();
  return table;
}

}  // namespace turnstile::sim
