#include "fake_redis/command_table.h"

#include <cassert>
#include <cstdint>
#include <string>

#include "fake_redis/command_args.h"

namespace turnstile::sim {
namespace {

char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

// FNV-1a over the ASCII-lowered bytes.
std::size_t CommandTable::CaseInsensitiveHash::operator()(std::string_view name) const {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : name) {
    hash ^= static_cast<unsigned char>(ascii_lower(c));
    hash *= 0x100000001b3ULL;
  }
  return static_cast<std::size_t>(hash);
}

bool CommandTable::CaseInsensitiveEqual::operator()(std::string_view a, std::string_view b) const {
  if (a.size() != b.size()) return false;
  if (a == b) return true;  // scripts' redis.call('hget', ...): already lower case
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  }
  return true;
}

void CommandTable::add(const CommandSpec& spec) {
  assert(spec.handler != nullptr && spec.arity != 0);
  assert(lower_case(spec.name) == spec.name);
  [[maybe_unused]] bool inserted = commands_.emplace(std::string(spec.name), spec).second;
  assert(inserted && "command registered twice");
}

const CommandSpec* CommandTable::find(std::string_view name) const {
  auto it = commands_.find(name);
  return it == commands_.end() ? nullptr : &it->second;
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
