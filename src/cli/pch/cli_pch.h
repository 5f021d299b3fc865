// src/cli/pch/cli_pch.h
//
// Precompiled once for every source of the `turnstile` command (Meson's
// cpp_pch; each source still includes what it uses). CLI11 and
// nlohmann/json are header-only and were most of the command's compile
// time: about 30 s per source that included them, on 2 cores.

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
