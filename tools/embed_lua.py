#!/usr/bin/env python3
"""Embeds lua/*.lua into the library as turnstile::Script constants.

Input:  the .lua files given on the command line.
Output: lua_scripts.h (one `extern const Script <name>;` per file, in
        namespace turnstile::scripts) and lua_scripts.cpp (their definitions,
        each with its SHA-1, plus embedded_scripts()/find_embedded_script()).

A line "--! include <name>" is replaced by lua/lib/<name>.lua (what several
scripts share, written once), keeping only the library's top-level locals
(functions and constants) that the script uses, directly or through another
kept local: Redis runs a script's whole body on every call, so each unused
`local function` would cost a closure per call. A line "--! later" (once, after
the includes) ends a script's fast path: the kept locals that the code above
it does not use, directly or through another, are defined at that line
instead, so a call that returns before it creates none of their closures.
The script sent to Redis is the result.

The SHA-1 is computed here, once, from the exact bytes Redis will hash.
"""
import argparse
import hashlib
import os
import re
import sys
import tempfile

IDENTIFIER = re.compile(r"^[a-z][a-z0-9_]*$")
DELIMITER = "turnstile_lua"
INCLUDE = re.compile(r"^--! include ([a-z][a-z0-9_]*)$", re.MULTILINE)
LATER = re.compile(r"^--! later$", re.MULTILINE)


