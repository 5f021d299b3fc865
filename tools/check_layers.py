#!/usr/bin/env python3
"""Who may include what: the two libraries' layering, checked by the build.

  check_layers.py SOURCE_ROOT [--turnstile-headers H...] [--sim-headers H...]

Reads every `#include "..."` (and `#include <...>` that names a file of the
repository) of src/, include/, demo/ and benchmarks/, resolves it as the
compiler would (the including file's directory, then include/, then src/),
and fails naming file:line for each include that crosses a layer:

  libturnstile      src/core, src/runtime, src/redis, src/locks (and the
                    generated lua_scripts.h): its own headers and
                    include/turnstile/*.h; nothing of the simulator.
  libturnstile_sim  src/fake_redis, src/sim, src/scenarios: its own headers,
                    include/turnstile/sim/*.h and include/turnstile/*.h;
                    none of libturnstile's private headers.
  public headers    include/turnstile/**: public headers only (they are
                    installed); libturnstile's never include the simulator's.
  the CLI           src/cli: its own headers and both public APIs.
  demo, benchmarks  both public APIs, their own files, and (benchmarks)
                    tests/support; INTERNAL_PROGRAMS below may use private
                    headers, as tests do.

Every layer but the public headers may also include SHARED_PRIVATE (below):
header-only internals that link to nothing, such as src/core/check.h.

tests/ and fuzz/ test internals on purpose and are not checked.

With --turnstile-headers / --sim-headers (the lists src/meson.build
installs), also fails when a public header is not installed, or installed
with the wrong library.

Exit status 0 when every include is allowed, 1 otherwise.
"""

import argparse
import os
import re
import sys

# Programs that measure internals by nature, declared with
# turnstile_sim_internal_dep in benchmarks/meson.build (see the comment
# there): they may include private headers, as tests do.
INTERNAL_PROGRAMS = {
    "benchmarks/fake_benchmark.cpp": "the fake Redis's Server::execute and keyspace",
    "benchmarks/sim_benchmark.cpp": "the simulation's Scheduler",
}


LIBTURNSTILE = "libturnstile"
LIBTURNSTILE_SIM = "libturnstile_sim"
TEST_SUPPORT = "tests/support"

# Directories under src/ and the layer each belongs to.
SRC_LAYERS = {
    "core": LIBTURNSTILE,
    "runtime": LIBTURNSTILE,
    "redis": LIBTURNSTILE,
    "locks": LIBTURNSTILE,
    "fake_redis": LIBTURNSTILE_SIM,
    "sim": LIBTURNSTILE_SIM,
    "scenarios": LIBTURNSTILE_SIM,
    "cli": "the CLI",
}

# Generated into the build directory with libturnstile (lua/meson.build).
GENERATED_PRIVATE = {"lua_scripts.h": LIBTURNSTILE}

# Header-only private headers every layer (but the public headers) may
# include: they define nothing that links, so they tie no library to another.
SHARED_PRIVATE = {
    "src/core/check.h": "TURNSTILE_CHECK, invariants that stay on in release builds",
}

# Whose public headers each layer may include besides its own headers.
PUBLIC_USES = {
    LIBTURNSTILE: set(),
    LIBTURNSTILE_SIM: {LIBTURNSTILE},
    "the CLI": {LIBTURNSTILE, LIBTURNSTILE_SIM},
    "demo": {LIBTURNSTILE, LIBTURNSTILE_SIM},
    "benchmarks": {LIBTURNSTILE, LIBTURNSTILE_SIM, TEST_SUPPORT},
}

CHECKED_ROOTS = ("src", "include", "demo", "benchmarks")
SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cc")
INCLUDE_LINE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def layer_of(path):
    """(layer, is_public) of a repository-relative path, or None."""
    parts = path.split("/")
    if parts[0] == "include" and len(parts) >= 3 and parts[1] == "turnstile":
        return (LIBTURNSTILE_SIM if parts[2] == "sim" else LIBTURNSTILE), True
    if parts[0] == "src" and len(parts) >= 3 and parts[1] in SRC_LAYERS:
        return SRC_LAYERS[parts[1]], False
    if parts[0] in ("demo", "benchmarks"):
        return parts[0], False
    if path.startswith(TEST_SUPPORT + "/"):
        return TEST_SUPPORT, True
    return None


