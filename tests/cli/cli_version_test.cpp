// The version in one place: turnstile/version.h (generated from meson.build)
// and the library's turnstile::version() agree, `turnstile --version` / -V
// print it; `turnstile sim` executes turnstile-sim (cli/sim_dispatch.h),
// and says so plainly when it is not installed.

#include <turnstile/version.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "cli/sim_dispatch.h"
#include "cli_process.h"

namespace turnstile::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kVersionLine = std::string("turnstile ") + TURNSTILE_VERSION_STRING + "\n";

TEST(VersionTest, HeaderAndLibraryAgree) {
  EXPECT_STREQ(turnstile::version(), TURNSTILE_VERSION_STRING);
  const std::string parts = std::to_string(TURNSTILE_VERSION_MAJOR) + "." + std::to_string(TURNSTILE_VERSION_MINOR) +
                            "." + std::to_string(TURNSTILE_VERSION_PATCH);
  EXPECT_EQ(parts, TURNSTILE_VERSION_STRING);
}

TEST(CliVersionTest, LongAndShortFlagPrintTheVersion) {
  for (const char* flag : {"--version", "-V"}) {
    const CliResult result = run_cli({flag});
    EXPECT_EQ(result.status, 0) << flag;
    EXPECT_EQ(result.out, kVersionLine) << flag;
    EXPECT_EQ(result.err, "") << flag;
  }
}

TEST(CliVersionTest, HelpNamesTheVersionFlagAndSim) {
  const CliResult result = run_cli({"--help"});
  EXPECT_EQ(result.status, 0);
  EXPECT_THAT(result.out, HasSubstr("--version"));
  EXPECT_THAT(result.out, HasSubstr("sim"));
}

TEST(SimDispatchTest, TurnstileSimRunsThroughTurnstile) {
  const CliResult list = run_cli({"sim", "--list"});
  EXPECT_EQ(list.status, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr("contention"));
  const CliResult version = run_cli({"sim", "--version"});
  EXPECT_EQ(version.status, 0) << version.err;
  EXPECT_EQ(version.out, std::string("turnstile-sim ") + TURNSTILE_VERSION_STRING + "\n");
  const CliResult bad = run_cli({"sim", "--scenario", "contention", "--seed", "-1"});
  EXPECT_EQ(bad.status, 64);
  EXPECT_THAT(bad.err, HasSubstr("turnstile sim"));
}

TEST(SimDispatchTest, NotInstalledIs127AndSaysWhereItLooked) {
  ScratchDirectory empty;
  const CliResult result = run_cli({"sim", "--list"}, {{"TURNSTILE_EXEC_PATH", empty.path()}});
  EXPECT_EQ(result.status, 127);
  EXPECT_EQ(result.out, "");
  EXPECT_THAT(result.err, HasSubstr("turnstile-sim"));
  EXPECT_THAT(result.err, HasSubstr("not installed"));
  EXPECT_THAT(result.err, HasSubstr(empty.file("turnstile-sim")));
}

TEST(SimDispatchTest, LooksNextToItselfThenInTheLibexecDir) {
  const cli::SimInstallPaths installed{"/usr/bin", "/usr/libexec/turnstile"};
  EXPECT_THAT(cli::sim_program_candidates("/opt/t/bin/turnstile", nullptr, installed),
              ElementsAre("/opt/t/bin/turnstile-sim", "/opt/t/libexec/turnstile/turnstile-sim",
                          "/usr/libexec/turnstile/turnstile-sim"));
  // Installed where it was configured: each place once.
  EXPECT_THAT(cli::sim_program_candidates("/usr/bin/turnstile", "", installed),
              ElementsAre("/usr/bin/turnstile-sim", "/usr/libexec/turnstile/turnstile-sim"));
  // Unknown own path: the configured directory only.
  EXPECT_THAT(cli::sim_program_candidates("", nullptr, installed), ElementsAre("/usr/libexec/turnstile/turnstile-sim"));
  // TURNSTILE_EXEC_PATH: there and nowhere else.
  EXPECT_THAT(cli::sim_program_candidates("/usr/bin/turnstile", "/x", installed), ElementsAre("/x/turnstile-sim"));
}

}  // namespace
}  // namespace turnstile::testing
