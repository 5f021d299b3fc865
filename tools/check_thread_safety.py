#!/usr/bin/env python3
"""Clang's thread-safety analysis over the whole tree: a Meson test.

  check_thread_safety.py BUILD_DIR [SOURCE...] [--clang CLANG] [--jobs N]
  check_thread_safety.py --self-test [--clang CLANG]

Reads BUILD_DIR/compile_commands.json (a GCC build's, as ./dev builds) and
runs, for every C++ translation unit of the libraries, the CLI, the
simulator and the demo that includes turnstile/mutex.h (as the build's
dependency records have it: `ninja -t deps`; the others have no
annotated mutex to check, and the tests keep std::mutex; or all of them
before a first build), or only for the SOURCE files named, `CLANG <the same flags> -fsyntax-only
-Wthread-safety -Werror=thread-safety`: the analysis checks every
TURNSTILE_GUARDED_BY, TURNSTILE_REQUIRES and TURNSTILE_EXCLUDES
(include/turnstile/thread_annotations.h) at a fraction of a compile's
cost, N translation units at a time (default 2). The GCC build's own
warning flags are dropped (Clang's other warnings are not this check's
business, and do not fail it), and so are its output, dependency-file and
precompiled-header flags; a precompiled header given by -include is parsed
once by Clang (-emit-pch, with the same analysis) and read by the
translation units sharing it as -include-pch: half the CPU of parsing it
in each. The few translation units Clang 14
cannot parse (NOT_ANALYSED, each with why) are named and left out.

Prints each failing file's diagnostics and exits 1 if any; exits 77 (a
skipped Meson test) when CLANG is not installed. --self-test checks the
checker: a made-up file reading a guarded member without its mutex must
fail, its correct twin must pass.
"""

import argparse
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

SKIPPED = 77
ANALYSIS_FLAGS = ["-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety", "-Wno-unknown-warning-option"]
# GCC flags that take a separate argument and are dropped with it.
DROPPED_WITH_ARGUMENT = {"-o", "-MF", "-MQ", "-MT"}
# Translation units Clang 14 cannot parse, by path from the source root,
# with why: they are left out (and named in the output), not failed.
NOT_ANALYSED = {
    "demo/asio_service.cpp": "C++20 coroutines: Clang 14 finds no <coroutine> in libstdc++ 12",
    "tests/locks/asio_test.cpp": "C++20 coroutines: Clang 14 finds no <coroutine> in libstdc++ 12",
}
# GCC flags dropped alone.
DROPPED = {"-c", "-MD", "-MMD", "-fpch-preprocess", "-Werror", "-pedantic"}


def arguments_of(entry):
    if "arguments" in entry:
        return list(entry["arguments"])
    return shlex.split(entry["command"])


def precompiled_headers(entries):
    """The source of each precompiled header the build makes, by its name
    (the GCC build passes `-include cli_pch.h` and finds the .gch)."""
    headers = {}
    for entry in entries:
        arguments = arguments_of(entry)
        if "c++-header" in arguments:
            source = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
            headers[os.path.basename(source)] = source
    return headers


def clang_command(clang, entry, headers):
    """The Clang command analysing `entry`, or None if it is not a C++
    translation unit (a precompiled header's own build)."""
    arguments = arguments_of(entry)
    if "c++-header" in arguments:
        return None
    # The compiler (and a launcher such as ccache before it) is replaced.
    while arguments and not arguments[0].startswith("-"):
        arguments.pop(0)
    command = [clang]
    skip = False
    for index, argument in enumerate(arguments):
        if skip:
            skip = False
            continue
        if argument in DROPPED_WITH_ARGUMENT:
            skip = True
        elif argument in DROPPED or argument.startswith(("-W", "-fdiagnostics-color")):
            continue
        elif argument == entry["file"]:
            continue
        elif index > 0 and arguments[index - 1] == "-include" and argument in headers:
            command.append(headers[argument])
        else:
            command.append(argument)
    return command + ANALYSIS_FLAGS + ["-fno-color-diagnostics", entry["file"]]


