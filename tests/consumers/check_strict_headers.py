#!/usr/bin/env python3
"""The public headers compile without a warning as users compile them.

  check_strict_headers.py --include DIR [--include DIR...] --probe FILE
                          --compiler CXX [--compiler CXX...] HEADER...

For each compiler, one translation unit that includes every HEADER (as
<turnstile/NAME.h> or <turnstile/sim/NAME.h>) and then the probe file (a
user's calls whose defaults live in the headers) is compiled with
-std=c++20 and STRICT_FLAGS, -fsyntax-only: the project's own warning
exceptions (meson.build) are not a user's. Prints each compiler's
diagnostics and 'N passed, N failed' over the compilers; exit 1 if any
failed.
"""

import argparse
import os
import subprocess
import sys
import tempfile

STRICT_FLAGS = ["-Wall", "-Wextra", "-Wpedantic", "-Werror"]


def include_line(header):
    parts = os.path.normpath(header).split(os.sep)
    index = len(parts) - 1 - parts[::-1].index("turnstile")
    return "#include <" + "/".join(parts[index:]) + ">\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--include", action="append", required=True)
    parser.add_argument("--probe", required=True)
    parser.add_argument("--compiler", action="append", required=True)
    parser.add_argument("headers", nargs="+")
    args = parser.parse_args()
    with open(args.probe, encoding="utf-8") as probe:
        source = "".join(include_line(h) for h in args.headers) + f'#line 1 "{args.probe}"\n' + probe.read()
    failed = 0
    with tempfile.TemporaryDirectory() as scratch:
        unit = os.path.join(scratch, "strict_user.cpp")
        with open(unit, "w", encoding="utf-8") as out:
            out.write(source)
        for compiler in args.compiler:
            command = [compiler, "-std=c++20", *STRICT_FLAGS, "-fsyntax-only"]
            command += [flag for directory in args.include for flag in ("-I", directory)]
            result = subprocess.run(command + [unit], capture_output=True, text=True)
            verdict = "ok" if result.returncode == 0 else "FAILED"
            print(f"{compiler}: {verdict}")
            if result.returncode != 0:
                failed += 1
                print(result.stdout + result.stderr)
    print(f"{len(args.compiler) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
