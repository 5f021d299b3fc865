// EVAL, EVALSHA and SCRIPT LOAD / EXISTS / FLUSH / KILL / HELP, with
// redis-server 7.0.15's argument checks and texts (and 6.2.16's SCRIPT). The scripts' commands go
// through Server::execute_from_script, so they see the same keyspace at the
// same virtual instant.

#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fake_redis/command_args.h"
#include "fake_redis/command_table.h"
#include "fake_redis/lua_engine.h"
#include "fake_redis/lua_reply.h"
#include "fake_redis/redis_errors.h"
#include "fake_redis/server.h"
#include "fake_redis/sha1.h"

namespace turnstile::sim {
namespace {

constexpr std::size_t kFirstKeyIndex = 3;  // EVAL <script> <numkeys> <key>...
// BUGGIFY fake.slow_script: under the 2 s command timeout, not far under.
constexpr Duration kSlowScript = std::chrono::milliseconds(1500);

// SCRIPT HELP's lines, in parts where the releases word them differently.
constexpr std::array<std::string_view, 7> kHelpHead = {
    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
};
constexpr std::array<std::string_view, 2> kHelpFlushDefault = {
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
};
constexpr std::array<std::string_view, 2> kValkeyHelpFlushDefault = {
    "    When called without the optional mode argument, the behavior is determined",
    "     by the lazyfree-lazy-user-flush configuration directive. Valid modes are:",
};
constexpr std::array<std::string_view, 6> kHelpTail = {
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
};
// Valkey lists SCRIPT SHOW, which the fake does not have.
constexpr std::array<std::string_view, 2> kValkeyHelpShow = {"SHOW <sha1>",
                                                             "    Show a script from the scripts cache."};
constexpr std::array<std::string_view, 2> kHelpHelp = {"HELP", "    Prints this help."};
constexpr std::array<std::string_view, 2> kHelpHelp72 = {"HELP", "    Print this help."};

std::vector<Reply> script_help(const ServerProfile& profile) {
  std::vector<Reply> lines;
  auto add = [&lines](std::span<const std::string_view> part) {
    for (std::string_view line : part) lines.push_back(Reply::status(std::string(line)));
  };
  add(kHelpHead);
  add(profile.valkey_texts ? kValkeyHelpFlushDefault : kHelpFlushDefault);
  add(kHelpTail);
  if (profile.valkey_texts) add(kValkeyHelpShow);
  add(profile.help_says_print ? kHelpHelp72 : kHelpHelp);
  return lines;
}

bool arity_allows(const CommandSpec& spec, std::size_t argc) {
  const auto count = static_cast<long long>(argc);
  return spec.arity > 0 ? count == spec.arity : count >= -spec.arity;
}

// evalGenericCommand's numkeys checks; on success points keys and args into
// argv.
std::optional<Reply> split_keys_and_args(const std::vector<std::string>& argv, std::span<const std::string>& keys,
                                         std::span<const std::string>& args) {
  const std::optional<std::int64_t> numkeys = parse_integer(argv[2]);
  if (!numkeys) return not_integer_reply();
  const auto available = static_cast<std::int64_t>(argv.size() - kFirstKeyIndex);
  if (*numkeys > available) return error_reply(redis_errors::kNumKeysTooMany);
  if (*numkeys < 0) return error_reply(redis_errors::kNumKeysNegative);
  const std::span<const std::string> after_numkeys = std::span(argv).subspan(kFirstKeyIndex);
  keys = after_numkeys.first(static_cast<std::size_t>(*numkeys));
  args = after_numkeys.subspan(static_cast<std::size_t>(*numkeys));
  return std::nullopt;
}

// Runs one redis.call / redis.pcall. A "#!lua flags=no-writes" script may
// not write; that check comes after lookup, arity and the no-script flag,
// which execute_from_script makes.
Reply call_from_script(CommandContext& context, const std::vector<std::string>& argv) {
  if (context.server.lua().running_read_only_script()) {
    const CommandSpec* spec = command_table().find(argv[0]);
    if (spec != nullptr && arity_allows(*spec, argv.size()) && (spec->flags & kCommandNoScript) == 0 &&
        (spec->flags & kCommandWrite) != 0) {
      return error_reply(redis_errors::kWriteFromReadOnlyScript);
    }
  }
  return context.server.execute_from_script(context.session, argv);
}

Reply run_script(CommandContext& context, bool by_sha) {
  const std::vector<std::string>& argv = context.argv;
  // EVALSHA refuses a sha of the wrong length before looking at numkeys.
  if (by_sha && argv[1].size() != kSha1HexLength) return error_reply(redis_errors::no_script(context.server.profile()));
  std::span<const std::string> keys;
  std::span<const std::string> args;
  if (std::optional<Reply> invalid = split_keys_and_args(argv, keys, args)) return std::move(*invalid);
  auto call = [&context](const std::vector<std::string>& command) { return call_from_script(context, command); };
  LuaEngine& lua = context.server.lua();
  Reply reply = by_sha ? lua.evalsha(argv[1], keys, args, call) : lua.eval(argv[1], keys, args, call);
  // BUGGIFY: the script took long; its writes are made, the server is busy.
  if (context.server.fault("fake.slow_script")) context.server.busy_for(kSlowScript);
  return reply;
}

Reply eval(CommandContext& context) { return run_script(context, false); }
Reply evalsha(CommandContext& context) { return run_script(context, true); }

// SCRIPT's subcommands are entries of Redis 7's command table: found by
// the whole argument, case-insensitively, NUL bytes included ("LOAD\0x"
// is an unknown subcommand, not LOAD).
bool subcommand_is(std::string_view argument, std::string_view lower_case_name) {
  return argument.size() == lower_case_name.size() && option_is(argument, lower_case_name);
}

// Redis names the command by its table name ("script|load").
Reply subcommand_arity(std::string_view canonical_name) {
  return Reply::error(redis_errors::wrong_arity("script|" + std::string(canonical_name)));
}

// SCRIPT EXISTS sha...
Reply script_exists(const std::vector<std::string>& argv, const LuaEngine& lua) {
  std::vector<Reply> found;
  found.reserve(argv.size() - 2);
  for (std::size_t i = 2; i < argv.size(); ++i) found.push_back(Reply::integer(lua.exists(argv[i]) ? 1 : 0));
  return Reply::array(std::move(found));
}

// SCRIPT FLUSH [SYNC|ASYNC].
Reply script_flush(const std::vector<std::string>& argv, LuaEngine& lua) {
  const bool mode_ok =
      argv.size() == 2 || (argv.size() == 3 && (option_is(argv[2], "sync") || option_is(argv[2], "async")));
  if (!mode_ok) return error_reply(redis_errors::kScriptFlushMode);
  lua.flush();
  return ok_reply();
}

// SCRIPT as Redis 6.2 has it: each subcommand taken only with its
// arguments, anything else one text (names compared as C strings).
Reply script_6_2(CommandContext& context) {
  const std::vector<std::string>& argv = context.argv;
  LuaEngine& lua = context.server.lua();
  const std::string_view subcommand = up_to_nul(argv[1]);
  if (argv.size() == 2 && option_is(subcommand, "help")) return Reply::array(script_help(context.server.profile()));
  if (option_is(subcommand, "flush")) return script_flush(argv, lua);
  if (option_is(subcommand, "exists")) return script_exists(argv, lua);
  if (argv.size() == 3 && option_is(subcommand, "load")) return lua.load(argv[2]);
  // Scripts run to completion inside one command: none is ever running.
  if (argv.size() == 2 && option_is(subcommand, "kill")) return error_reply(redis_errors::kNotBusy);
  return error_reply(redis_errors::subcommand_syntax_error(argv[1], "SCRIPT"));
}

Reply script(CommandContext& context) {
  if (!context.server.profile().subcommands_are_commands) return script_6_2(context);
  const std::vector<std::string>& argv = context.argv;
  LuaEngine& lua = context.server.lua();
  const std::string& subcommand = argv[1];
  if (subcommand_is(subcommand, "load")) {
    if (argv.size() != 3) return subcommand_arity("load");
    return lua.load(argv[2]);
  }
  if (subcommand_is(subcommand, "exists")) {
    if (argv.size() < 3) return subcommand_arity("exists");
    return script_exists(argv, lua);
  }
  if (subcommand_is(subcommand, "flush")) return script_flush(argv, lua);
  if (subcommand_is(subcommand, "kill")) {
    if (argv.size() != 2) return subcommand_arity("kill");
    // Scripts run to completion inside one command: none is ever running.
    return error_reply(redis_errors::kNotBusy);
  }
  if (subcommand_is(subcommand, "help")) {
    if (argv.size() != 2) return subcommand_arity("help");
    return Reply::array(script_help(context.server.profile()));
  }
  return Reply::error(redis_errors::script_unknown_subcommand(subcommand));
}

}  // namespace

void register_scripting_commands(CommandTable& table) {
  table.add({"eval", -3, kCommandWrite | kCommandNoScript, eval});
  table.add({"evalsha", -3, kCommandWrite | kCommandNoScript, evalsha});
  table.add({"script", -2, kCommandNoScript, script});
}

}  // namespace turnstile::sim
