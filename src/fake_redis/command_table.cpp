#include "fake_redis/command_table.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "core/check.h"
#include "fake_redis/command_args.h"

namespace turnstile::sim {
// ASCII lower case (A-Z only, as before: no locale), zero-padded to 16
// bytes. Only called with names of at most kMaxNameBytes.
CommandTable::PackedName CommandTable::pack(std::string_view name) {
  TURNSTILE_CHECK(name.size() <= kMaxNameBytes);
  char bytes[kMaxNameBytes] = {};
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    bytes[i] = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  }
  PackedName packed;
  std::memcpy(packed.words, bytes, sizeof bytes);
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
