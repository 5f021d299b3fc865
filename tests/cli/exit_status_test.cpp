// Errors map to the documented exit statuses; wait statuses to the shell's.

#include "cli/exit_status.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <set>

#include "turnstile/errors.h"

namespace turnstile::cli {
namespace {

int status_for(std::exception_ptr error) {
  return report_error(error, ErrorContext{.redis = "redis://127.0.0.1:6379/0", .name = "lock:a"});
}

TEST(ExitStatusTest, ErrorsMapToTheirDocumentedStatuses) {
  EXPECT_EQ(status_for(std::make_exception_ptr(UsageError("bad"))), kExitUsage);
  EXPECT_EQ(status_for(std::make_exception_ptr(InvalidArgumentError("bad"))), kExitUsage);
  EXPECT_EQ(status_for(std::make_exception_ptr(WrongTypeError("WRONGTYPE x"))), kExitWrongKind);
  EXPECT_EQ(status_for(std::make_exception_ptr(MismatchError("3 permits, not 2"))), kExitWrongKind);
  EXPECT_EQ(status_for(std::make_exception_ptr(ConnectionError("127.0.0.1:6379: refused"))), kExitUnavailable);
  EXPECT_EQ(status_for(std::make_exception_ptr(TimeoutError("127.0.0.1:6379: timed out"))), kExitUnavailable);
  EXPECT_EQ(status_for(std::make_exception_ptr(AuthenticationError("WRONGPASS x"))), kExitUnavailable);
  EXPECT_EQ(status_for(std::make_exception_ptr(PermissionError("NOPERM x"))), kExitUnavailable);
  EXPECT_EQ(status_for(std::make_exception_ptr(ReadOnlyError("READONLY x"))), kExitUnavailable);
  EXPECT_EQ(status_for(std::make_exception_ptr(OutOfMemoryError("OOM x"))), kExitUnavailable);
  EXPECT_EQ(status_for(std::make_exception_ptr(NoReplicasError("NOREPLICAS x"))), kExitUnavailable);
  EXPECT_EQ(status_for(std::make_exception_ptr(BusyError("BUSY x"))), kExitUnavailable);
  EXPECT_EQ(status_for(std::make_exception_ptr(NoScriptError("NOSCRIPT No matching script. Please use EVAL."))),
            kExitUnavailable);
  EXPECT_EQ(status_for(std::make_exception_ptr(ServerNotReadyError("LOADING Redis is loading the dataset in memory"))),
            kExitUnavailable);
  EXPECT_EQ(status_for(std::make_exception_ptr(UnsafeServerError("Redis may evict lock keys"))), kExitUnsafeServer);
  EXPECT_EQ(status_for(std::make_exception_ptr(ProtocolError("bad reply"))), kExitInternal);
  EXPECT_EQ(status_for(std::make_exception_ptr(ScriptError("ERR x"))), kExitInternal);
  EXPECT_EQ(status_for(std::make_exception_ptr(std::logic_error("x"))), kExitInternal);
}

TEST(ExitStatusTest, StatusesAreDistinctAndOutsideTheConflictDefault) {
  const std::set<int> statuses = {kExitDefaultConflict, kExitUsage,         kExitWrongKind,
                                  kExitUnavailable,     kExitInternal,      kExitLockLost,
                                  kExitUnsafeServer,    kExitCannotExecute, kExitCommandNotFound};
  EXPECT_EQ(statuses.size(), 9u);
  for (int status : statuses) EXPECT_LT(status, kExitSignalBase + 1);
}

TEST(ExitStatusTest, TableDocumentsEveryStatus) {
  const std::string table = exit_status_table();
  for (int status : {kExitDefaultConflict, kExitUsage, kExitWrongKind, kExitUnavailable, kExitInternal, kExitLockLost,
                     kExitUnsafeServer, kExitCannotExecute, kExitCommandNotFound, kExitSignalBase}) {
    EXPECT_NE(table.find(std::to_string(status)), std::string::npos) << status;
  }
}

int wait_status_of_child(void (*body)()) {
  const pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(99);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(ExitStatusTest, WaitStatusesAsAShellReportsThem) {
  EXPECT_EQ(exit_status_of_wait_status(wait_status_of_child([] { _exit(0); })), 0);
  EXPECT_EQ(exit_status_of_wait_status(wait_status_of_child([] { _exit(7); })), 7);
  EXPECT_EQ(exit_status_of_wait_status(wait_status_of_child([] { raise(SIGKILL); })), 128 + SIGKILL);
  EXPECT_EQ(exit_status_of_wait_status(wait_status_of_child([] {
              signal(SIGTERM, SIG_DFL);
              raise(SIGTERM);
            })),
            128 + SIGTERM);
}

}  // namespace
}  // namespace turnstile::cli