def resolve(root, including, quoted, name):
    """(the repository-relative path `name` names or a generated header's
    name, whether it is generated), or None for a system header."""
    candidates = []
    if quoted:
        candidates.append(os.path.join(os.path.dirname(including), name))
    candidates += [os.path.join("include", name), os.path.join("src", name)]
    if quoted and including.startswith("benchmarks/"):
        candidates.append(os.path.join(TEST_SUPPORT, name))
    for candidate in candidates:
        candidate = os.path.normpath(candidate)
        if os.path.isfile(os.path.join(root, candidate)):
            return candidate, False
    if quoted and name in GENERATED_PRIVATE:
        return name, True
    return None


def describe(layer, public):
    if layer == TEST_SUPPORT:
        return "a test-support header"
    return f"a {'public' if public else 'private'} header of {layer}"


def check_include(layer, public_file, target, generated):
    """None if a file of `layer` (a public header if `public_file`) may
    include `target`, else the reason."""
    if generated:
        target_layer, target_public = GENERATED_PRIVATE[target], False
    else:
        found = layer_of(target)
        if found is None:
            return f"{target} belongs to no layer"
        target_layer, target_public = found
    if public_file and not target_public:
        return f"a public header includes {describe(target_layer, target_public)}"
    if not generated and target in SHARED_PRIVATE:
        return None
    if target_layer == layer:
        return None
    if target_public and target_layer in PUBLIC_USES[layer]:
        return None
    return f"{layer} includes {describe(target_layer, target_public)}"


def source_files(root):
    for top in CHECKED_ROOTS:
        for directory, subdirs, files in os.walk(os.path.join(root, top)):
            subdirs.sort()
            for name in sorted(files):
                if name.endswith(SOURCE_SUFFIXES):
                    yield os.path.relpath(os.path.join(directory, name), root)


def check_sources(root):
    problems = []
    internal_seen = set()
    for path in source_files(root):
        found = layer_of(path)
        if found is None:
            continue
        layer, public_file = found
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as source:
            for number, line in enumerate(source, start=1):
                match = INCLUDE_LINE.match(line)
                if not match:
                    continue
                quoted, name = match.group(1) == '"', match.group(2).strip()
                resolved = resolve(root, path, quoted, name)
                if resolved is None:
                    if quoted:
                        problems.append(f"{path}:{number}: #include \"{name}\" names no file of the repository")
                    continue
                reason = check_include(layer, public_file, *resolved)
                if reason is None:
                    continue
                if path in INTERNAL_PROGRAMS:
                    internal_seen.add(path)
                    continue
                problems.append(f"{path}:{number}: #include \"{name}\": {reason}")
    for path in sorted(set(INTERNAL_PROGRAMS) - internal_seen):
        problems.append(f"{path}: includes no private header: drop it from INTERNAL_PROGRAMS in "
                        "tools/check_layers.py and build it on the public dependencies")
    return problems


def check_installed(root, installed_by_layer):
    problems = []
    installed = {}
    for layer, headers in installed_by_layer.items():
        for header in headers:
            relative = os.path.relpath(os.path.realpath(header), os.path.realpath(root))
            installed[relative] = layer
    for path in source_files(root):
        found = layer_of(path)
        if found is None or not found[1] or not path.startswith("include/"):
            continue
        if path not in installed:
            problems.append(f"{path}: a public header that is not installed (include/turnstile/meson.build)")
        elif installed[path] != found[0]:
            problems.append(f"{path}: installed with {installed[path]}, but belongs to {found[0]}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root")
    parser.add_argument("--turnstile-headers", nargs="*")
    parser.add_argument("--sim-headers", nargs="*")
    options = parser.parse_args()
    problems = check_sources(options.root)
    if options.turnstile_headers is not None or options.sim_headers is not None:
        problems += check_installed(options.root, {
            LIBTURNSTILE: options.turnstile_headers or [],
            LIBTURNSTILE_SIM: options.sim_headers or [],
        })
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_layers: {len(problems)} problem(s); see tools/check_layers.py for the rules")
        return 1
    print("check_layers: every include respects the layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
