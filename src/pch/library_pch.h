// src/pch/library_pch.h
//
// Precompiled once for each library (Meson's cpp_pch in src/meson.build:
// libturnstile, libturnstile_sim; each source still includes what it
// uses). The standard headers and the public API are what every source
// of the libraries parses first: about half of a source's compile time at
// -O2, and the same again in each build CI makes (plain, ASan + UBSan,
// ThreadSanitizer, the packages). Only headers that every source may see
// first: nothing here reads a macro a source defines before its own
// includes (src/sim/scheduler.cpp's BOOST_USE_UCONTEXT: no Boost here).

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "turnstile/client.h"
