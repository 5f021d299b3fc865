#include "fake_redis/command_table.h"

#include <cassert>
#include <string>

#include "fake_redis/command_args.h"

namespace turnstile::sim {

void CommandTable::add(const CommandSpec& spec) {
  assert(spec.handler != nullptr && spec.arity != 0);
  assert(lower_case(spec.name) == spec.name);
  [[maybe_unused]] bool inserted = commands_.emplace(std::string(spec.name), spec).second;
  assert(inserted && "command registered twice");
}

const CommandSpec* CommandTable::find(std::string_view name) const {
  // ASCII lower case in a reused string: no locale lookup per character, and
  // no allocation for names longer than the small-string buffer.
  thread_local std::string lowered;
  lowered.assign(name);
  for (char& c : lowered) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  auto it = commands_.find(lowered);
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
