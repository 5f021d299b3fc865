// Fuzz target: the fake Redis's command layer (src/fake_redis/server.cpp, the
// command table and every cmd_<family>.cpp, the keyspace).
//
// Input: text, one command per line, arguments separated by single spaces
// (so "SET k v", and "GET  k" has an empty argument); any other byte is
// part of an argument. Two kinds of lines are not commands:
//   @<ms>      advances the virtual clock by up to 999999999 ms (expiry)
//   !<command> runs the command as the second session (pub/sub)
// Properties: Server::execute() never throws, and every reply is one a
// real server could send (check_reply); ASan and UBSan watch the rest.

#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fake_redis.h"
#include "fuzz_check.h"

namespace {

constexpr std::size_t kMaxAdvanceDigits = 9;

std::vector<std::string> split_arguments(std::string_view line) {
  std::vector<std::string> argv;
  for (;;) {
    const std::size_t space = line.find(' ');
    argv.emplace_back(line.substr(0, space));
    if (space == std::string_view::npos) return argv;
    line.remove_prefix(space + 1);
  }
}

void run_line(turnstile::fuzz::FakeRedis& redis, std::string_view line) {
  if (line.starts_with('@')) {
    const std::string_view digits = line.substr(1, kMaxAdvanceDigits);
    std::int64_t ms = 0;
    std::from_chars(digits.data(), digits.data() + digits.size(), ms);
    if (ms > 0) redis.clock.advance_by(std::chrono::milliseconds(ms));
    return;
  }
  turnstile::sim::Session* session = redis.first.get();
  if (line.starts_with('!')) {
    session = redis.second.get();
    line.remove_prefix(1);
  }
  turnstile::fuzz::check_reply(redis.server.execute(*session, split_arguments(line)));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  turnstile::fuzz::FakeRedis redis;
  std::string_view input = turnstile::fuzz::as_text(data, size);
  while (!input.empty()) {
    const std::size_t newline = input.find('\n');
    run_line(redis, input.substr(0, newline));
    input = newline == std::string_view::npos ? std::string_view() : input.substr(newline + 1);
  }
  return 0;
}
