#include "turnstile/errors.h"

#include <gtest/gtest.h>

namespace turnstile {
namespace {

template <typename Expected>
void expect_raised_as(std::string_view message) {
  try {
    throw_server_error(message);
  } catch (const Expected& error) {
    EXPECT_EQ(error.server_message(), message);
    EXPECT_STREQ(error.what(), std::string(message).c_str());
    return;
  } catch (const std::exception& other) {
    ADD_FAILURE() << "'" << message << "' raised the wrong type: " << other.what();
    return;
  }
}

TEST(ErrorsTest, EachRedisCodeMapsToItsType) {
  expect_raised_as<WrongTypeError>("WRONGTYPE Operation against a key holding the wrong kind of value");
  expect_raised_as<NoScriptError>("NOSCRIPT No matching script. Please use EVAL.");
  expect_raised_as<AuthenticationError>("NOAUTH Authentication required.");
  expect_raised_as<AuthenticationError>("WRONGPASS invalid username-password pair or user is disabled.");
  expect_raised_as<PermissionError>("NOPERM this user has no permissions to run the 'flushall' command");
  expect_raised_as<ReadOnlyError>("READONLY You can't write against a read only replica.");
  expect_raised_as<NoReplicasError>("NOREPLICAS Not enough good replicas to write.");
  expect_raised_as<OutOfMemoryError>("OOM command not allowed when used memory > 'maxmemory'.");
  expect_raised_as<CrossSlotError>("CROSSSLOT Keys in request don't hash to the same slot");
  expect_raised_as<BusyError>("BUSY Redis is busy running a script.");
  expect_raised_as<ServerNotReadyError>("LOADING Redis is loading the dataset in memory");
  expect_raised_as<ServerNotReadyError>(
      "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.");
}

TEST(ErrorsTest, ScriptFailuresAreScriptErrors) {
  expect_raised_as<ScriptError>(
      "ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: "
      "abc, on @user_script:1.");
  expect_raised_as<ScriptError>("ERR Error running script (call to f_abc): @user_script:1: boom");
}

// A command inside a script refused by the user's ACL is a PermissionError
// (the CLI's 69, "refused by ACL"), not a script's bug, in every server's
// words: Redis 7.0 (as a real 7.0.15 answers), 7.2 and Valkey (script.c,
// "ACL failure in script"), 6.2 (scripting.c, inside its wrapping).
TEST(ErrorsTest, AScriptsCommandRefusedByAclIsAPermissionError) {
  expect_raised_as<PermissionError>(
      "ERR The user executing the script can't run this command or subcommand script: "
      "0151d66fccd26f201a21c1ca4985934c19506d79, on @user_script:141.");
  expect_raised_as<PermissionError>(
      "ERR ACL failure in script: User app has no permissions to run the 'time' command script: abc, on "
      "@user_script:14.");
  expect_raised_as<PermissionError>(
      "ERR Error running script (call to f_4b8c4e5a0d7e): @user_script:14: @user_script: 14: The user executing "
      "the script can't run this command or subcommand");
  // Other script failures stay script errors.
  expect_raised_as<ScriptError>("ERR user_script:1: Script attempted to access nonexistent global variable 'x'");
}

TEST(ErrorsTest, WrongTypeInsideAScriptIsStillWrongType) {
  // Redis 7 keeps the code of an error raised by redis.call in a script.
  expect_raised_as<WrongTypeError>(
      "WRONGTYPE Operation against a key holding the wrong kind of value script: abc, on "
      "@user_script:1.");
}

// Redis 6.2 wraps an error raised inside a script in ERR (issue #50's
// server matrix found OOM, READONLY and WRONGTYPE untyped there): the
// inner code types it, as Redis 7's form does. Texts from 6.2.16's
// scripting.c (luaPushError, "Error running script").
TEST(ErrorsTest, Redis62WrappedScriptErrorsAreTypedByTheirInnerCode) {
  const std::string wrapped = "ERR Error running script (call to f_4b8c4e5a0d7e): ";
  expect_raised_as<WrongTypeError>(wrapped +
                                   "@user_script:1: WRONGTYPE Operation against a key holding the wrong kind of value");
  expect_raised_as<OutOfMemoryError>(wrapped +
                                     "@user_script:7: @user_script: 7: -OOM command not allowed when used memory > "
                                     "'maxmemory'.");
  expect_raised_as<ReadOnlyError>(wrapped +
                                  "@user_script:3: @user_script: 3: -READONLY You can't write against a read only "
                                  "replica.");
  expect_raised_as<PermissionError>(wrapped + "@user_script:2: @user_script: 2: -NOPERM this user has no permissions");
  expect_raised_as<NoReplicasError>(wrapped +
                                    "@user_script:4: @user_script: 4: -NOREPLICAS Not enough good replicas to write.");
  try {
    throw_server_error(wrapped + "@user_script:1: WRONGTYPE Operation against a key");
  } catch (const ServerError& error) {
    EXPECT_EQ(error.code(), "WRONGTYPE");
  }
  // What is not a code stays a script error: a Lua failure, a plain ERR.
  expect_raised_as<ScriptError>(wrapped + "@user_script:1: user_script:1: attempt to compare nil with number");
  expect_raised_as<ScriptError>(wrapped + "@user_script:1: ERR wrong number of arguments for 'set' command");
  expect_raised_as<ScriptError>(wrapped + "@user_script:x: WRONGTYPE not a location");
  expect_raised_as<ScriptError>("ERR Error running script (call to f_abc) no colon");
}

TEST(ErrorsTest, OtherErrorsAreGenericServerErrors) {
  try {
    throw_server_error("ERR value is not an integer or out of range");
    FAIL() << "nothing thrown";
  } catch (const ScriptError&) {
    FAIL() << "a plain ERR is not a script error";
  } catch (const ServerError& error) {
    EXPECT_EQ(error.code(), "ERR");
  }
}

TEST(ErrorsTest, TimeoutIsAConnectionError) {
  EXPECT_THROW(throw TimeoutError("127.0.0.1:6379: command timed out"), ConnectionError);
}

TEST(InQuotesTest, NamesPrintOnOneLineWithWhatTheyAre) {
  EXPECT_EQ(in_quotes("lock:order:42"), "'lock:order:42'");
  EXPECT_EQ(in_quotes("a\nb"), "'a\\nb'");
  EXPECT_EQ(in_quotes(std::string_view("\0\x1b[31m\x7f", 7)), "'\\x00\\x1b[31m\\x7f'");
  EXPECT_EQ(in_quotes("it's \\ \t\r"), "'it\\'s \\\\ \\t\\r'");
  // Well-formed UTF-8 stays; stray, overlong and surrogate bytes do not.
  EXPECT_EQ(in_quotes("z\xc3\xbcrich \xe2\x82\xac \xf0\x9f\x94\x92"), "'z\xc3\xbcrich \xe2\x82\xac \xf0\x9f\x94\x92'");
  EXPECT_EQ(in_quotes("\xc3"), "'\\xc3'");
  EXPECT_EQ(in_quotes("\xc0\xaf"), "'\\xc0\\xaf'");
  EXPECT_EQ(in_quotes("\xed\xa0\x80"), "'\\xed\\xa0\\x80'");
  EXPECT_EQ(in_quotes(""), "''");
  // C1 controls (CSI is U+009B) are well-formed UTF-8 but drive terminals.
  EXPECT_EQ(in_quotes("a\xc2\x9b"
                      "2Jb\xc2\xa0"),
            "'a\\xc2\\x9b2Jb\xc2\xa0'");
  const std::string every_byte = [] {
    std::string bytes;
    for (int c = 0; c < 256; ++c) bytes += static_cast<char>(c);
    return bytes;
  }();
  EXPECT_EQ(in_quotes(every_byte).find('\n'), std::string::npos);
}

}  // namespace
}  // namespace turnstile
