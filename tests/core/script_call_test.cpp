#include "core/script_call.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lua_scripts.h"
#include "turnstile/errors.h"

namespace turnstile {
namespace {

TEST(EmbeddedScriptsTest, EveryScriptCarriesItsSourceAndSha) {
  ASSERT_FALSE(embedded_scripts().empty());
  for (const Script* script : embedded_scripts()) {
    EXPECT_FALSE(script->source.empty()) << script->name;
    EXPECT_EQ(script->sha1.size(), 40u) << script->name;
    EXPECT_EQ(find_embedded_script(script->name), script);
  }
  EXPECT_EQ(find_embedded_script("no_such_script"), nullptr);
  EXPECT_EQ(find_embedded_script("reentrant_lock_acquire"), &scripts::reentrant_lock_acquire);
}

TEST(ScriptCallTest, BuildsEvalshaArgv) {
  const auto argv = evalsha_argv(scripts::reentrant_lock_acquire, {"k"}, {"30000", "id:1"});
  const std::vector<std::string> expected = {
      "EVALSHA", std::string(scripts::reentrant_lock_acquire.sha1), "1", "k", "30000", "id:1"};
  EXPECT_EQ(argv, expected);
}

TEST(ScriptCallTest, ReloadsOnceOnNoscript) {
  std::vector<std::vector<std::string>> sent;
  bool loaded = false;
  const SendCommand send = [&](const std::vector<std::string>& argv) {
    sent.push_back(argv);
    if (argv[0] == "SCRIPT") {
      loaded = true;
      return Reply::bulk(std::string(scripts::reentrant_lock_acquire.sha1));
    }
    return loaded ? Reply::integer(7) : Reply::error("NOSCRIPT No matching script. Please use EVAL.");
  };
  EXPECT_EQ(eval_with_reload(scripts::reentrant_lock_acquire, {"k"}, {}, send), Reply::integer(7));
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[1][0], "SCRIPT");
  EXPECT_EQ(sent[1][2], scripts::reentrant_lock_acquire.source);
}

TEST(ScriptCallTest, PersistentNoscriptIsRaisedNotLooped) {
  int calls = 0;
  const SendCommand send = [&](const std::vector<std::string>& argv) {
    ++calls;
    if (argv[0] == "SCRIPT") return Reply::bulk(std::string(scripts::reentrant_lock_acquire.sha1));
    return Reply::error("NOSCRIPT No matching script. Please use EVAL.");
  };
  EXPECT_THROW(eval_with_reload(scripts::reentrant_lock_acquire, {"k"}, {}, send), NoScriptError);
  EXPECT_EQ(calls, 3);
}

TEST(ScriptCallTest, TopLevelErrorReplyIsTyped) {
  const SendCommand send = [](const std::vector<std::string>&) {
    return Reply::error("WRONGTYPE Operation against a key holding the wrong kind of value");
  };
  EXPECT_THROW(eval_with_reload(scripts::reentrant_lock_acquire, {"k"}, {}, send), WrongTypeError);
}

TEST(ScriptCallTest, AWrongTypeInsideAScriptNamesTheKeyAndWhatItHolds) {
  std::vector<std::string> asked;
  const SendCommand send = [&](const std::vector<std::string>& argv) {
    if (argv[0] == "TYPE") {
      asked.push_back(argv[1]);
      return Reply::status(argv[1] == "sem" ? "string" : argv[1] == "{sem}:timeout" ? "list" : "none");
    }
    return Reply::error("WRONGTYPE Operation against a key holding the wrong kind of value script: " +
                        std::string(scripts::permit_semaphore.sha1) + ", on @user_script:52.");
  };
  try {
    (void)eval_with_reload(scripts::permit_semaphore, {"sem", "{sem}:timeout", "redisson_sc:{sem}"}, {}, send);
    FAIL() << "no error";
  } catch (const WrongTypeError& error) {
    EXPECT_EQ(std::string(error.what()),
              "WRONGTYPE a key of permit_semaphore holds another kind of value: 'sem' holds a string, "
              "'{sem}:timeout' holds a list");
  }
  EXPECT_EQ(asked, (std::vector<std::string>{"sem", "{sem}:timeout", "redisson_sc:{sem}"}));

  // A TYPE that fails leaves the server's own text.
  const SendCommand failing = [](const std::vector<std::string>& argv) -> Reply {
    if (argv[0] == "TYPE") throw ConnectionError("127.0.0.1:1: connection reset");
    return Reply::error(
        "WRONGTYPE Operation against a key holding the wrong kind of value script: x, on @user_script:1.");
  };
  try {
    (void)eval_with_reload(scripts::permit_semaphore, {"sem"}, {}, failing);
    FAIL() << "no error";
  } catch (const WrongTypeError& error) {
    EXPECT_THAT(std::string(error.what()), ::testing::HasSubstr("@user_script:1"));
  }
}

// Redis 6.2 wraps it in ERR: named the same way.
TEST(ScriptCallTest, ARedis62WrappedWrongTypeNamesTheKeyToo) {
  const SendCommand send = [&](const std::vector<std::string>& argv) {
    if (argv[0] == "TYPE") return Reply::status(argv[1] == "{sem}:timeout" ? "list" : "string");
    return Reply::error("ERR Error running script (call to f_" + std::string(scripts::permit_semaphore.sha1) +
                        "): @user_script:453: WRONGTYPE Operation against a key holding the wrong kind of value");
  };
  try {
    (void)eval_with_reload(scripts::permit_semaphore, {"sem", "{sem}:timeout"}, {}, send);
    FAIL() << "no error";
  } catch (const WrongTypeError& error) {
    EXPECT_EQ(std::string(error.what()),
              "WRONGTYPE a key of permit_semaphore holds another kind of value: 'sem' holds a string, "
              "'{sem}:timeout' holds a list");
  }
}

TEST(ScriptCallTest, NestedErrorsStayValues) {
  const SendCommand send = [](const std::vector<std::string>&) { return Reply::array({Reply::error("ERR nested")}); };
  const Reply reply = eval_with_reload(scripts::reentrant_lock_acquire, {"k"}, {}, send);
  EXPECT_TRUE(reply.as_array()[0].is_error());
}

}  // namespace
}  // namespace turnstile
