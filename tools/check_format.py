#!/usr/bin/env python3
"""The C++ sources follow .clang-format: a Meson test, not a habit.

  check_format.py CLANG_FORMAT SOURCE_ROOT

Runs `CLANG_FORMAT --dry-run --Werror` over every .h and .cpp file of
src/, include/, tests/, benchmarks/, demo/ and fuzz/ and fails naming the
files it would change (fix them with `clang-format -i FILE`).
"""

import os
import subprocess
import sys

FOLDERS = ["src", "include", "tests", "benchmarks", "demo", "fuzz"]
SUFFIXES = (".h", ".cpp")
# Files per clang-format call: keeps command lines short.
BATCH = 64


def sources(root):
    for folder in FOLDERS:
        for directory, _, names in os.walk(os.path.join(root, folder)):
            for name in sorted(names):
                if name.endswith(SUFFIXES):
                    yield os.path.join(directory, name)


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    clang_format, root = sys.argv[1], sys.argv[2]
    files = sorted(sources(root))
    unformatted = []
    for start in range(0, len(files), BATCH):
        batch = files[start:start + BATCH]
        result = subprocess.run([clang_format, "--dry-run", "--Werror", "--style=file"] + batch,
                                capture_output=True, text=True)
        if result.returncode != 0:
            for path in batch:
                if path in result.stderr:
                    unformatted.append(os.path.relpath(path, root))
    if unformatted:
        for path in unformatted:
            print(f"check_format: {path} does not follow .clang-format (clang-format -i {path})")
        return 1
    print(f"check_format: {len(files)} files follow .clang-format")
    return 0


if __name__ == "__main__":
    sys.exit(main())
