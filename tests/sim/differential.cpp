#include "differential.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "fake_redis/keyspace.h"
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
//
// Every command goes out with a PING behind it: if what follows its reply
// is not PONG, the stream has lost step with the commands (a reply with a
// CRLF inside, as 7.2's script errors, reads as a shorter reply followed by
// garbage), and the connection is replaced, so one bad reply cannot fail
// every case after it. A transport failure replaces it as well, then
// throws.
class RealRedis {
 public:
  static RealRedis& instance() {
    static RealRedis real;
    return real;
  }

  Reply run(const std::vector<std::string>& argv) {
    if (context_ == nullptr) connect();
    std::vector<const char*> pointers;
    std::vector<std::size_t> lengths;
    for (const std::string& arg : argv) {
      pointers.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    redisAppendCommandArgv(context_, static_cast<int>(argv.size()), pointers.data(), lengths.data());
    redisAppendCommand(context_, "PING");
    std::optional<Reply> reply = next_reply();
    if (!reply) {
      const std::string error = context_->errstr;
      disconnect();
      throw std::runtime_error("redis command failed: " + error);
    }
    const std::optional<Reply> pong = next_reply();
    if (pong != Reply::status("PONG")) disconnect();
    return *reply;
  }

  // The real server's profile, from its INFO server; fails the test binary
  // clearly if the fake does not model that release.
  const sim::ServerProfile& profile() {
    if (profile_ == nullptr) profile_ = &profile_of_server();
    return *profile_;
  }

 private:
  RealRedis() = default;
  ~RealRedis() { disconnect(); }

  void connect() {
    context_ = redisConnectWithTimeout(server_.host().c_str(), server_.port(), kRealServerTimeout);
    if (context_ == nullptr || context_->err != 0) {
      disconnect();
      throw std::runtime_error("cannot connect to the differential redis-server");
    }
    redisSetTimeout(context_, kRealServerTimeout);
  }

  void disconnect() {
    if (context_ != nullptr) redisFree(context_);
    context_ = nullptr;
  }

  std::optional<Reply> next_reply() {
    void* raw = nullptr;
    if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) return std::nullopt;
    auto* reply = static_cast<redisReply*>(raw);
    Reply converted = from_hiredis(reply);
    freeReplyObject(reply);
    return converted;
  }

  const sim::ServerProfile& profile_of_server() {
    const Reply info = run({"INFO", "server"});
    if (!info.is_bulk()) throw std::runtime_error("INFO server answered " + info.to_string());
    auto field = [&info](std::string_view name) {
      std::istringstream lines(info.as_string());
      const std::string prefix = std::string(name) + ":";
      std::string line;
      while (std::getline(lines, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.starts_with(prefix)) return line.substr(prefix.size());
      }
      return std::string();
    };
    const std::string version = field("redis_version");
    const std::string name = field("server_name");
    const std::string server_version = field("valkey_version");
    const std::optional<sim::ServerRelease> release = sim::ServerProfile::find(version, name, server_version);
    if (!release) {
      std::string known;
      for (const sim::ServerProfile& profile : sim::ServerProfile::all())
        known += std::string(known.empty() ? "" : ", ") + std::string(profile.label);
      throw std::runtime_error("the fake has no profile for the redis-server on PATH (redis_version " + version +
                               (name.empty() ? "" : ", server_name " + name + " " + server_version) + "); it models " +
                               known);
    }
    return sim::ServerProfile::of(*release);
  }

  RedisServer server_;
  redisContext* context_ = nullptr;
  const sim::ServerProfile* profile_ = nullptr;
};

// `reply` as a RESP2 client reads it: a status or error line ends at its
// first CRLF (7.2 sends a script's error message as it is, so one holding
// a CRLF reaches the client cut there; RealRedis then reconnects).
Reply as_read_over_resp2(Reply reply) {
  constexpr std::string_view kLineEnd = "\r\n";
  if (reply.is_error() || reply.is_status()) {
    const std::string& text = reply.as_string();
    const std::size_t end = text.find(kLineEnd);
    if (end == std::string::npos) return reply;
    return reply.is_error() ? Reply::error(text.substr(0, end)) : Reply::status(text.substr(0, end));
  }
  if (!reply.is_array()) return reply;
  std::vector<Reply> elements;
  for (const Reply& element : reply.as_array()) elements.push_back(as_read_over_resp2(element));
  return Reply::array(std::move(elements));
}

std::int64_t real_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::vector<std::string> eval_argv(std::string_view source, const std::vector<std::string>& keys,
                                   const std::vector<std::string>& args) {
  std::vector<std::string> argv{"EVAL", std::string(source), std::to_string(keys.size())};
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
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
  fake_server_ = std::make_unique<sim::Server>(*clock_, sim::ServerOptions(), redis.profile());
  fake_session_ = fake_server_->connect();
}

void DifferentialTest::TearDown() {
  fake_session_.reset();
  fake_server_.reset();
}

