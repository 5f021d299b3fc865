#include "fake_redis/redis_errors.h"

#include <algorithm>
#include <cstddef>

#include "core/check.h"

namespace turnstile::sim::redis_errors {
namespace {

// Redis prints names and arguments with "%.128s" into its error texts.
constexpr std::size_t kMaxQuotedChars = 128;
// and a failed script's message with "%.100s".
constexpr std::size_t kMaxRunErrorChars = 100;

// printf's %s stops at the first NUL byte; Redis's texts inherit that.
std::string_view up_to_nul(std::string_view text) { return text.substr(0, text.find('\0')); }

// Redis replaces CR and LF in error texts with spaces so the reply stays one line.
std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\r', ' ');
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

// "ERR unknown subcommand '<quoted>'. Try <COMMAND> HELP."
std::string unknown_subcommand_text(std::string_view quoted, std::string_view command_name) {
  return one_line("ERR unknown subcommand '" + std::string(quoted) + "'. Try " + std::string(command_name) + " HELP.");
}

// The text `profile`'s release words: 6.2's, Valkey's, or Redis 7's.
std::string_view worded_by(const ServerProfile& profile, std::string_view redis_6, std::string_view redis_7,
                           std::string_view valkey) {
  if (profile.redis_6_texts) return redis_6;
  return profile.valkey_texts ? valkey : redis_7;
}

}  // namespace

std::string_view no_script(const ServerProfile& profile) { return profile.valkey_texts ? kValkeyNoScript : kNoScript; }

std::string_view lpos_rank_zero(const ServerProfile& profile) {
  return profile.redis_6_texts ? kRedis6LposRankZero : kLposRankZero;
}

std::string_view script_unknown_command(const ServerProfile& profile) {
  return worded_by(profile, kRedis6ScriptUnknownCommand, kScriptUnknownCommand, kValkeyScriptUnknownCommand);
}

std::string_view script_wrong_arity(const ServerProfile& profile) {
  return worded_by(profile, kRedis6ScriptWrongArity, kScriptWrongArity, kValkeyScriptWrongArity);
}

std::string_view script_not_allowed(const ServerProfile& profile) {
  return profile.redis_6_texts ? kRedis6ScriptNotAllowed : kScriptNotAllowed;
}

bool is_redis_6_script_refusal(std::string_view text) {
  return text == kRedis6ScriptUnknownCommand || text == kRedis6ScriptWrongArity || text == kRedis6ScriptNotAllowed;
}

std::string_view redis_call_no_arguments(const ServerProfile& profile) {
  return worded_by(profile, kRedis6CallNoArguments, kRedisCallNoArguments, kValkeyCallNoArguments);
}

std::string_view redis_call_bad_argument(const ServerProfile& profile) {
  return worded_by(profile, kRedis6CallBadArgument, kRedisCallBadArgument, kValkeyCallBadArgument);
}

std::string script_helper_arity(const ServerProfile& profile, ScriptHelper helper) {
  const std::string table = profile.valkey_texts ? "server" : "redis";
  switch (helper) {
    case ScriptHelper::log:
      return table + ".log() requires two arguments or more.";
    case ScriptHelper::setresp:
      return table + ".setresp() requires one argument.";
    case ScriptHelper::set_repl:
      return table + ".set_repl() requires " + (profile.set_repl_arity_fixed ? "one argument." : "two arguments.");
  }
  TURNSTILE_CHECK_MSG(false, "every helper has a text");
  return {};
}

std::string_view invalid_log_level(const ServerProfile& profile) {
  return profile.valkey_texts ? kValkeyInvalidLogLevel : kInvalidLogLevel;
}

std::string value_out_of_range(std::int64_t min, std::int64_t max) {
  return "ERR value is out of range, value must between " + std::to_string(min) + " and " + std::to_string(max);
}

std::string wrong_arity(std::string_view command_name) {
  return "ERR wrong number of arguments for '" + std::string(command_name) + "' command";
}

std::string unknown_command(const ServerProfile& profile, const std::vector<std::string>& argv) {
  // 7.0: 'a' 'b' ; 6.2: `a`, `b`, (and the name not cut).
  const char quote = profile.redis_6_texts ? '`' : '\'';
  const std::string_view after = profile.redis_6_texts ? ", " : " ";
  std::string args;
  for (std::size_t i = 1; i < argv.size() && args.size() < kMaxQuotedChars; ++i) {
    std::string_view arg = up_to_nul(argv[i]).substr(0, kMaxQuotedChars - args.size());
    args += quote;
    args += arg;
    args += quote;
    args += after;
  }
  std::string_view name = argv.empty() ? std::string_view() : up_to_nul(argv[0]);
  if (!profile.redis_6_texts) name = name.substr(0, kMaxQuotedChars);
  return one_line("ERR unknown command " + std::string(1, quote) + std::string(name) + quote +
                  ", with args beginning with: " + args);
}

std::string invalid_expire_time(const ServerProfile& profile, std::string_view command_name) {
  if (profile.redis_6_texts) return "ERR invalid expire time in " + std::string(command_name);
  return "ERR invalid expire time in '" + std::string(command_name) + "' command";
}

std::string unsupported_option(std::string_view option) {
  return one_line("ERR Unsupported option " + std::string(up_to_nul(option)));
}

std::string not_allowed_when_subscribed(const ServerProfile& profile, std::string_view command_name) {
  const std::string_view kinds = profile.redis_6_texts ? "(P)" : "(P|S)";
  return "ERR Can't execute '" + std::string(command_name) + "': only " + std::string(kinds) + "SUBSCRIBE / " +
         std::string(kinds) + "UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context";
}

std::string unknown_subcommand(std::string_view subcommand, std::string_view command_name) {
  return unknown_subcommand_text(up_to_nul(subcommand), command_name);
}

std::string script_unknown_subcommand(std::string_view subcommand) {
  return unknown_subcommand_text(up_to_nul(subcommand).substr(0, kMaxQuotedChars), "SCRIPT");
}

std::string subcommand_wrong_arity(std::string_view subcommand, std::string_view command_name) {
  return one_line("ERR unknown subcommand or wrong number of arguments for '" + std::string(up_to_nul(subcommand)) +
                  "'. Try " + std::string(command_name) + " HELP.");
}

std::string subcommand_syntax_error(std::string_view subcommand, std::string_view command_name) {
  return one_line("ERR Unknown subcommand or wrong number of arguments for '" + std::string(up_to_nul(subcommand)) +
                  "'. Try " + std::string(command_name) + " HELP.");
}

std::string unexpected_shebang_engine(std::string_view engine) {
  return "ERR Unexpected engine in script shebang: " + std::string(engine);
}

std::string unknown_shebang_option(std::string_view option) {
  return "ERR Unknown lua shebang option: " + std::string(option);
}

std::string unexpected_shebang_flag(std::string_view flag) {
  return "ERR Unexpected flag in script shebang: " + std::string(flag);
}

std::string script_compile_error(std::string_view lua_message) {
  return "ERR Error compiling script (new function): " + std::string(lua_message);
}

std::string script_run_error(std::string_view sha, std::string_view lua_message) {
  return "ERR Error running script " + std::string(sha) + ", " + std::string(lua_message.substr(0, kMaxRunErrorChars));
}

std::string wrapped_script_error(std::string_view sha, std::string_view message) {
  return "ERR Error running script (call to f_" + std::string(sha) + "): " + std::string(message);
}

}  // namespace turnstile::sim::redis_errors