def analyse(job):
    directory, command = job
    result = subprocess.run(command, cwd=directory, capture_output=True, text=True)
    return result.returncode, result.stdout + result.stderr


def forced_include(command, headers):
    """The index in `command` of the `-include` of a precompiled header's
    source (clang_command puts the header's path there), or None."""
    sources = set(headers.values())
    for index in range(len(command) - 1):
        if command[index] == "-include" and command[index + 1] in sources:
            return index
    return None


def with_clang_pchs(work, headers, pch_dir, jobs):
    """Parses each precompiled header once with Clang: the translation units
    sharing one (a target's: the same flags but the source) read it as
    `-include-pch`, as the GCC build reads its .gch, instead of parsing
    the standard library and the public API again. The header's own build
    runs the same analysis (an inline function of the public API is
    analysed there). Returns the work with the commands rewritten, and the
    failures of the headers' own builds."""
    groups = {}
    for key, (entry, (directory, command)) in work.items():
        at = forced_include(command, headers)
        if at is None:
            continue
        flags = tuple(command[:at] + command[at + 2:-1])
        groups.setdefault((directory, flags, command[at + 1]), []).append(key)
    builds = []
    for number, (directory, flags, header) in enumerate(groups):
        pch = os.path.join(pch_dir, f"{number}.pch")
        command = [argument for argument in flags if argument != "-fsyntax-only"]
        builds.append((directory, command + ["-x", "c++-header", header, "-o", pch]))
    failures = []
    rewritten = dict(work)
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for (group, keys), (directory, build), (status, output) in zip(groups.items(), builds,
                                                                       pool.map(analyse, builds)):
            if status != 0:
                failures.append((group[2], output))
                continue
            for key in keys:
                entry, (entry_directory, command) = work[key]
                at = forced_include(command, headers)
                rewritten[key] = (entry, (entry_directory,
                                          command[:at] + ["-include-pch", build[-1]] + command[at + 2:]))
    return rewritten, failures


# Where the annotated code lives; the tests use std::mutex of their own.
ANALYSED_ROOTS = ("src/", "demo/", "include/")
ANNOTATED_HEADER = "turnstile/mutex.h"


def including_mutex_header(build_dir):
    """The objects whose recorded dependencies include ANNOTATED_HEADER, or
    None when the build has no dependency records yet."""
    result = subprocess.run(["ninja", "-C", build_dir, "-t", "deps"], capture_output=True, text=True)
    if result.returncode != 0 or not result.stdout.strip():
        return None
    objects, current = set(), None
    for line in result.stdout.splitlines():
        if line and not line.startswith(" "):
            current = line.split(":", 1)[0]
        elif current and line.strip().endswith(ANNOTATED_HEADER):
            objects.add(current)
    return objects


def check(build_dir, clang, jobs, only=()):
    """Returns the failures, one (file, diagnostics) each, and the count of
    translation units analysed."""
    with open(os.path.join(build_dir, "compile_commands.json"), encoding="utf-8") as source:
        entries = json.load(source)
    headers = precompiled_headers(entries)
    annotated = None if only else including_mutex_header(build_dir)
    work = {}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for entry in entries:
        command = clang_command(clang, entry, headers)
        source = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
        relative = os.path.relpath(source, root)
        if relative in NOT_ANALYSED:
            print(f"check_thread_safety: not analysed: {relative} ({NOT_ANALYSED[relative]})")
            continue
        if not only and (not relative.startswith(ANALYSED_ROOTS) or
                         (annotated is not None and entry.get("output") not in annotated)):
            continue
        if command is not None and (not only or source in only):
            # One analysis per distinct command (a source built twice alike).
            work.setdefault(tuple(command), (entry, (entry["directory"], command)))
    with tempfile.TemporaryDirectory(prefix="thread-safety-pch-") as pch_dir:
        work, failures = with_clang_pchs(work, headers, pch_dir, jobs)
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            results = pool.map(analyse, [job for _, job in work.values()])
            for (entry, _), (status, output) in zip(work.values(), results):
                if status != 0:
                    failures.append((os.path.normpath(os.path.join(entry["directory"], entry["file"])), output))
    return failures, len(work)


