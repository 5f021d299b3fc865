// The RESP writer (redis/command_format.h) against hiredis's own formatter:
// the same bytes for every shape of command a client sends, binary
// arguments included.

#include "redis/command_format.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <string>
#include <vector>

namespace turnstile::redis {
namespace {

std::string formatted_by_hiredis(const std::vector<std::string>& argv) {
  std::vector<const char*> pointers;
  std::vector<std::size_t> lengths;
  for (const std::string& arg : argv) {
    pointers.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  char* formatted = nullptr;
  const int length = redisFormatCommandArgv(&formatted, static_cast<int>(argv.size()), pointers.data(), lengths.data());
  EXPECT_GE(length, 0);
  std::string bytes(formatted, static_cast<std::size_t>(length));
  redisFreeCommand(formatted);
  return bytes;
}

std::string formatted(const std::vector<std::string>& argv) {
  std::string out;
  append_command(out, argv);
  return out;
}

TEST(CommandFormatTest, WritesACommandAsAnArrayOfBulkStrings) {
  EXPECT_EQ(formatted({"PING"}), "*1\r\n$4\r\nPING\r\n");
  EXPECT_EQ(formatted({"SET", "k", ""}), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
}

TEST(CommandFormatTest, WritesTheBytesHiredisWrites) {
  const std::string binary("a\0b\r\nc", 6);
  const std::vector<std::vector<std::string>> commands = {
      {"PING"},
      {"EVALSHA", std::string(40, 'f'), "3", "lock", "{lock}:x", "", "30000", "owner:1", "-1"},
      {"SET", binary, std::string(100'000, 'v'), "PX", "1"},
      std::vector<std::string>(40, "many"),  // more arguments than fit a small buffer
      {"", "", ""},
  };
  for (const std::vector<std::string>& argv : commands) {
    EXPECT_EQ(formatted(argv), formatted_by_hiredis(argv)) << argv[0] << " (" << argv.size() << " arguments)";
  }
}

TEST(CommandFormatTest, WritesACommandGivenInPartsAsItsArgv) {
  const std::vector<std::string> keys{"lock", "{lock}:x", ""};
  const std::vector<std::string> args(12, "argument");
  const std::vector<std::string> none;
  std::vector<std::string> argv{"EVALSHA", std::string(40, 'f'), "3"};
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  std::string parts = "*1\r\n$4\r\nPING\r\n";
  append_command(parts, {"EVALSHA", std::string(40, 'f'), "3"}, {&keys, &none, &args});
  EXPECT_EQ(parts, "*1\r\n$4\r\nPING\r\n" + formatted_by_hiredis(argv));
  std::string empty_head;
  append_command(empty_head, {}, {&argv});
  EXPECT_EQ(empty_head, formatted(argv));
}

TEST(CommandFormatTest, AppendsAfterWhatTheBufferHolds) {
  std::string out = "*1\r\n$4\r\nPING\r\n";
  append_command(out, {"ECHO", "x"});
  EXPECT_EQ(out, "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$1\r\nx\r\n");
}

}  // namespace
}  // namespace turnstile::redis
