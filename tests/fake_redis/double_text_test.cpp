// How each release prints doubles: Redis 7.2's Grisu2 texts (checked
// against redis-server 7.2.6), and that they read back as the same double.

#include "fake_redis/double_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>

namespace turnstile::testing {
namespace {

const sim::ServerProfile& kRedis70 = sim::ServerProfile::of(sim::ServerRelease::redis_7_0);
const sim::ServerProfile& kRedis72 = sim::ServerProfile::of(sim::ServerRelease::redis_7_2);

TEST(DoubleTextTest, GrisuTextsAsRedis72PrintsThem) {
  EXPECT_EQ(sim::grisu_text(0.1), "0.1");
  EXPECT_EQ(sim::grisu_text(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(sim::grisu_text(1e23), "99999999999999990000000");  // Grisu2: not the shortest
  EXPECT_EQ(sim::grisu_text(-2.5e-7), "-2.5e-7");
  EXPECT_EQ(sim::grisu_text(0.000025), "0.000025");
  EXPECT_EQ(sim::grisu_text(1e-320), "1e-320");
  EXPECT_EQ(sim::grisu_text(1e17), "1e+17");
  EXPECT_EQ(sim::grisu_text(-0.0), "-0");
  EXPECT_EQ(sim::grisu_text(std::numeric_limits<double>::infinity()), "inf");
}

TEST(DoubleTextTest, GrisuTextsReadBackAsTheSameDouble) {
  std::mt19937_64 random(20260101);
  for (int i = 0; i < 20'000; ++i) {
    const std::uint64_t bits = random();
    double value = 0;
    std::memcpy(&value, &bits, sizeof value);
    if (!std::isfinite(value)) continue;
    const std::string text = sim::grisu_text(value);
    ASSERT_EQ(std::strtod(text.c_str(), nullptr), value) << text;
  }
}

TEST(DoubleTextTest, RepliesAndArgumentsPerRelease) {
  const double nan = std::nan("");
  EXPECT_EQ(sim::double_reply_text(kRedis72, 1e17), "100000000000000000");
  EXPECT_EQ(sim::double_reply_text(kRedis70, 1e17), "1e+17");
  EXPECT_EQ(sim::double_reply_text(kRedis72, 0.1), "0.1");
  EXPECT_EQ(sim::double_reply_text(kRedis70, 0.1), "0.10000000000000001");
  EXPECT_EQ(sim::double_reply_text(kRedis72, -nan), "nan");
  EXPECT_EQ(sim::double_reply_text(kRedis72, -0.0), "-0");
  EXPECT_EQ(sim::double_reply_text(kRedis72, -std::numeric_limits<double>::infinity()), "-inf");
  std::string text;
  sim::assign_number_argument(kRedis72, -0.0, text);
  EXPECT_EQ(text, "0");
  sim::assign_number_argument(kRedis72, 1e19, text);
  EXPECT_EQ(text, "1e+19");  // beyond 2^62: Grisu2
  sim::assign_number_argument(kRedis70, 1.0 / 3, text);
  EXPECT_EQ(text, "0.33333333333333331");
}

}  // namespace
}  // namespace turnstile::testing
