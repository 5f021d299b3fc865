// fake_redis/redis_errors.h
//
// Every error text the fake Redis answers with, word for word as
// redis-server 7.0.15 sends it (checked against the real server, not
// remembered), and where another release (server_profile.h) words one
// differently, its text beside it, chosen by the functions taking a
// profile. Keeping them in one place lets the differential test and the
// lock code rely on exact texts.

#ifndef TURNSTILE_FAKE_REDIS_REDIS_ERRORS_H_
#define TURNSTILE_FAKE_REDIS_REDIS_ERRORS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fake_redis/server_profile.h"

namespace turnstile::sim::redis_errors {

inline constexpr std::string_view kWrongType = "WRONGTYPE Operation against a key holding the wrong kind of value";
inline constexpr std::string_view kSyntax = "ERR syntax error";
inline constexpr std::string_view kNotInteger = "ERR value is not an integer or out of range";
inline constexpr std::string_view kNotFloat = "ERR value is not a valid float";
inline constexpr std::string_view kHashValueNotInteger = "ERR hash value is not an integer";
inline constexpr std::string_view kIncrDecrOverflow = "ERR increment or decrement would overflow";
inline constexpr std::string_view kDecrementOverflow = "ERR decrement would overflow";
inline constexpr std::string_view kMinMaxNotFloat = "ERR min or max is not a float";
inline constexpr std::string_view kScoreNaN = "ERR resulting score is not a number (NaN)";
inline constexpr std::string_view kMustBePositive = "ERR value is out of range, must be positive";
inline constexpr std::string_view kDbIndexOutOfRange = "ERR DB index is out of range";
inline constexpr std::string_view kZaddXxNx = "ERR XX and NX options at the same time are not compatible";
inline constexpr std::string_view kZaddGtLtNx = "ERR GT, LT, and/or NX options at the same time are not compatible";
inline constexpr std::string_view kZaddIncrPair = "ERR INCR option supports a single increment-element pair";
inline constexpr std::string_view kZrangeLimitNeedsBy =
    "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX";
inline constexpr std::string_view kLposRankZero =
    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use "
    "negative to start from the end of the list";
inline constexpr std::string_view kRedis6LposRankZero =
    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second, ...";
std::string_view lpos_rank_zero(const ServerProfile& profile);
inline constexpr std::string_view kLposCountNegative = "ERR COUNT can't be negative";
inline constexpr std::string_view kLposMaxlenNegative = "ERR MAXLEN can't be negative";
inline constexpr std::string_view kExpireNxXxGtLt =
    "ERR NX and XX, GT or LT options at the same time are not compatible";
inline constexpr std::string_view kExpireGtLt = "ERR GT and LT options at the same time are not compatible";
inline constexpr std::string_view kLexRangeInvalid = "ERR min or max not valid string range item";
inline constexpr std::string_view kWithScoresByLex =
    "ERR syntax error, WITHSCORES not supported in combination with BYLEX";

// EVAL, EVALSHA, SCRIPT.
inline constexpr std::string_view kNoScript = "NOSCRIPT No matching script. Please use EVAL.";
inline constexpr std::string_view kValkeyNoScript = "NOSCRIPT No matching script.";
std::string_view no_script(const ServerProfile& profile);
inline constexpr std::string_view kNumKeysTooMany = "ERR Number of keys can't be greater than number of args";
inline constexpr std::string_view kNumKeysNegative = "ERR Number of keys can't be negative";
inline constexpr std::string_view kScriptFlushMode = "ERR SCRIPT FLUSH only support SYNC|ASYNC option";
inline constexpr std::string_view kNotBusy = "NOTBUSY No scripts in execution right now.";
// To every other command while a script runs past busy-reply-threshold.
inline constexpr std::string_view kBusyScript =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
inline constexpr std::string_view kWriteFromReadOnlyScript =
    "ERR Write commands are not allowed from read-only scripts.";

// From the Lua engine: a shebang, a result, a failed run.
inline constexpr std::string_view kInvalidShebang = "ERR Invalid script shebang";
inline constexpr std::string_view kLuaStackLimit = "ERR reached lua stack limit";
// Not Redis's: redis-server 7.0.15 crashes on an error table without a
// string err (error({})); the fake answers with this instead.
inline constexpr std::string_view kScriptUnknownError = "ERR unknown error";

// From redis.call / redis.pcall.
inline constexpr std::string_view kScriptUnknownCommand = "ERR Unknown Redis command called from script";
inline constexpr std::string_view kValkeyScriptUnknownCommand = "ERR Unknown command called from script";
std::string_view script_unknown_command(const ServerProfile& profile);
inline constexpr std::string_view kScriptWrongArity = "ERR Wrong number of args calling Redis command from script";
inline constexpr std::string_view kValkeyScriptWrongArity = "ERR Wrong number of args calling command from script";
std::string_view script_wrong_arity(const ServerProfile& profile);
inline constexpr std::string_view kScriptNotAllowed = "ERR This Redis command is not allowed from script";
std::string_view script_not_allowed(const ServerProfile& profile);
// Redis 6.2's refusals of redis.call, without an error code: the script
// path gives them the caller's "<source>: <line>: " instead.
inline constexpr std::string_view kRedis6ScriptUnknownCommand = "Unknown Redis command called from Lua script";
inline constexpr std::string_view kRedis6ScriptWrongArity =
    "Wrong number of args calling Redis command From Lua script";
inline constexpr std::string_view kRedis6ScriptNotAllowed = "This Redis command is not allowed from scripts";
// True for those three texts (only 6.2's refusals come without a code).
bool is_redis_6_script_refusal(std::string_view text);

// Error tables the redis library hands to scripts, without the "ERR " the
// table gets (luaPushError): redis.call / redis.pcall with no arguments or
// with one that is neither string nor number, and redis.error_reply /
// redis.status_reply without exactly one string.
inline constexpr std::string_view kRedisCallNoArguments =
    "Please specify at least one argument for this redis lib call";
// (Written in two literals: an error text, not Lua.)
inline constexpr std::string_view kRedis6CallNoArguments =
    "Please specify at least one argument for redis.call"
    "()";
inline constexpr std::string_view kValkeyCallNoArguments = "Please specify at least one argument for this call";
std::string_view redis_call_no_arguments(const ServerProfile& profile);
inline constexpr std::string_view kRedisCallBadArgument = "Lua redis lib command arguments must be strings or integers";
inline constexpr std::string_view kRedis6CallBadArgument = "Lua redis() command arguments must be strings or integers";
inline constexpr std::string_view kValkeyCallBadArgument = "Command arguments must be strings or integers";
std::string_view redis_call_bad_argument(const ServerProfile& profile);

// Raised by the redis table's helpers (plain texts, no "ERR "): their
// argument counts name the table as the release does ("redis.log()",
// Valkey "server.log()"); set_repl's said "two arguments" for its one
// until 7.2.
enum class ScriptHelper : std::uint8_t { log, setresp, set_repl };
std::string script_helper_arity(const ServerProfile& profile, ScriptHelper helper);
inline constexpr std::string_view kLogLevelNotNumber = "First argument must be a number (log level).";
inline constexpr std::string_view kInvalidLogLevel = "Invalid debug level.";
inline constexpr std::string_view kValkeyInvalidLogLevel = "Invalid log level.";
std::string_view invalid_log_level(const ServerProfile& profile);

// LPOS RANK -9223372036854775808 from 7.2 on (getRangeLongFromObjectOrReply).
std::string value_out_of_range(std::int64_t min, std::int64_t max);
inline constexpr std::string_view kReplyHelperArguments = "wrong number or type of arguments";

// "ERR wrong number of arguments for 'get' command" (name lower-cased, as
// Redis prints the command's table name).
std::string wrong_arity(std::string_view command_name);

// "ERR unknown command 'foo', with args beginning with: 'a' 'b' " — the name
// as sent, each argument quoted and followed by a space (Redis truncates
// both; see the definition). Redis 6.2: "ERR unknown command `foo`, with
// args beginning with: `a`, `b`, ".
std::string unknown_command(const ServerProfile& profile, const std::vector<std::string>& argv);

// "ERR invalid expire time in 'set' command"; Redis 6.2: "ERR invalid
// expire time in set".
std::string invalid_expire_time(const ServerProfile& profile, std::string_view command_name);

// "ERR Unsupported option zz".
std::string unsupported_option(std::string_view option);

// "ERR unknown subcommand 'FOO'. Try PUBSUB HELP."
std::string unknown_subcommand(std::string_view subcommand, std::string_view command_name);

// The same text as SCRIPT answers it: the subcommand cut at 128 bytes, as
// Redis's '%.128s', but not at a NUL byte (unknown_subcommand does the
// reverse; Redis does both).
std::string script_unknown_subcommand(std::string_view subcommand);

// "ERR unknown subcommand or wrong number of arguments for 'CHANNELS'. Try PUBSUB HELP."
std::string subcommand_wrong_arity(std::string_view subcommand, std::string_view command_name);

// Redis 6.2's answer to any subcommand it does not take, with these
// arguments (addReplySubcommandSyntaxError): "ERR Unknown subcommand or
// wrong number of arguments for 'foo'. Try SCRIPT HELP."
std::string subcommand_syntax_error(std::string_view subcommand, std::string_view command_name);

// "ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING /
// QUIT / RESET are allowed in this context" (Redis 6.2: "(P)SUBSCRIBE /
// (P)UNSUBSCRIBE").
std::string not_allowed_when_subscribed(const ServerProfile& profile, std::string_view command_name);

// "ERR Unexpected engine in script shebang: python".
std::string unexpected_shebang_engine(std::string_view engine);

// "ERR Unknown lua shebang option: nope".
std::string unknown_shebang_option(std::string_view option);

// "ERR Unexpected flag in script shebang: nope".
std::string unexpected_shebang_flag(std::string_view flag);

// "ERR Error compiling script (new function): <Lua's message>".
std::string script_compile_error(std::string_view lua_message);

// "ERR Error running script <sha>, <Lua's message>", the message cut at 100
// bytes (Redis's '%.100s'), for a run that failed without an error table
// (out of memory).
std::string script_run_error(std::string_view sha, std::string_view lua_message);

// Redis 6.2's failed run: "ERR Error running script (call to f_<sha>):
// <message>", as addReplyErrorFormat sends it (formatted_error).
std::string wrapped_script_error(std::string_view sha, std::string_view message);

// What Redis 6.2's error handler (__redis__err__handler, a Lua function
// of chunk "@err_handler_def") ends with when the error is no string nor
// number: its own concatenation fails on line 9, and it handles that
// error: "@err_handler_def:9: err_handler_def:9: attempt to concatenate
// local 'err' (a table value)", the type's name between these two.
inline constexpr std::string_view kErrorHandlerFailureBefore =
    "@err_handler_def:9: err_handler_def:9: attempt to concatenate local 'err' (a ";
inline constexpr std::string_view kErrorHandlerFailureAfter = " value)";
// printf's "%s" of a null pointer, what 6.2 prints for an error that is
// no string.
inline constexpr std::string_view kPrintfNull = "(null)";

}  // namespace turnstile::sim::redis_errors

#endif  // TURNSTILE_FAKE_REDIS_REDIS_ERRORS_H_
