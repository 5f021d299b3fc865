#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "fake_redis/command_args.h"
#include "fake_redis/double_text.h"

namespace turnstile::testing {
namespace {

const sim::ServerProfile& kRedis70 = sim::ServerProfile::of(sim::ServerRelease::redis_7_0);

std::string printf_score(double score) {
  char buffer[64];
  const int length = std::snprintf(buffer, sizeof buffer, "%.17g", score);
  return std::string(buffer, static_cast<std::size_t>(length));
}

// Every double a score can be prints as Redis 7.0's "%.17g".
TEST(CommandArgsTest, ScoresPrintAsPrintfDoes) {
  std::vector<double> scores = {0.0,
                                -0.0,
                                1.0,
                                -1.0,
                                0.1,
                                1.5,
                                100.0,
                                1e17,
                                1e-300,
                                5e-324,
                                1e300,
                                1e15,
                                1e16,
                                123456789012345678.0,
                                -2.5e-7,
                                0.3,
                                2.0 / 3,
                                1e21,
                                1e-5,
                                1e-4,
                                std::numeric_limits<double>::max(),
                                1700000000123.0,
                                -1700000000123.0};
  std::uint64_t bits = 0x9e3779b97f4a7c15ULL;
  for (int i = 0; i < 20'000; ++i) {
    bits ^= bits << 13;
    bits ^= bits >> 7;
    bits ^= bits << 17;
    double value = 0;
    std::memcpy(&value, &bits, sizeof value);
    if (std::isfinite(value)) scores.push_back(value);
    scores.push_back(static_cast<double>(static_cast<std::int64_t>(bits % 100'000'000'000'000'000ULL)) / 1000);
  }
  for (const double score : scores) ASSERT_EQ(sim::double_reply_text(kRedis70, score), printf_score(score)) << score;
  // redis.call's number arguments: the same text, infinities included.
  scores.push_back(std::numeric_limits<double>::infinity());
  scores.push_back(-std::numeric_limits<double>::infinity());
  std::string text = "reused";
  for (const double score : scores) {
    sim::assign_g17(score, text);
    ASSERT_EQ(text, printf_score(score)) << score;
  }
  EXPECT_EQ(sim::double_reply_text(kRedis70, std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(sim::double_reply_text(kRedis70, -std::numeric_limits<double>::infinity()), "-inf");
}

// Plain integers read as strtod reads them, sign of zero included.
TEST(CommandArgsTest, IntegerScoresReadAsStrtodDoes) {
  const std::vector<std::string> texts = {"0",
                                          "-0",
                                          "7",
                                          "007",
                                          "-007",
                                          "123456789012345",
                                          "-999999999999999",
                                          "1234567890123456",
                                          "99999999999999999999",
                                          "1700000000123",
                                          "-1"};
  for (const std::string& text : texts) {
    const std::optional<double> parsed = sim::parse_float(text);
    ASSERT_TRUE(parsed.has_value()) << text;
    const double expected = std::strtod(text.c_str(), nullptr);
    EXPECT_EQ(*parsed, expected) << text;
    EXPECT_EQ(std::signbit(*parsed), std::signbit(expected)) << text;
  }
  for (const char* bad : {"-", "", " 1", "1 ", "1x", "--1", "+-1", "nan"}) EXPECT_FALSE(sim::parse_float(bad)) << bad;
  EXPECT_EQ(sim::parse_float("+1"), 1.0);
}

}  // namespace
}  // namespace turnstile::testing
