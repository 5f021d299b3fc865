// The version in one place: turnstile/version.h (generated from meson.build)
// and the library's turnstile::version() agree, `turnstile --version` / -V
// print it; `turnstile sim` says plainly when turnstile-sim is not
// installed, and where it looks for it (cli/sim_dispatch.h). That it runs
// turnstile-sim when it is: every sim-cli test (demo/meson.build) goes
// through `turnstile sim`.

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
  // Wherever it is asked: `turnstile run --version` answers before any
  // Redis is needed.
  for (const char* command : {"run", "status", "ls", "unlock", "semaphore"}) {
    const CliResult result = run_cli({command, "--version"});
    EXPECT_EQ(result.status, 0) << command;
    EXPECT_EQ(result.out, kVersionLine) << command;
  }
}

TEST(CliVersionTest, HelpNamesTheVersionFlagAndSim) {
  const CliResult result = run_cli({"--help"});
  EXPECT_EQ(result.status, 0);
  EXPECT_THAT(result.out, HasSubstr("--version"));
  EXPECT_THAT(result.out, HasSubstr("sim"));
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
