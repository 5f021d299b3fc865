// `turnstile sim ARGS` executes turnstile-sim (cli/sim_dispatch.h).

#include "cli/sim_dispatch.h"

#include <errno.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "cli/exit_status.h"

namespace turnstile::cli {
namespace {

constexpr const char* kSimProgram = "turnstile-sim";
// Arguments passed on: far more than any shell allows (ARG_MAX), a bound
// rather than a limit anyone meets.
constexpr int kMaxSimArgs = 4096;

std::string running_program() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string() : self.string();
}

}  // namespace

std::vector<std::string> sim_program_candidates(const std::string& self, const char* exec_path,
                                                const SimInstallPaths& paths) {
  namespace fs = std::filesystem;
  if (exec_path != nullptr && exec_path[0] != '\0') return {(fs::path(exec_path) / kSimProgram).string()};
  std::vector<std::string> candidates;
  const auto add = [&](const fs::path& path) {
    const std::string text = path.lexically_normal().string();
    for (const std::string& seen : candidates) {
      if (seen == text) return;
    }
    candidates.push_back(text);
  };
  if (!self.empty()) {
    const fs::path self_dir = fs::path(self).parent_path();
    add(self_dir / kSimProgram);
    const fs::path relative = fs::path(paths.libexec_dir).lexically_relative(paths.bin_dir);
    if (!relative.empty()) add(self_dir / relative / kSimProgram);
  }
  add(fs::path(paths.libexec_dir) / kSimProgram);
  return candidates;
}

int exec_turnstile_sim(int argc, char** argv, const SimInstallPaths& paths) {
  if (argc < 0 || argc > kMaxSimArgs) {
    std::fprintf(stderr, "turnstile: sim: more than %d arguments\n", kMaxSimArgs);
    return kExitUsage;
  }
  const std::vector<std::string> candidates =
      sim_program_candidates(running_program(), std::getenv("TURNSTILE_EXEC_PATH"), paths);
  std::vector<char*> sim_argv;
  sim_argv.reserve(static_cast<std::size_t>(argc) + 2);
  sim_argv.push_back(nullptr);  // the program's path, below
  for (int i = 0; i < argc; ++i) sim_argv.push_back(argv[i]);
  sim_argv.push_back(nullptr);
  std::string looked_in;
  for (const std::string& candidate : candidates) {
    if (::access(candidate.c_str(), F_OK) != 0) {
      looked_in += (looked_in.empty() ? "" : ", ") + candidate;
      continue;
    }
    sim_argv[0] = const_cast<char*>(candidate.c_str());
    ::execv(candidate.c_str(), sim_argv.data());
    const int error = errno;
    std::fprintf(stderr, "turnstile: sim: cannot execute %s: %s\n", candidate.c_str(), std::strerror(error));
    return error == ENOENT ? kExitCommandNotFound : kExitCannotExecute;
  }
  std::fprintf(stderr,
               "turnstile: sim: the simulator (turnstile-sim) is not installed; looked for %s "
               "(set TURNSTILE_EXEC_PATH to its directory)\n",
               looked_in.c_str());
  return kExitCommandNotFound;
}

}  // namespace turnstile::cli
