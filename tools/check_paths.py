#!/usr/bin/env python3
"""Every repository path a doc or a comment names exists.

  check_paths.py SOURCE_ROOT     check the repository
  check_paths.py --self-test     check the checker on a made-up repository

Reads README.md and docs/*.md whole, and the comments of the sources and
build files under the directories in TOP_DIRECTORIES plus the top-level
meson.build and meson_options.txt (C and C++ `//` and `/* */`, Lua `--`,
Python, Meson and shell `#`; Python's comments and docstrings are told
apart from its strings by its own tokenizer). In that text a repository path is:

  * a token that starts with one of TOP_DIRECTORIES and a slash, not glued
    to a preceding letter, digit, '.', '/' or '-' (so build-fuzz/fuzz/x or
    turnstile/sim/world.h are not taken for one), made of letters, digits
    and `_ . - / * ? { ,}`: `src/locks/engine/watchdog.cpp`, `lua/*.lua`,
    `tests/{core,sim}/meson.build`, `.ci/run`; trailing `.`, `,` and `:`
    are sentence punctuation, not part of it; `{a,b}` is expanded, and
    `*`, `?` are globs that must match at least one path; a last name
    without a dot may name a module by its stem (tests/support/tcp_proxy
    for tcp_proxy.h and .cpp);
  * a glob on a file name alone, `*` then a suffix with a dot
    (`*_status.lua`, `*_test.cpp`): some file of the repository must match.

A path exists if it is a file or a directory of SOURCE_ROOT (build
directories and hidden ones other than .ci are not searched). Prints
file:line and the path for each one that does not, and exits 1 if any.
"""

import argparse
import fnmatch
import glob
import io
import os
import re
import sys
import tempfile
import tokenize

TOP_DIRECTORIES = (".ci", "benchmarks", "cmake", "demo", "docs", "fuzz", "include", "lua", "src", "tests", "tools")

# Top-level files whose comments are read besides TOP_DIRECTORIES' files.
TOP_FILES = ("meson.build", "meson_options.txt")

# How each kind of file writes its comments.
C_LIKE = (".h", ".hpp", ".cpp", ".cc", ".c", ".h.in")
HASH_COMMENTS = (".py", ".sh", ".txt", ".cmake.in", ".dict")
HASH_COMMENT_NAMES = ("meson.build", "meson_options.txt", "run")
LUA = (".lua",)

PATH_TOKEN = re.compile(
    r"(?<![\w./-])((?:" + "|".join(re.escape(top) for top in TOP_DIRECTORIES) + r")/[\w.*?{},/-]*)"
)
NAME_GLOB = re.compile(r"(?<![\w./-])(\*[\w-]*\.[A-Za-z][\w.]*)")
C_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
HASH_COMMENT = re.compile(r"#[^\n]*")
LUA_COMMENT = re.compile(r"--\[\[.*?\]\]|--[^\n]*", re.DOTALL)


def comment_syntax(path):
    name = os.path.basename(path)
    if name.endswith(C_LIKE):
        return C_COMMENT
    if name.endswith(LUA):
        return LUA_COMMENT
    if name.endswith(HASH_COMMENTS) or name in HASH_COMMENT_NAMES:
        return HASH_COMMENT
    if name.endswith(".md"):
        return None  # read whole
    return False  # not read


def searched_files(root):
    """Repository-relative paths of every file and directory, skipping build
    directories and hidden ones (but .ci)."""
    found = set()
    for directory, subdirs, files in os.walk(root):
        relative_directory = os.path.relpath(directory, root)
        subdirs[:] = sorted(
            d for d in subdirs
            if not (relative_directory == "." and (d.startswith("build") or (d.startswith(".") and d != ".ci")))
            and d not in ("__pycache__",)
        )
        for name in files + subdirs:
            found.add(os.path.normpath(os.path.join(relative_directory, name)))
    return found


def read_text(root):
    """(path, text) of every doc, and of every source with only its comments
    kept (the rest blanked, so line numbers stay)."""
    documents = ["README.md"] + sorted(
        os.path.join("docs", name) for name in os.listdir(os.path.join(root, "docs")) if name.endswith(".md")
    ) if os.path.isdir(os.path.join(root, "docs")) else ["README.md"]
    sources = list(TOP_FILES)
    for top in TOP_DIRECTORIES:
        if top == "docs":
            continue
        for directory, subdirs, files in os.walk(os.path.join(root, top)):
            subdirs.sort()
            for name in sorted(files):
                sources.append(os.path.relpath(os.path.join(directory, name), root))
    for path in documents + sources:
        full = os.path.join(root, path)
        if not os.path.isfile(full):
            continue
        syntax = comment_syntax(path)
        if syntax is False:
            continue
        with open(full, encoding="utf-8", errors="replace") as source:
            text = source.read()
        if path.endswith(".py"):
            text = python_comments(text)
        elif syntax is not None:
            text = keep_comments(text, syntax)
        yield path, text


def keep_comments(text, syntax):
    kept = [c if c == "\n" else " " for c in text]
    for match in syntax.finditer(text):
        kept[match.start():match.end()] = match.group(0)
    return "".join(kept)


