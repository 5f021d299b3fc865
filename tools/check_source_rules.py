#!/usr/bin/env python3
"""Two rules of the sources that review alone would let slip.

  check_source_rules.py SOURCE_ROOT    check the repository
  check_source_rules.py --self-test    check the checker on made-up files

flavor-identity: no `== Flavor::x` or `!= Flavor::x` (either side) outside
  the files allowed in FLAVOR_IDENTITY_ALLOWED. A flavor's facts (its
  quorum, whether its waiters queue, whether its permits have leases...)
  live in kFlavorTable (include/turnstile/flavor.h) and are asked for by
  name (queues_waiters(flavor)), so a new flavor is one row, not a hunt
  for every test of another flavor's identity. Where code must pick per
  flavor, a switch over every enumerator makes the compiler (-Wswitch)
  point the new flavor's author at it.

release-checked: no plain `assert(` in src/, demo/ or benchmarks/. The
  build drops assert in release (b_ndebug=if-release); an invariant stays
  checked with TURNSTILE_CHECK (src/core/check.h), and a bound that input
  can reach is a typed error. The public headers (include/) keep
  <cassert>: they cannot include an internal header, and there the
  user's NDEBUG decides. static_assert is not an assert.

Comments and string literals are not read. Prints file:line and the rule
for each breach, and exits 1 if any.
"""

import argparse
import os
import re
import sys
import tempfile

SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cc")

# Where a flavor's identity may be tested: the table itself, the factory
# that makes each flavor's handle, and each flavor's own implementation.
FLAVOR_IDENTITY_ALLOWED = (
    "include/turnstile/flavor.h",
    "src/locks/handles/flavor.cpp",
    "src/locks/flavors/",
)
FLAVOR_ROOTS = ("src", "include", "demo", "benchmarks")
FLAVOR_IDENTITY = re.compile(r"[!=]=\s*(?:turnstile::)?Flavor::\w+|(?:turnstile::)?Flavor::\w+\s*[!=]=")

ASSERT_ROOTS = ("src", "demo", "benchmarks")
PLAIN_ASSERT = re.compile(r"(?<![\w])assert\s*\(")

# Comments and literals, blanked (kept as spaces, newlines kept) so that
# line numbers stay true and nothing inside them counts.
CODE_NOISE = re.compile(
    r'//[^\n]*|/\*.*?\*/|R"(?P<delim>[^(]*)\(.*?\)(?P=delim)"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
    re.DOTALL,
)


def code_only(text):
    return CODE_NOISE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def sources(root, tops):
    for top in tops:
        for directory, subdirectories, names in os.walk(os.path.join(root, top)):
            subdirectories.sort()
            for name in sorted(names):
                if name.endswith(SOURCE_SUFFIXES):
                    path = os.path.join(directory, name)
                    yield os.path.relpath(path, root).replace(os.sep, "/"), path


def breaches(root):
    found = []
    for relative, path in sources(root, FLAVOR_ROOTS):
        with open(path, encoding="utf-8") as f:
            code = code_only(f.read())
        lines = code.split("\n")
        flavor_allowed = any(relative == a or (a.endswith("/") and relative.startswith(a)) for a in FLAVOR_IDENTITY_ALLOWED)
        checks_asserts = relative.split("/")[0] in ASSERT_ROOTS
        for number, line in enumerate(lines, 1):
            if not flavor_allowed and FLAVOR_IDENTITY.search(line):
                found.append(
                    f"{relative}:{number}: flavor-identity: a flavor's identity tested; ask kFlavorTable "
                    "for the fact (include/turnstile/flavor.h), or switch over every flavor"
                )
            if checks_asserts and PLAIN_ASSERT.search(line):
                found.append(
                    f"{relative}:{number}: release-checked: a plain assert vanishes in release; "
                    "use TURNSTILE_CHECK (src/core/check.h) or a typed error"
                )
    return found


def self_test():
    """The checker finds each breach it should, and nothing else."""
    files = {
        "src/scenarios/bad.cpp": "bool f(Flavor x) { return x == Flavor::fair; }\n",
        "src/cli/bad.cpp": "bool g(Flavor x) {\n  return Flavor::token != x;\n}\n",
        "src/core/bad.cpp": "void h(int n) {\n  assert(n > 0);\n}\n",
        "benchmarks/bad.cpp": "void i(int n) { assert (n); }\n",
        "src/locks/flavors/fair_lock.cpp": "bool j(Flavor x) { return x == Flavor::fair; }\n",
        "include/turnstile/future.h": "void k(int n) { assert(n > 0); }\n",
        "src/core/fine.cpp": (
            "// x == Flavor::fair and assert(n) in a comment\n"
            'const char* s = "x == Flavor::fair, assert(n)";\n'
            "static_assert(sizeof(int) == 4);\n"
            "void l(int n) { TURNSTILE_CHECK(n > 0); }\n"
            "bool m(Flavor x) { return queues_waiters(x); }\n"
        ),
    }
    expected = {
        "src/scenarios/bad.cpp:1: flavor-identity",
        "src/cli/bad.cpp:2: flavor-identity",
        "src/core/bad.cpp:2: release-checked",
        "benchmarks/bad.cpp:1: release-checked",
    }
    with tempfile.TemporaryDirectory() as root:
        for relative, text in files.items():
            path = os.path.join(root, relative)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        got = {": ".join(b.split(": ")[:2]) for b in breaches(root)}
    if got != expected:
        print("check_source_rules self-test failed")
        print("  expected:", sorted(expected))
        print("  got:     ", sorted(got))
        return 1
    print(f"check_source_rules self-test: {len(expected)} breaches found, the allowed and the commented ones not")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", nargs="?", help="the repository")
    parser.add_argument("--self-test", action="store_true", help="check the checker")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if not args.root:
        parser.error("SOURCE_ROOT or --self-test")
    found = breaches(args.root)
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} breach(es) of the source rules")
        return 1
    print("source rules hold: no flavor identity tested outside its files, no plain assert")
    return 0


if __name__ == "__main__":
    sys.exit(main())
