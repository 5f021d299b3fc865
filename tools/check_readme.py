#!/usr/bin/env python3
"""The README opens with the two set-up commands.

  check_readme.py SOURCE_ROOT     check the repository's README.md
  check_readme.py --self-test     check the checker on made-up READMEs

A newcomer on a fresh machine reads the top of README.md and nothing else
first: within its first FIRST_LINES lines, the first fenced ```sh block
must hold a line for each of SETUP_COMMANDS (the command, then a comment
saying what it does), and `./dev` must answer to each (its usage text,
printed by `./dev` with no command, names it). Prints what is missing and
exits 1 if anything is.
"""

import argparse
import os
import re
import subprocess
import sys

FIRST_LINES = 20
SETUP_COMMANDS = ("./dev demo", "./dev test")
FENCE = re.compile(r"^```(\w*)\s*$")


def first_shell_block(lines):
    """The lines of the first ```sh block among `lines`, or None."""
    inside = None
    for line in lines:
        fence = FENCE.match(line)
        if inside is None:
            if fence and fence.group(1) in ("sh", "bash", "console"):
                inside = []
        elif fence:
            return inside
        else:
            inside.append(line)
    return None


def problems_of(readme_text, dev_usage):
    lines = readme_text.splitlines()[:FIRST_LINES]
    block = first_shell_block(lines)
    if block is None:
        return [f"README.md: no ```sh block within its first {FIRST_LINES} lines"]
    found = []
    for command in SETUP_COMMANDS:
        line = next((l for l in block if l.split("#", 1)[0].strip() == command), None)
        if line is None:
            found.append(f"README.md: its first ```sh block does not run `{command}`")
        elif "#" not in line or not line.split("#", 1)[1].strip():
            found.append(f"README.md: `{command}` has no comment saying what it does")
        if command.split()[-1] not in dev_usage.split():
            found.append(f"./dev: its usage does not name `{command.split()[-1]}`")
    return found


def dev_usage(root):
    return subprocess.run(
        [os.path.join(root, "dev")], check=True, capture_output=True, text=True
    ).stdout


def self_test():
    usage = "./dev demo  runs it\n./dev test [SUITE...]  tests\n"
    good = "# x\n\n```sh\n./dev demo    # the demo\n./dev test    # the tests\n```\n"
    cases = {
        "good": (good, usage, []),
        "no block": ("# x\n\n" + "text\n" * 30 + good, usage, ["no ```sh block"]),
        "no test": (good.replace("./dev test    # the tests\n", ""), usage, ["does not run `./dev test`"]),
        "no comment": (good.replace("    # the demo", ""), usage, ["`./dev demo` has no comment"]),
        "dev lost demo": (good, "./dev test\n", ["does not name `demo`"]),
    }
    failures = 0
    for name, (text, usage_text, expected) in cases.items():
        got = problems_of(text, usage_text)
        ok = len(got) == len(expected) and all(e in g for e, g in zip(expected, got))
        if not ok:
            failures += 1
            print(f"self-test '{name}': expected {expected}, got {got}")
    print(f"{len(cases) - failures} passed, {failures} failed")
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if not args.root:
        parser.error("SOURCE_ROOT or --self-test")
    with open(os.path.join(args.root, "README.md"), encoding="utf-8") as readme:
        found = problems_of(readme.read(), dev_usage(args.root))
    for problem in found:
        print(problem)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
