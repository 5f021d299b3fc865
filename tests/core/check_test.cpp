// TURNSTILE_CHECK stays on in release builds: this file compiles as one
// (NDEBUG defined before anything is included), and a failed check still
// aborts, naming the file, the line, the expression and the message.
#ifndef NDEBUG
#define NDEBUG 1
#endif

#include "core/check.h"

#include <cassert>

#include <gtest/gtest.h>

namespace turnstile {
namespace {

int checked_count(int count) {
  TURNSTILE_CHECK(count >= 0);
  return count;
}

TEST(CheckDeathTest, PassingChecksDoNothing) {
  int evaluated = 0;
  TURNSTILE_CHECK(++evaluated == 1);
  TURNSTILE_CHECK_MSG(++evaluated == 2, "evaluated once per check");
  EXPECT_EQ(evaluated, 2);
  EXPECT_EQ(checked_count(3), 3);
}

TEST(CheckDeathTest, AssertIsGoneInThisBuild) {
  // The control: with NDEBUG, assert does not even evaluate its expression.
  int evaluated = 0;
  assert(++evaluated == 0);
  EXPECT_EQ(evaluated, 0);
}

TEST(CheckDeathTest, AFailedCheckAbortsNamingTheExpression) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(checked_count(-1), "check_test\\.cpp:[0-9]+: invariant failed: count >= 0");
}

TEST(CheckDeathTest, AFailedCheckAbortsWithItsMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const int open_connections = 0;
  EXPECT_DEATH(TURNSTILE_CHECK_MSG(open_connections > 0, "a connection comes back to the pool it left"),
               "invariant failed: open_connections > 0 \\(a connection comes back to the pool it left\\)");
}

}  // namespace
}  // namespace turnstile