def python_comments(text):
    """The comments and docstrings of a Python source, the rest blanked."""
    lines = text.split("\n")
    kept = [[" "] * len(line) for line in lines]
    previous = tokenize.NEWLINE
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            docstring = token.type == tokenize.STRING and previous in (
                tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT)
            if token.type == tokenize.COMMENT or docstring:
                (first_row, first_col), (last_row, last_col) = token.start, token.end
                for row in range(first_row, last_row + 1):
                    begin = first_col if row == first_row else 0
                    end = last_col if row == last_row else len(lines[row - 1])
                    kept[row - 1][begin:end] = lines[row - 1][begin:end]
            if token.type not in (tokenize.COMMENT, tokenize.NL):
                previous = token.type
    except (tokenize.TokenError, SyntaxError):
        return text  # not valid Python: read whole
    return "\n".join("".join(line) for line in kept)


def expand_braces(token):
    match = re.search(r"\{([^{}]*)\}", token)
    if not match:
        return [token]
    expanded = []
    for choice in match.group(1).split(","):
        expanded += expand_braces(token[:match.start()] + choice + token[match.end():])
    return expanded


def exists(root, path):
    full = os.path.join(glob.escape(root), path)
    if any(c in path for c in "*?"):
        return bool(glob.glob(full))
    if os.path.exists(os.path.join(root, path)):
        return True
    stem = os.path.basename(path.rstrip("/"))
    return bool(stem) and "." not in stem and bool(glob.glob(full + ".*"))


def clean(token):
    token = token.rstrip(".,:")  # sentence punctuation; "src/sim/..." is src/sim/
    return token


def check(root):
    problems = []
    names = {os.path.basename(path) for path in searched_files(root)}
    for path, text in read_text(root):
        for number, line in enumerate(text.split("\n"), start=1):
            for match in PATH_TOKEN.finditer(line):
                token = clean(match.group(1))
                if "{" in token and "}" not in token:
                    continue  # a brace list cut by the line's end
                missing = [p for p in expand_braces(token) if not exists(root, p)]
                for candidate in missing:
                    problems.append(f"{path}:{number}: names {candidate}, which does not exist")
            for match in NAME_GLOB.finditer(line):
                pattern = clean(match.group(1))
                if not any(fnmatch.fnmatchcase(name, pattern) for name in names):
                    problems.append(f"{path}:{number}: names {pattern}, which matches no file")
    return problems


def self_test():
    """Builds a small repository with known good and bad references and
    checks that exactly the bad ones are reported."""
    files = {
        "README.md": "See `src/core/a.cpp`, `lua/*.lua`, the `*_status.lua` scripts and\n"
                     "docs/GONE.md. Built in build/src/x and build-fuzz/fuzz/y.\n",
        "docs/ARCHITECTURE.md": "src/{core,sim}/meson.build and src/sim/..., tools/check.py.\n",
        "src/core/a.cpp": "// a.cpp: see src/core/missing.h and include/turnstile/x.h\n"
                          "int f() { return 1; }  // src/core/meson.build\n"
                          "const char* s = \"src/not_a_comment.h\";\n",
        "src/core/meson.build": "# src/core/a.cpp, and tests/{core,gone}/x_test.cpp\n",
        "src/sim/meson.build": "",
        "include/turnstile/x.h": "/* a block comment naming lua/lib/gone.lua\n   over lines */\n",
        "lua/lock_status.lua": "-- reads *_nothing.lua and lua/lock_status.lua\n",
        "tests/core/x_test.cpp": "",
        "tools/check.py": "# *.py files; see tests/core/x_test and tools/gone\n"
                          "FIXTURE = '# src/in_a_string.h'\n",
    }
    expected = {
        "README.md:2: names docs/GONE.md, which does not exist",
        "src/core/a.cpp:1: names src/core/missing.h, which does not exist",
        "src/core/meson.build:1: names tests/gone/x_test.cpp, which does not exist",
        "include/turnstile/x.h:1: names lua/lib/gone.lua, which does not exist",
        "lua/lock_status.lua:1: names *_nothing.lua, which matches no file",
        "tools/check.py:1: names tools/gone, which does not exist",
    }
    with tempfile.TemporaryDirectory() as root:
        for path, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w", encoding="utf-8") as out:
                out.write(text)
        found = set(check(root))
    if found != expected:
        for line in sorted(expected - found):
            print(f"self-test: not reported: {line}")
        for line in sorted(found - expected):
            print(f"self-test: reported wrongly: {line}")
        return 1
    print(f"check_paths: self-test passed ({len(expected)} missing paths found, no false report)")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?")
    parser.add_argument("--self-test", action="store_true")
    options = parser.parse_args()
    if options.self_test:
        return self_test()
    if options.root is None:
        parser.error("SOURCE_ROOT is required (or --self-test)")
    problems = check(options.root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_paths: {len(problems)} path(s) named in docs or comments do not exist "
              "(rules: tools/check_paths.py)")
        return 1
    print("check_paths: every repository path named in docs and comments exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