# A library's top-level definition: "local function NAME(" or "local NAME =".
TOP_LEVEL_LOCAL = re.compile(r"^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)\b")
IDENTIFIER_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A string literal, then a comment: neither names a local that is used.
STRING_OR_COMMENT = re.compile(r"'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"|--.*$")


def library_items(path: str, text: str) -> list:
    """A library as (name, lines) items, in order: its header comment first
    (name None), then each top-level local with the comment lines above it.
    Anything else at the top level (a statement, a long string) is refused:
    removing an unused local must never remove something that runs."""
    lines = text.split("\n")
    starts = []
    for number, line in enumerate(lines):
        found = TOP_LEVEL_LOCAL.match(line)
        if found:
            first = number
            while first > 0 and lines[first - 1].startswith("--"):
                first -= 1
            starts.append((first, found.group(1)))
        elif line and not line[0].isspace() and not line.startswith("--") and line != "end" and line != "}":
            sys.exit(f"embed_lua: {path}:{number + 1}: a library holds only top-level locals and comments")
        if "[[" in line or "[=" in line:
            sys.exit(f"embed_lua: {path}:{number + 1}: long strings are not supported in a library")
    items = [(None, lines[: starts[0][0] if starts else len(lines)])]
    for index, (first, name) in enumerate(starts):
        end = starts[index + 1][0] if index + 1 < len(starts) else len(lines)
        items.append((name, lines[first:end]))
    return items


def identifiers(lines: list) -> set:
    """The identifiers the code of `lines` names, outside strings and comments."""
    names = set()
    for line in lines:
        names.update(IDENTIFIER_TOKEN.findall(STRING_OR_COMMENT.sub(" ", line)))
    return names


def used_locals(code: list, included: dict) -> set:
    """The identifiers the lines `code` use, with those of every included
    local they use, directly or through another."""
    used = identifiers(code)
    changed = True
    while changed:
        changed = False
        for items in included.values():
            for name, lines in items:
                if name in used and not identifiers(lines) <= used:
                    used |= identifiers(lines)
                    changed = True
    return used


def expand_includes(path: str, text: str) -> str:
    """Replaces every include line by the used part of its library file
    (lua/lib/<name>.lua); with a "--! later" line, the locals only the code
    after it uses are defined there."""
    library = os.path.join(os.path.dirname(path), "lib")
    markers = LATER.findall(text)
    if len(markers) > 1:
        sys.exit(f"embed_lua: {path}: more than one '--! later' line")
    fast, rest = text, ""
    if markers:
        fast, rest = LATER.split(text)
        if INCLUDE.search(rest):
            sys.exit(f"embed_lua: {path}: an include after the '--! later' line")
    pieces = INCLUDE.split(fast)
    # INCLUDE has one group: pieces alternate text, library name, text, ...
    included = {}
    for name in pieces[1::2]:
        with open(os.path.join(library, name + ".lua"), "rb") as handle:
            included[name] = library_items(name, handle.read().decode("utf-8").rstrip("\n"))
    used = used_locals("".join(pieces[0::2] + [rest]).split("\n"), included)
    early = used_locals("".join(pieces[0::2]).split("\n"), included) if markers else used
    out = []
    for index, piece in enumerate(pieces):
        if index % 2 == 0:
            out.append(piece)
        else:
            kept = [line for name, lines in included[piece] if name is None or name in early for line in lines]
            out.append("\n".join(kept).rstrip("\n"))
    if markers:
        late = [line for items in included.values() for name, lines in items
                if name is not None and name in used and name not in early for line in lines]
        out.append("\n".join(["-- (the library locals only the code below uses: tools/embed_lua.py)"] + late)
                   .rstrip("\n") + "\n")
        out.append(rest.lstrip("\n"))
    return "".join(out)


def self_test() -> int:
    """Checks expand_includes on made-up libraries; prints and counts."""
    library = "-- header\nlocal LIMIT = 3\nlocal UNUSED_LIMIT = 4\n\n" \
              "-- f's comment\nlocal function f(x)\n  return math.min(x, LIMIT)\nend\n\n" \
              "local function g(x)\n  return f(x) + UNUSED_LIMIT\nend\n\n" \
              "local function h(x)\n  return f(x)\nend\n"
    cases = {
        "used through another local": ("--! include l\nreturn h(1)\n", ["LIMIT =", "function f", "function h"],
                                       ["UNUSED_LIMIT", "function g"]),
        "named in a string or a comment only": ("--! include l\nreturn 'g' -- g\n", [],
                                                ["function f", "function g", "function h", "LIMIT ="]),
        "every local used": ("--! include l\nreturn g(1) + h(1)\n", ["LIMIT =", "UNUSED_LIMIT =", "function g"], []),
    }
    failures = 0
    with tempfile.TemporaryDirectory() as root:
        os.mkdir(os.path.join(root, "lib"))
        with open(os.path.join(root, "lib", "l.lua"), "w", encoding="utf-8") as handle:
            handle.write(library)
        for name, (script, kept, dropped) in cases.items():
            got = expand_includes(os.path.join(root, "s.lua"), script)
            wrong = [k for k in kept if k not in got] + [d for d in dropped if d in got]
            if wrong:
                failures += 1
                print(f"self-test '{name}': wrong about {wrong} in:\n{got}")
        # A fast path: what it uses before the marker, the rest at the marker.
        got = expand_includes(os.path.join(root, "s.lua"),
                              "--! include l\nif x then return f(1) end\n--! later\nreturn h(1)\n")
        order = [got.find(text) for text in ("LIMIT =", "function f", "if x", "function h", "return h")]
        if -1 in order or order != sorted(order) or "UNUSED_LIMIT" in got or "function g" in got:
            failures += 1
            print(f"self-test 'a fast path before --! later': wrong order or locals in:\n{got}")
        for name, script in (("two '--! later' lines", "--! include l\n--! later\n--! later\nreturn h(1)\n"),
                             ("an include after '--! later'", "--! later\n--! include l\nreturn h(1)\n")):
            try:
                expand_includes(os.path.join(root, "s.lua"), script)
                failures += 1
                print(f"self-test '{name}': not refused")
            except SystemExit:
                pass
        with open(os.path.join(root, "lib", "l.lua"), "a", encoding="utf-8") as handle:
            handle.write("redis.call('del', KEYS[1])\n")
        try:
            expand_includes(os.path.join(root, "s.lua"), "--! include l\nreturn h(1)\n")
            failures += 1
            print("self-test 'a statement at a library's top level': not refused")
        except SystemExit:
            pass
    print(f"{len(cases) + 4 - failures} passed, {failures} failed")
    return 1 if failures else 0


# Mutants (`meson setup -Dlua_mutant=NAME`, `./dev soak --mutant NAME`): a
# deliberate bug, for showing that the real-server histories
# (tests/histories/) catch it. Each is (its edits, each (script, text,
# replacement); what it breaks; the soak.py arguments that reveal it: the
# `turnstile run` flavor that runs the scripts, the fault kinds, and what
# else the draw needs). An edit whose text is no longer in its script stops
# the build, so no mutant rots into a no-op. Never in a build that ships.
MUTANTS = {
    # Both below need a release that reaches the server after its sender's
    # lease ran out: a delayed link (tests/histories/link_proxy.py).
    "release-ignores-owner": (
        [("reentrant_lock_unlock", "if count == nil then\n  return nil\nend",
          "if count == nil then\n  count = 1\nend")],
        "a release that does not check its owner: a lost holder's release deletes the next holder's lock",
        "--flavors reentrant --faults delay-link"),
    "token-release-ignores-token": (
        [("token_lock_release", "if not value or token_of(value) ~= ARGV[1] then", "if not value then")],
        "a token lock's release that does not compare the token: a lost holder frees the next one's lock",
        "--flavors token --faults delay-link"),
    # A holder whose lock was flushed renews it back into being, beside the
    # holder that took it meanwhile: holds long enough to be renewed.
    "renewal-revives-lost-lock": (
        [("reentrant_lock_renew", "if redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1 then",
          "if redis.call('hsetnx', KEYS[i], ARGV[i + 1], 1) >= 0 then")],
        "a renewal that revives a lost lock: a flushed holder goes on beside the next one",
        "--flavors reentrant --faults flushall --hold-ms 2000,6000 --seconds 12"),
    # The release tells the waiter behind the head, which takes the lock
    # (`run`'s fair lock is fenced: its waiters are told, not granted).
    # Revealed by the FIFO check, in histories without faults (a fault in a
    # wait leaves that wait's order unjudged).
    "fair-release-skips-head": (
        [("fair_lock_unlock",
          "if grants ~= nil then redis.call('hdel', grants, ARGV[3]) end\npass_on(queue, head, now, ARGV[6], ARGV[1])",
          "if grants ~= nil then redis.call('hdel', grants, ARGV[3]) end\n"
          "pass_on(queue, redis.call('lindex', KEYS[2], 1) or head, now, ARGV[6], ARGV[1])"),
         ("fair_lock_acquire", "(free and (head == false or head == ARGV[2]))",
          "(free and (head == false or head == ARGV[2] or redis.call('lindex', KEYS[2], 1) == ARGV[2]))")],
        "a fair release that skips the head: the waiter behind it is served first",
        "--flavors fair --faults none"),
}


def apply_mutant(name: str, script: str, text: str) -> str:
    """`text` of `script` with mutant `name`'s edits of this script applied."""
    for target, old, new in MUTANTS[name][0]:
        if script != target:
            continue
        if old not in text:
            sys.exit(f"embed_lua: mutant {name}: its text is no longer in {script}.lua")
        text = text.replace(old, new, 1)
    return text


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mutant", default="", help="apply one of MUTANTS (tests only)")
    parser.add_argument("--mutant-soak", default="",
                        help="print the soak.py arguments that draw what reveals a mutant (its flavor, its faults)")
    parser.add_argument("--self-test", action="store_true", help="check the include expansion on made-up scripts")
    parser.add_argument("--header")
    parser.add_argument("--source")
    parser.add_argument("scripts", nargs="*")
    options = parser.parse_args()
    if options.self_test:
        return self_test()
    for mutant in (options.mutant, options.mutant_soak):
        if mutant and mutant not in MUTANTS:
            parser.error(f"unknown mutant {mutant!r}; known: {', '.join(sorted(MUTANTS))}")
    if options.mutant_soak:
        print(MUTANTS[options.mutant_soak][2])
        return 0
    if not options.header or not options.source or not options.scripts:
        parser.error("--header, --source and at least one script are required")

    scripts = []
    for path in sorted(options.scripts, key=os.path.basename):
        name = os.path.basename(path)[: -len(".lua")]
        if not IDENTIFIER.match(name):
            sys.exit(f"embed_lua: {path}: script names must be lower_snake_case identifiers")
        with open(path, "rb") as handle:
            text = expand_includes(path, handle.read().decode("utf-8"))
        if options.mutant:
            text = apply_mutant(options.mutant, name, text)
        body = text.encode("utf-8")
        if f"){DELIMITER}\"" in text:
            sys.exit(f"embed_lua: {path}: contains the raw-string delimiter")
        scripts.append((name, text, hashlib.sha1(body).hexdigest()))

    with open(options.header, "w", encoding="utf-8") as out:
        out.write("// Generated by tools/embed_lua.py from lua/*.lua. Do not edit.\n")
        out.write("#pragma once\n\n#include \"turnstile/script.h\"\n\n")
        out.write("namespace turnstile::scripts {\n\n")
        for name, _, _ in scripts:
            out.write(f"extern const Script {name};\n")
        out.write("\n}  // namespace turnstile::scripts\n")

    with open(options.source, "w", encoding="utf-8") as out:
        out.write("// Generated by tools/embed_lua.py from lua/*.lua. Do not edit.\n")
        out.write("#include \"lua_scripts.h\"\n\n#include <algorithm>\n#include <array>\n\n")
        out.write("namespace turnstile {\nnamespace scripts {\n\n")
        for name, text, sha in scripts:
            out.write(f"const Script {name}{{\"{name}\",\n    R\"{DELIMITER}({text}){DELIMITER}\",\n"
                      f"    \"{sha}\"}};\n\n")
        out.write("}  // namespace scripts\n\nnamespace {\n")
        out.write(f"const std::array<const Script*, {len(scripts)}> kAll{{\n")
        for name, _, _ in scripts:
            out.write(f"    &scripts::{name},\n")
        out.write("};\n}  // namespace\n\n")
        out.write("std::span<const Script* const> embedded_scripts() { return kAll; }\n\n")
        out.write("const Script* find_embedded_script(std::string_view name) {\n"
                  "  auto it = std::lower_bound(kAll.begin(), kAll.end(), name,\n"
                  "      [](const Script* script, std::string_view key) { return script->name < key; });\n"
                  "  return it != kAll.end() && (*it)->name == name ? *it : nullptr;\n}\n\n")
        out.write("}  // namespace turnstile\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
