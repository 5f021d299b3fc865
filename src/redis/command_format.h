// redis/command_format.h
//
// Writes a command in RESP, an array of bulk strings: the request side of
// what reply_conversion.h reads. Pure data: it knows nothing about
// connections or sockets. hiredis's own formatter (redisFormatCommandArgv)
// grows an sds string through sdscatfmt, three calls per argument; on an
// uncontended lock + unlock that was a third of the client's instructions
// (callgrind, lock_benchmark). This one sizes the buffer once and writes each
// length with std::to_chars; the bytes are the same (tests/redis/
// command_format_test.cpp compares them with hiredis's).

#ifndef TURNSTILE_REDIS_COMMAND_FORMAT_H_
#define TURNSTILE_REDIS_COMMAND_FORMAT_H_

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace turnstile::redis {

// Appends `argv` to `out` as "*<count>\r\n", then "$<length>\r\n<bytes>\r\n"
// per argument. Binary-safe (arguments may hold NUL, CR and LF).
void append_command(std::string& out, const std::vector<std::string>& argv);

// The same for a command given in parts, written as one without copying
// them into an argv first: the words of `head`, then the arguments of each
// of `tails` in order (EVALSHA <sha> <numkeys>, then the keys, then the
// arguments).
void append_command(std::string& out, std::initializer_list<std::string_view> head,
                    std::initializer_list<const std::vector<std::string>*> tails);

}  // namespace turnstile::redis

#endif  // TURNSTILE_REDIS_COMMAND_FORMAT_H_
