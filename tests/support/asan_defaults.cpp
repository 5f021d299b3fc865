// support/asan_defaults.cpp
//
// AddressSanitizer's defaults for every test program under ASan (.ci/run's
// ASan + UBSan build). Compiled into each test executable rather than into
// the support library: the ASan runtime looks the function up, nothing
// else names it, so an archive member would never be linked. ASAN_OPTIONS
// still overrides what it says.
//
// clear_shadow_mmap_threshold: ASan clears the shadow of a region whose
// shadow is 64 KB or more (512 KB of memory; one simulated fiber's stack
// is 1 MB under ASan, src/sim/scheduler.h) by handing its pages to the
// kernel, which faults them in again at the next use. Every fiber a
// simulated world spawned paid for that twice: the kernel's share of the
// ASan sim suite's CPU was 43 %, and one belief test took 10.1 s where it
// takes 5.5 s with the shadow cleared by memset (and the stacks reused).

#if defined(__SANITIZE_ADDRESS__)
#define TURNSTILE_TESTS_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TURNSTILE_TESTS_UNDER_ASAN 1
#endif
#endif

#if defined(TURNSTILE_TESTS_UNDER_ASAN)
extern "C" const char* __asan_default_options();
extern "C" const char* __asan_default_options() { return "clear_shadow_mmap_threshold=4194304"; }
#endif
