// fake_redis/command_table.h
//
// The fake Redis's command table, organised like Redis's own: every command
// has a name, an arity in Redis's convention, flags, and a handler. Each
// command family lives in its own cmd_<family>.cpp with one registration
// function (the miniredis layout). Handlers never throw for bad input: they
// answer with Redis's error text from redis_errors.h.

#ifndef TURNSTILE_FAKE_REDIS_COMMAND_TABLE_H_
#define TURNSTILE_FAKE_REDIS_COMMAND_TABLE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/reply.h"

namespace turnstile::sim {

class Keyspace;
class Server;
class Session;

enum CommandFlag : std::uint32_t {
  kCommandWrite = 1u << 0,     // may modify the keyspace
  kCommandReadOnly = 1u << 1,  // never modifies the keyspace
  kCommandNoScript = 1u << 2,  // refused inside EVAL ("This Redis command is not allowed from script")
  kCommandPubSub = 1u << 3,    // SUBSCRIBE and friends; allowed in subscribed mode
  // Sharded pub/sub (7.0 on): an unknown command where the profile has
  // none (ServerProfile::has_sharded_pubsub).
  kCommandShardedPubSub = 1u << 4,
  // The EXPIRE family: exactly its two arguments where the profile has no
  // EXPIRE options (ServerProfile::has_expire_options).
  kCommandExpireOptions = 1u << 5,
};

// What a handler sees. `argv[0]` is the command name as the client sent it.
struct CommandContext {
  Server& server;
  Session& session;
  Keyspace& keyspace;
  const std::vector<std::string>& argv;
  bool from_script = false;  // called through redis.call / redis.pcall
};

using CommandHandler = Reply (*)(CommandContext& context);

struct CommandSpec {
  std::string_view name;  // lower case
  // Redis's convention: N > 0 means exactly N arguments including the name;
  // N < 0 means at least -N.
  int arity = 0;
  std::uint32_t flags = 0;
  CommandHandler handler = nullptr;
};

class CommandTable {
 public:
  // Adds a command; a duplicate name is a programmer error.
  void add(const CommandSpec& spec);
  // Looks a command up by name, case-insensitively; nullptr if unknown.
  const CommandSpec* find(std::string_view name) const;
  std::size_t size() const { return commands_.size(); }

  // The longest command name the table can hold ("zremrangebyscore").
  static constexpr std::size_t kMaxNameBytes = 16;

 private:
  // A lookup per command and per redis.call: a name (lowered, at most 16
  // bytes) is two words and a length, compared as integers in an
  // open-addressed table; no string is built or hashed byte by byte twice.
  struct PackedName {
    std::uint64_t words[2] = {0, 0};
    std::size_t size = 0;
    bool operator==(const PackedName&) const = default;
  };
  struct Slot {
    PackedName name;
    const CommandSpec* spec = nullptr;  // null: empty
  };
  static constexpr std::size_t kSlotBits = 7;  // 128 slots for ~60 commands
  static PackedName pack(std::string_view name);
  static std::size_t slot_of(const PackedName& name);

  std::vector<std::unique_ptr<CommandSpec>> commands_;
  std::array<Slot, std::size_t{1} << kSlotBits> slots_{};
};

// One registration function per family (cmd_<family>.cpp).
void register_key_commands(CommandTable& table);
void register_string_commands(CommandTable& table);
void register_hash_commands(CommandTable& table);
void register_list_commands(CommandTable& table);
void register_sorted_set_commands(CommandTable& table);
void register_pubsub_commands(CommandTable& table);
void register_server_commands(CommandTable& table);
void register_scripting_commands(CommandTable& table);

// The table with every family registered.
const CommandTable& command_table();

}  // namespace turnstile::sim

#endif  // TURNSTILE_FAKE_REDIS_COMMAND_TABLE_H_
