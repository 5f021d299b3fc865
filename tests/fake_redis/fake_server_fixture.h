// fake_redis/fake_server_fixture.h
//
// A fake sim::Server on its own VirtualClock with one session, for the unit
// tests of the fake Redis (Redis 7.0's, or the release a test names).

#ifndef TURNSTILE_TESTS_FAKE_REDIS_FAKE_SERVER_FIXTURE_H_
#define TURNSTILE_TESTS_FAKE_REDIS_FAKE_SERVER_FIXTURE_H_

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "fake_redis/keyspace.h"
#include "fake_redis/server.h"
#include "fake_redis/virtual_clock.h"

namespace turnstile::testing {

class FakeServerTest : public ::testing::Test {
 protected:
  FakeServerTest() = default;
  // A server speaking another release than 7.0 (server_profile.h).
  explicit FakeServerTest(const sim::ServerProfile& profile) : server_(clock_, sim::ServerOptions(), profile) {}

  Reply run(const std::vector<std::string>& argv) { return server_.execute(*session_, argv); }
  void advance_ms(std::int64_t ms) { clock_.advance_by(std::chrono::milliseconds(ms)); }

  static Reply ok() { return Reply::status("OK"); }
  static Reply integer(std::int64_t value) { return Reply::integer(value); }
  static Reply bulk(std::string value) { return Reply::bulk(std::move(value)); }
  static Reply error(std::string text) { return Reply::error(std::move(text)); }
  static Reply bulks(const std::vector<std::string>& values) {
    std::vector<Reply> elements;
    for (const std::string& value : values) elements.push_back(Reply::bulk(value));
    return Reply::array(std::move(elements));
  }

  sim::VirtualClock clock_;
  sim::Server server_{clock_};
  std::unique_ptr<sim::Session> session_ = server_.connect();
};

inline const std::string kWrongType = "WRONGTYPE Operation against a key holding the wrong kind of value";

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_FAKE_REDIS_FAKE_SERVER_FIXTURE_H_
