// turnstile::version(): the version this libturnstile was built as, from
// the generated turnstile/version.h (the project version in meson.build).

#include <turnstile/version.h>

namespace turnstile {

const char* version() noexcept { return TURNSTILE_VERSION_STRING; }

}  // namespace turnstile
