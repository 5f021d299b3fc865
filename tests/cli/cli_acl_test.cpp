// The least-privilege ACL rule of docs/deployment.md, read from the document
// itself (so the two cannot drift), run under by every kind of `turnstile`
// use an SRE's job makes (issue #50, row 5): `run` with each flavor, with a
// waiter, `status` and `ls`. Each must succeed, say nothing was refused, and
// leave no lock behind.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_process.h"
#include "cli/cli_redis_test.h"
#include "cli/cli_test_paths.h"  // generated: TURNSTILE_SOURCE_ROOT

namespace turnstile::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kRuleStart = "ACL SETUSER turnstile on >PASSWORD";

// The words of the documented rule after the user's name, the password
// given as `password`; empty if the document has none.
std::vector<std::string> documented_rule(const std::string& password) {
  std::ifstream file(std::string(TURNSTILE_SOURCE_ROOT) + "/docs/deployment.md");
  std::string line;
  std::vector<std::string> words;
  bool inside = false;
  while (std::getline(file, line)) {
    if (!inside) {
      if (line.find(kRuleStart) == std::string::npos) continue;
      inside = true;
      line = line.substr(line.find(kRuleStart) + std::string("ACL SETUSER turnstile").size());
    } else if (line.starts_with("```")) {
      break;
    }
    std::istringstream split(line);
    for (std::string word; split >> word;) words.push_back(word == ">PASSWORD" ? ">" + password : word);
  }
  return words;
}

class CliAclTest : public CliRedisTest {};

TEST_F(CliAclTest, TheDocumentedRuleRunsEveryKindOfUse) {
  const std::vector<std::string> rule = documented_rule("acl-pass");
  ASSERT_GT(rule.size(), 10u) << "no rule found in docs/deployment.md";
  std::vector<std::string> setuser = {"ACL", "SETUSER", "turnstile", "reset"};
  setuser.insert(setuser.end(), rule.begin(), rule.end());
  ASSERT_EQ(server().command(setuser), "OK");
  const std::string acl_url = "redis://turnstile:acl-pass@" + url().substr(std::string("redis://").size());

  struct Use {
    std::string name;
    std::vector<std::string> options;
  };
  for (const Use& use :
       {Use{"app:acl-reentrant", {}}, Use{"app:acl-fair", {"--fair"}}, Use{"app:acl-token", {"--token"}},
        Use{"app:acl-permits", {"--permits", "2"}}, Use{"app:acl-write", {"-x"}}, Use{"app:acl-read", {"-s"}}}) {
    SCOPED_TRACE(use.name);
    // A holder for a while, a waiter behind it, then `status` and `ls` of it
    // while held.
    std::vector<std::string> holder_args = {"run", "--redis", acl_url};
    holder_args.insert(holder_args.end(), use.options.begin(), use.options.end());
    std::vector<std::string> waiter_args = holder_args;
    holder_args.insert(holder_args.end(), {use.name, "--", "sleep", "1.5"});
    waiter_args.insert(waiter_args.end(), {"-w", "30s", use.name, "--", "true"});
    CliProcess holder(holder_args);
    CliProcess waiter(waiter_args);
    const CliResult status = run_cli({"status", "--redis", acl_url, use.name});
    EXPECT_EQ(status.status, 0) << status.err;
    const CliResult listed = run_cli({"ls", "--redis", acl_url, "app:*"});
    EXPECT_EQ(listed.status, 0) << listed.err;
    EXPECT_EQ(holder.wait_for(std::chrono::seconds(30)), 0) << holder.err();
    EXPECT_EQ(waiter.wait_for(std::chrono::seconds(30)), 0) << waiter.err();
    for (const std::string& err : {holder.err(), waiter.err(), status.err, listed.err}) {
      EXPECT_THAT(err, Not(HasSubstr("refused"))) << err;
      EXPECT_THAT(err, Not(HasSubstr("NOPERM"))) << err;
    }
    // A semaphore's key keeps its count; what is held is in its timeout zset.
    const bool permits = !use.options.empty() && use.options.front() == "--permits";
    EXPECT_FALSE(exists(permits ? "{" + use.name + "}:timeout" : use.name)) << "left held";
  }
}

}  // namespace
}  // namespace turnstile::testing