const sim::ServerProfile& DifferentialTest::server_profile() { return RealRedis::instance().profile(); }

Reply DifferentialTest::real(const std::vector<std::string>& argv) { return RealRedis::instance().run(argv); }

Reply DifferentialTest::fake(const std::vector<std::string>& argv) {
  return as_read_over_resp2(fake_server_->execute(*fake_session_, argv));
}

Reply DifferentialTest::expect_same(const std::vector<std::string>& argv) {
  Reply real_reply = real(argv);
  Reply fake_reply = fake(argv);
  std::string why;
  EXPECT_TRUE(replies_match(argv, real_reply, fake_reply, &why)) << describe(argv) << ": " << why;
  return fake_reply;
}

sim::VirtualClock& DifferentialTest::clock() { return *clock_; }

namespace {

// A hash's field/value pairs, or a zset's member/score pairs, sorted.
std::vector<std::pair<std::string, std::string>> sorted_pairs(const Reply& reply) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::vector<Reply>& items = reply.as_array();
  for (std::size_t i = 0; i + 1 < items.size(); i += 2)
    out.emplace_back(items[i].as_string(), items[i + 1].as_string());
  std::sort(out.begin(), out.end());
  return out;
}

bool scores_match(const Reply& real_zset, const Reply& fake_zset) {
  const auto real_pairs = sorted_pairs(real_zset);
  const auto fake_pairs = sorted_pairs(fake_zset);
  if (real_pairs.size() != fake_pairs.size()) return false;
  for (std::size_t i = 0; i < real_pairs.size(); ++i) {
    if (real_pairs[i].first != fake_pairs[i].first) return false;
    const double difference = std::stod(real_pairs[i].second) - std::stod(fake_pairs[i].second);
    if (difference > kTtlToleranceMs || difference < -kTtlToleranceMs) return false;
  }
  return true;
}

}  // namespace

std::string DifferentialTest::run_on_both(const std::vector<std::string>& argv) {
  const Reply on_real = real(argv);
  const Reply on_fake = fake(argv);
  if (on_real == on_fake) return "";
  return describe(argv) + ": real " + on_real.to_string() + ", fake " + on_fake.to_string();
}

std::vector<std::string> DifferentialTest::sorted_keys(const Reply& reply) {
  std::vector<std::string> keys;
  for (const Reply& key : reply.as_array()) keys.push_back(key.as_string());
  std::sort(keys.begin(), keys.end());
  return keys;
}

bool DifferentialTest::script_replies_match(const Reply& real_reply, const Reply& fake_reply) {
  if (real_reply.is_integer() && fake_reply.is_integer() && real_reply.as_integer() > 1000) {
    return std::llabs(real_reply.as_integer() - fake_reply.as_integer()) <= kTtlToleranceMs;
  }
  if (real_reply.is_array() && fake_reply.is_array() && real_reply.as_array().size() == fake_reply.as_array().size()) {
    for (std::size_t i = 0; i < real_reply.as_array().size(); ++i) {
      if (!script_replies_match(real_reply.as_array()[i], fake_reply.as_array()[i])) return false;
    }
    return true;
  }
  return real_reply == fake_reply;
}

std::vector<std::string> DifferentialTest::keyspace_differences() {
  std::vector<std::string> differences;
  const std::vector<std::string> real_keys = sorted_keys(real({"KEYS", "*"}));
  std::vector<std::string> fake_keys = fake_server().keyspace().keys();  // the fake has no KEYS
  std::sort(fake_keys.begin(), fake_keys.end());
  if (real_keys != fake_keys) {
    differences.push_back("keys: real " + describe(real_keys) + ", fake " + describe(fake_keys));
    return differences;
  }
  for (const std::string& key : real_keys) {
    const std::vector<std::string> type{"TYPE", key};
    const Reply kind = real(type);
    if (kind != fake(type)) {
      differences.push_back("TYPE " + key);
      continue;
    }
    const std::string& name = kind.as_string();
    std::vector<std::string> read;
    if (name == "string") read = {"GET", key};
    if (name == "hash") read = {"HGETALL", key};
    if (name == "list") read = {"LRANGE", key, "0", "-1"};
    if (name == "zset") read = {"ZRANGE", key, "0", "-1", "WITHSCORES"};
    if (!read.empty()) {
      const Reply real_value = real(read);
      const Reply fake_value = fake(read);
      const bool same = name == "hash"   ? sorted_pairs(real_value) == sorted_pairs(fake_value)
                        : name == "zset" ? scores_match(real_value, fake_value)
                                         : real_value == fake_value;
      if (!same) {
        differences.push_back(describe(read) + ": real " + real_value.to_string() + ", fake " + fake_value.to_string());
      }
    }
    const std::vector<std::string> pttl{"PTTL", key};
    std::string why;
    if (!replies_match(pttl, real(pttl), fake(pttl), &why)) differences.push_back(describe(pttl) + ": " + why);
  }
  return differences;
}

}  // namespace turnstile::testing
