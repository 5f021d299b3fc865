#!/usr/bin/env python3
"""The public API is the contract: headers without machinery, libraries
exporting the public API and nothing else.

  check_exports.py SOURCE_ROOT LIBRARY...

Headers: no public or protected member of a class in include/turnstile/
names a detail:: type (constructors included: a handle is made by the
library, never from its internals); friend declarations and private
members may.

Symbols:
Both libraries are built with hidden visibility; what include/turnstile/
marks TURNSTILE_EXPORT is exported (turnstile/export.h). This reads each
LIBRARY's dynamic symbol table (`nm -D --defined-only -C`) and fails, naming
the symbol, when an exported symbol

  * names an internal namespace anywhere in it (turnstile::detail::,
    turnstile::redis::, turnstile::cli::, turnstile::sim::scenarios::, ...),
    also inside a template argument, or
  * is turnstile::NAME or turnstile::sim::NAME (a function, a class's
    member, its vtable or typeinfo) where NAME is declared in no public
    header (include/turnstile/**.h, or version.h.in, which Meson
    configures into turnstile/version.h).

It prints how many symbols each library exports (functions: T/W/i, data:
D/B/R/V/u). Exit status 0 when every exported symbol is public, 1
otherwise.
"""

import os
import re
import subprocess
import sys

# Namespaces of the implementation: never part of the ABI.
INTERNAL_NAMESPACES = (
    "turnstile::detail::",
    "turnstile::redis::",
    "turnstile::cli::",
    "turnstile::sim::detail::",
    "turnstile::sim::scenarios::",
    "turnstile::sim::redis_errors::",
    "turnstile::sim::redlock_scenarios::",
)

# What the C++ ABI puts before a class's special symbols.
SPECIAL_PREFIXES = (
    "typeinfo name for ",
    "typeinfo for ",
    "vtable for ",
    "VTT for ",
    "construction vtable for ",
    "guard variable for ",
    "non-virtual thunk to ",
    "virtual thunk to ",
    "covariant return thunk to ",
)

FUNCTION_TYPES = set("TtWwi")


def public_names(root):
    """Every identifier a public header declares at namespace scope or in a class."""
    names = set()
    include_dir = os.path.join(root, "include", "turnstile")
    for directory, _, files in os.walk(include_dir):
        for name in files:
            # version.h.in: turnstile/version.h before Meson configures it.
            if not name.endswith((".h", ".h.in")):
                continue
            with open(os.path.join(directory, name), encoding="utf-8") as header:
                text = header.read()
            text = re.sub(r"//[^\n]*", "", text)
            names.update(re.findall(r"\b(?:class|struct|enum class|using)\s+(?:TURNSTILE_EXPORT\s+)?(\w+)", text))
            names.update(re.findall(r"\b(\w+)\s*\(", text))
            names.update(re.findall(r"\b(k[A-Z]\w+)\b", text))
    return names


def leading_name(symbol):
    """NAME of a symbol turnstile::NAME... or turnstile::sim::NAME..., else None."""
    for prefix in SPECIAL_PREFIXES:
        if symbol.startswith(prefix):
            symbol = symbol[len(prefix):]
            break
    match = re.match(r"turnstile::(?:sim::)?(\w+)", symbol)
    return match.group(1) if match else None


def exported_symbols(library):
    result = subprocess.run(["nm", "-D", "--defined-only", "-C", library], capture_output=True, text=True, check=True)
    for line in result.stdout.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3:
            yield parts[1], parts[2]


def problem_of(symbol, names):
    """Why `symbol` must not be exported, or None."""
    internal = next((ns for ns in INTERNAL_NAMESPACES if ns in symbol), None)
    if internal:
        return f"exports {symbol} (internal namespace {internal[:-2]})"
    name = leading_name(symbol)
    if name is not None and name not in names:
        return f"exports {symbol} ({name} is in no public header)"
    return None


def self_test(names):
    """The check itself can fail: symbols it must refuse and accept."""
    refused = [
        "turnstile::detail::LockEngine::unlock()",
        "vtable for turnstile::detail::FairEngine",
        "std::_Sp_counted_ptr_inplace<turnstile::redis::Node, std::allocator<void>>::_M_dispose()",
        "turnstile::sim::FakeRedisServerThatIsNotPublic::run()",
        "typeinfo for turnstile::NoSuchPublicClass",
    ]
    accepted = [
        "turnstile::Lock::unlock()",
        "typeinfo for turnstile::NotOwnerError",
        "turnstile::sim::World::run_for(std::chrono::duration<long, std::ratio<1l, 1000000000l> >)",
        "std::vector<turnstile::Reply, std::allocator<turnstile::Reply> >::~vector()",
    ]
    wrong = [s for s in refused if problem_of(s, names) is None]
    wrong += [s for s in accepted if problem_of(s, names) is not None]
    header = ("namespace x {\nclass A {\n public:\n  A(std::shared_ptr<detail::Core> core);\n"
              "  int f() {\n    return detail::g();\n  }\n private:\n  detail::Core* core_;\n};\n}\n")
    if len(header_problems("a.h", header)) != 1:
        wrong.append("a public constructor taking detail::Core (and nothing else)")
    for symbol in wrong:
        print(f"check_exports: self-test judged wrongly: {symbol}")
    return not wrong


def header_problems(path, text):
    """Public or protected member declarations of `text` (a header) that name detail::.

    Only lines at a class body's own depth are member declarations; the
    bodies of inline member functions are implementation and may use
    detail:: (a template's machinery).
    """
    problems = []
    access = None
    class_depth = None  # brace depth inside the class body being read
    depth = 0
    for number, line in enumerate(text.splitlines(), 1):
        code = re.sub(r"//.*", "", line)
        opened = re.match(r"^(class|struct) [^;]*\{", code)
        at_member_depth = class_depth is not None and depth == class_depth
        if opened:
            access = "private" if opened.group(1) == "class" else "public"
            class_depth = depth + 1
            at_member_depth = False
        label = re.match(r"^\s*(public|protected|private):", code)
        if label and at_member_depth:
            access = label.group(1)
        if (at_member_depth and access in ("public", "protected") and "detail::" in code
                and not re.match(r"^\s*friend\b", code)):
            problems.append(f"{path}:{number}: a {access} member names detail::: {code.strip()}")
        depth += code.count("{") - code.count("}")
        if re.match(r"^\};", code):
            access = None
            class_depth = None
    return problems


def public_header_problems(root):
    problems = []
    include_dir = os.path.join(root, "include", "turnstile")
    for directory, _, files in os.walk(include_dir):
        for name in sorted(files):
            if name.endswith(".h"):
                path = os.path.join(directory, name)
                with open(path, encoding="utf-8") as header:
                    problems += header_problems(os.path.relpath(path, root), header.read())
    return problems


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    root, libraries = sys.argv[1], sys.argv[2:]
    names = public_names(root)
    if not self_test(names):
        return 1
    problems = public_header_problems(root)
    for library in libraries:
        functions = data = 0
        for kind, symbol in exported_symbols(library):
            if kind in FUNCTION_TYPES:
                functions += 1
            else:
                data += 1
            problem = problem_of(symbol, names)
            if problem:
                problems.append(f"{os.path.basename(library)}: {problem}")
        print(f"check_exports: {os.path.basename(library)}: {functions} functions, {data} data symbols exported")
    for problem in problems:
        print(f"check_exports: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
