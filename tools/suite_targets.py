#!/usr/bin/env python3
"""Prints the build targets that the Meson tests of some suites need.

Input:  a configured Meson build directory and one or more suite names
        (as given to `meson test --suite`, without the project prefix).
Output: one `meson compile` target per line (PATH/NAME:TYPE, PATH
        relative to the build directory), for every build target a test
        of those suites depends on (its executable, and targets passed in
        its arguments); ninja builds what those need in turn.
        `./dev test SUITE...` builds only these, so a sanitizer run of
        two suites does not compile the rest.
Exit status 1 if no test belongs to the suites named (a misspelt suite
must not look like a suite with nothing to build).
"""
import json
import os
import subprocess
import sys


def introspect(build_dir: str, what: str) -> list:
    output = subprocess.run(
        ["meson", "introspect", build_dir, what],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(output)


def in_suites(test: dict, suites: set) -> bool:
    # Meson reports suites as 'project:suite'.
    return any(suite.split(":", 1)[-1] in suites for suite in test["suite"])


def main() -> int:
    if len(sys.argv) < 3:
        print(f"usage: {sys.argv[0]} BUILD_DIR SUITE...", file=sys.stderr)
        return 64
    build_dir = os.path.abspath(sys.argv[1])
    suites = set(sys.argv[2:])
    tests = [test for test in introspect(build_dir, "--tests") if in_suites(test, suites)]
    if not tests:
        print(f"no Meson test belongs to the suites {sorted(suites)}", file=sys.stderr)
        return 1
    wanted = {target_id for test in tests for target_id in test["depends"]}
    outputs = set()
    for target in introspect(build_dir, "--targets"):
        if target["id"] in wanted:
            # `meson compile` takes [PATH/]NAME:TYPE, not a file name
            # (libturnstile.so.0.1.0 is the target turnstile:shared_library).
            subdir = os.path.relpath(os.path.dirname(target["filename"][0]), build_dir)
            kind = target["type"].replace(" ", "_")
            outputs.add(os.path.normpath(os.path.join(subdir, target["name"])) + ":" + kind)
    for output in sorted(outputs):
        print(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