FIXTURE = """#include "turnstile/mutex.h"

class Counter {
 public:
  void add(int n) TURNSTILE_EXCLUDES(mutex_) {
    const turnstile::MutexLock lock(mutex_);
    total_ += n;
  }
  int total() TURNSTILE_EXCLUDES(mutex_) {
    LOCK_IT
    return total_;
  }

 private:
  turnstile::Mutex mutex_;
  int total_ TURNSTILE_GUARDED_BY(mutex_) = 0;
};

int main() {
  Counter counter;
  counter.add(1);
  return counter.total();
}
"""


def self_test(clang):
    """Analyses two made-up files: one reads a guarded member without its
    mutex and must be reported, its twin with the lock must not."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as build_dir:
        sources = {
            "unguarded.cpp": FIXTURE.replace("LOCK_IT", ""),
            "guarded.cpp": FIXTURE.replace("LOCK_IT", "const turnstile::MutexLock lock(mutex_);"),
        }
        # Both include a precompiled header the way the build's targets do
        # (`-include` of a header built as c++-header): the analysis reads
        # it as a Clang PCH, and must still see the unguarded read.
        include = f"-I{shlex.quote(os.path.join(root, 'include'))} -std=c++20"
        with open(os.path.join(build_dir, "fixture_pch.h"), "w", encoding="utf-8") as out:
            out.write('#include <vector>\n#include "turnstile/mutex.h"\n')
        entries = [{
            "directory": build_dir,
            "file": "fixture_pch.h",
            "command": f"ccache c++ {include} -x c++-header -o fixture_pch.h.gch -c fixture_pch.h",
        }]
        for name, text in sources.items():
            with open(os.path.join(build_dir, name), "w", encoding="utf-8") as out:
                out.write(text)
            entries.append({
                "directory": build_dir,
                "file": name,
                "command": f"ccache c++ {include} -Wall -Werror -include fixture_pch.h "
                           f"-MD -MQ {name}.o -MF {name}.o.d -o {name}.o -c {name}",
            })
        with open(os.path.join(build_dir, "compile_commands.json"), "w", encoding="utf-8") as out:
            json.dump(entries, out)
        # Named, as SOURCE arguments are: outside src/ and without a build's
        # dependency records, the default selection would pass them by.
        named = {os.path.realpath(os.path.join(build_dir, name)) for name in sources}
        failures, count = check(build_dir, clang, 2, named)
    reported = {os.path.basename(path): output for path, output in failures}
    if count != 2 or set(reported) != {"unguarded.cpp"}:
        print(f"self-test: expected unguarded.cpp alone to fail, got {sorted(reported)} of {count}")
        for output in reported.values():
            print(output)
        return 1
    if "requires holding mutex 'mutex_'" not in reported["unguarded.cpp"]:
        print("self-test: unguarded.cpp failed, but not on the unguarded read:")
        print(reported["unguarded.cpp"])
        return 1
    print("check_thread_safety: self-test passed (the unguarded read reported, the guarded one not)")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir", nargs="?")
    parser.add_argument("sources", nargs="*")
    parser.add_argument("--clang", default="clang++")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--self-test", action="store_true")
    options = parser.parse_args()
    clang = shutil.which(options.clang)
    if clang is None:
        print(f"check_thread_safety: skipped: {options.clang} is not installed (./dev installs clang)")
        return SKIPPED
    if options.self_test:
        return self_test(clang)
    if options.build_dir is None:
        parser.error("BUILD_DIR is required (or --self-test)")
    started = time.monotonic()
    only = {os.path.realpath(source) for source in options.sources}
    failures, count = check(options.build_dir, clang, options.jobs, only)
    seconds = time.monotonic() - started
    for path, output in sorted(failures):
        print(f"== {path}")
        print(output.rstrip())
    if failures:
        print(f"check_thread_safety: {len(failures)} of {count} translation unit(s) fail Clang's "
              f"thread-safety analysis ({seconds:.0f} s; annotations: include/turnstile/thread_annotations.h)")
        return 1
    print(f"check_thread_safety: {count} translation units pass Clang's thread-safety analysis ({seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
