#include "differential.h"

#include <hiredis/hiredis.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "hiredis_reply.h"
#include "redis_server.h"

namespace turnstile::testing {
namespace {

constexpr timeval kRealServerTimeout{10, 0};

bool is_command(const std::vector<std::string>& argv, std::string_view lower_name) {
  if (argv.empty() || argv[0].size() != lower_name.size()) return false;
  for (std::size_t i = 0; i < lower_name.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(argv[0][i])) != lower_name[i]) return false;
  }
  return true;
}

// The real server and one connection to it, for the whole test binary.
class RealRedis {
 public:
  static RealRedis& instance() {
    static RealRedis real;
    return real;
  }

  Reply run(const std::vector<std::string>& argv) { return hiredis_command(context_, argv); }

 private:
  RealRedis() {
    context_ = redisConnectWithTimeout(server_.host().c_str(), server_.port(), kRealServerTimeout);
    if (context_ == nullptr || context_->err != 0) {
      throw std::runtime_error("cannot connect to the differential redis-server");
    }
    redisSetTimeout(context_, kRealServerTimeout);
  }
  ~RealRedis() { redisFree(context_); }

  RedisServer server_;
  redisContext* context_ = nullptr;
};

std::int64_t real_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int count_from_environment(const char* name, int fallback) {
  constexpr long kMaxCount = 100'000'000;
  const char* configured = std::getenv(name);
  if (configured == nullptr) return fallback;
  char* end = nullptr;
  const long count = std::strtol(configured, &end, 10);
  if (end == configured || *end != '\0' || count <= 0 || count > kMaxCount) {
    ADD_FAILURE() << name << "=" << configured << " is not a count from 1 to " << kMaxCount;
    return fallback;
  }
  return static_cast<int>(count);
}

std::string describe(const std::vector<std::string>& argv) {
  std::string text;
  for (const std::string& arg : argv) {
    if (!text.empty()) text += ' ';
    text += '"';
    for (unsigned char c : arg) {
      if (c == '"' || c == '\\') {
        text += '\\';
        text += static_cast<char>(c);
      } else if (c < 0x20 || c >= 0x7f) {
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
        text += escaped;
      } else {
        text += static_cast<char>(c);
      }
    }
    text += '"';
  }
  return text;
}

bool replies_match(const std::vector<std::string>& argv, const Reply& real, const Reply& fake, std::string* why) {
  auto mismatch = [&](std::string_view reason) {
    if (why != nullptr) {
      *why = std::string(reason) + ": real " + real.to_string() + ", fake " + fake.to_string();
    }
    return false;
  };
  const bool ttl = is_command(argv, "ttl");
  if ((ttl || is_command(argv, "pttl")) && real.is_integer() && fake.is_integer()) {
    std::int64_t real_left = real.as_integer();
    std::int64_t fake_left = fake.as_integer();
    if (real_left < 0 || fake_left < 0) {
      return real_left == fake_left || mismatch("TTL sign class differs");
    }
    std::int64_t tolerance = ttl ? kTtlToleranceMs / 1000 : kTtlToleranceMs;
    return std::llabs(real_left - fake_left) <= tolerance || mismatch("TTL beyond tolerance");
  }
  if (is_command(argv, "time") && real.is_array() && fake.is_array()) {
    return (real.as_array().size() == 2 && fake.as_array().size() == 2) || mismatch("TIME shape");
  }
  return real == fake || mismatch("replies differ");
}

void DifferentialTest::SetUp() {
  RealRedis& redis = RealRedis::instance();
  ASSERT_EQ(redis.run({"FLUSHALL"}), Reply::status("OK"));
  ASSERT_EQ(redis.run({"SCRIPT", "FLUSH"}), Reply::status("OK"));
  clock_ = std::make_unique<sim::VirtualClock>(real_unix_ms());
  fake_server_ = std::make_unique<sim::Server>(*clock_);
  fake_session_ = fake_server_->connect();
}

void DifferentialTest::TearDown() {
  fake_session_.reset();
  fake_server_.reset();
}

Reply DifferentialTest::real(const std::vector<std::string>& argv) { return RealRedis::instance().run(argv); }

Reply DifferentialTest::fake(const std::vector<std::string>& argv) {
  return fake_server_->execute(*fake_session_, argv);
}

Reply DifferentialTest::expect_same(const std::vector<std::string>& argv) {
  Reply real_reply = real(argv);
  Reply fake_reply = fake(argv);
  std::string why;
  EXPECT_TRUE(replies_match(argv, real_reply, fake_reply, &why)) << describe(argv) << ": " << why;
  return fake_reply;
}

sim::VirtualClock& DifferentialTest::clock() { return *clock_; }

}  // namespace turnstile::testing
