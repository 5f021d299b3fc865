#!/usr/bin/env python3
"""The public headers compile without a warning as users compile them.

  check_strict_headers.py --include DIR [--include DIR...]
                          --compiler CXX [--compiler CXX...]
                          (--probe FILE HEADER... | --unit FILE [--unit FILE...])

For each compiler, one translation unit that includes every HEADER (as
<turnstile/NAME.h> or <turnstile/sim/NAME.h>) and then the probe file (a
user's calls whose defaults live in the headers) is compiled with
-std=c++20 and STRICT_FLAGS, -fsyntax-only: the project's own warning
exceptions (meson.build) are not a user's. With --unit, each FILE (a
whole program: the docs' examples, tools/doc_examples.py) is compiled so
instead. Prints each compilation's diagnostics and 'N passed, N failed';
exit 1 if any failed.
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
    parser.add_argument("--probe")
    parser.add_argument("--unit", action="append", default=[])
    parser.add_argument("--compiler", action="append", required=True)
    parser.add_argument("headers", nargs="*")
    args = parser.parse_args()
    if bool(args.probe) == bool(args.unit) or (args.probe and not args.headers):
        parser.error("give --probe with the headers, or --unit")
    failed = 0
    compiled = 0
    with tempfile.TemporaryDirectory() as scratch:
        units = args.unit
        if args.probe:
            with open(args.probe, encoding="utf-8") as probe:
                source = "".join(include_line(h) for h in args.headers) + f'#line 1 "{args.probe}"\n' + probe.read()
            units = [os.path.join(scratch, "strict_user.cpp")]
            with open(units[0], "w", encoding="utf-8") as out:
                out.write(source)
        for compiler in args.compiler:
            for unit in units:
                command = [compiler, "-std=c++20", *STRICT_FLAGS, "-fsyntax-only"]
                command += [flag for directory in args.include for flag in ("-I", directory)]
                result = subprocess.run(command + [unit], capture_output=True, text=True)
                compiled += 1
                verdict = "ok" if result.returncode == 0 else "FAILED"
                print(f"{compiler} {os.path.basename(unit)}: {verdict}")
                if result.returncode != 0:
                    failed += 1
                    print(result.stdout + result.stderr)
    print(f"{compiled - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
