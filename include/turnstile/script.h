// turnstile/script.h
//
// A Lua script as turnstile ships it. Every script lives once, as a file in
// lua/; the build embeds each file into the library together with its SHA-1,
// so backends can call EVALSHA without hashing at run time. The fake Redis
// runs the very same text as a real redis-server.

#ifndef TURNSTILE_SCRIPT_H_
#define TURNSTILE_SCRIPT_H_

#include <span>
#include <string_view>

#include "turnstile/export.h"

namespace turnstile {

struct TURNSTILE_EXPORT Script {
  std::string_view name;    // file name without ".lua", e.g. "reentrant_lock_acquire"
  std::string_view source;  // the file's bytes
  std::string_view sha1;    // 40 lower-case hex digits of SHA-1(source)
};

// All embedded scripts, ordered by name.
TURNSTILE_EXPORT std::span<const Script* const> embedded_scripts();

// The embedded script called `name`, or nullptr.
TURNSTILE_EXPORT const Script* find_embedded_script(std::string_view name);

}  // namespace turnstile

#endif  // TURNSTILE_SCRIPT_H_
