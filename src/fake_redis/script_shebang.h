// fake_redis/script_shebang.h
//
// A script's first line may be a shebang, "#!lua flags=no-writes,...", as
// Redis 7 reads it (eval.c, evalExtractShebangFlags): the engine must be
// lua, the only option is flags=, and each flag must be one Redis knows.
// Of the flags the fake acts on no-writes alone (a read-only script); the
// others are accepted and ignored. The shebang line is not Lua: the engine
// compiles the source after it, keeping its newline so line numbers match.

#ifndef TURNSTILE_FAKE_REDIS_SCRIPT_SHEBANG_H_
#define TURNSTILE_FAKE_REDIS_SCRIPT_SHEBANG_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace turnstile::sim {

struct ParsedShebang {
  bool ok = true;
  std::string error;       // Redis's text when !ok
  std::size_t length = 0;  // bytes before the newline that ends the shebang
  bool no_writes = false;
};

// evalExtractShebangFlags: "#!lua [flags=a,b]" on the first line. A source
// without a shebang parses as ok, length 0, no flags.
ParsedShebang parse_shebang(std::string_view source);

}  // namespace turnstile::sim

#endif  // TURNSTILE_FAKE_REDIS_SCRIPT_SHEBANG_H_
