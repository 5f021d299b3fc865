#!/usr/bin/env python3
"""The code in the docs, compiled by the test suite.

A fenced ```cpp block of README.md or docs/*.md is a full program when it
defines `int main(`. Its first line names it: `// example: NAME` (NAME is
[a-z0-9_]+, unique across the docs). tests/docs/meson.build lists every
example by name and compiles it (public headers only).

Every other ```cpp block of a document is a fragment: `fragments` writes
them all into one translation unit, each the body of a function of its
own (a coroutine of Boost.Asio's when it has co_await, compiled where
Boost.Asio has coroutines), its #include lines
hoisted, after PRELUDE, which declares what the fragments take as given
(`client`, `lock`, ...). A fragment that cannot compile says why on its
first line: `// not compiled: WHY`.

  doc_examples.py extract DOC NAME OUT   writes example NAME of DOC to OUT
  doc_examples.py fragments DOC PRELUDE OUT
                                        writes DOC's fragments to OUT
  doc_examples.py check ROOT NAME...    every full program is named and
                                        listed, every listed name exists
  doc_examples.py --self-test           checks this checker
"""
import os
import re
import sys

FENCE = re.compile(r"^```(\w*)\s*$")
NAME_LINE = re.compile(r"^// example: ([a-z0-9_]+)\s*$")
MAIN = re.compile(r"\bint\s+main\s*\(")


def code_blocks(text):
    """Yields (first line number, info string, body) of every fenced block."""
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        start = index + 1
        index = start
        while index < len(lines) and lines[index].strip() != "```":
            index += 1
        yield start + 1, opening.group(1), "\n".join(lines[start:index]) + "\n"
        index += 1


def examples(path, text):
    """Returns ({name: body}, [problems]) for one document."""
    found, problems = {}, []
    for line, info, body in code_blocks(text):
        if info not in ("cpp", "c++") or not MAIN.search(body):
            continue
        first = body.split("\n", 1)[0]
        named = NAME_LINE.match(first)
        if not named:
            problems.append(f"{path}:{line}: a full program without a '// example: NAME' first line")
            continue
        if named.group(1) in found:
            problems.append(f"{path}:{line}: example '{named.group(1)}' named twice")
        found[named.group(1)] = body
    return found, problems


def fragments(text):
    """Returns [(first line number, body)] of the fragments of one document."""
    found = []
    for line, info, body in code_blocks(text):
        if info not in ("cpp", "c++") or MAIN.search(body):
            continue
        if body.startswith("// not compiled:"):
            continue
        found.append((line, body))
    return found


def fragments_unit(document, prelude, text):
    """One translation unit holding every fragment of `text`."""
    includes, functions = [], []
    for line, body in fragments(text):
        kept = []
        for code in body.split("\n"):
            if code.startswith("#include"):
                includes.append(code)
            else:
                kept.append(code)
        inner = "\n".join("  " + code if code else code for code in kept).rstrip() + "\n"
        coroutine = "co_await" in body
        kind = "boost::asio::awaitable<void>" if coroutine else "void"
        function = f"// {document}:{line}\n[[maybe_unused]] {kind} fragment_{line}() {{\n{inner}}}\n"
        if coroutine:
            # Where Boost.Asio has coroutines (not with clang and Boost 1.74).
            function = "#if defined(BOOST_ASIO_HAS_CO_AWAIT)\n" + function + "#endif\n"
        functions.append(function)
    out = [f"// The fragments of {document}, extracted by tools/doc_examples.py: edit them there.\n",
           "// Unused names are a fragment's nature, not a defect: not warned about here.\n",
           "#pragma GCC diagnostic ignored \"-Wunused-variable\"\n",
           "#pragma GCC diagnostic ignored \"-Wunused-but-set-variable\"\n",
           f"#include \"{prelude}\"\n"]
    out += [include + "\n" for include in dict.fromkeys(includes)]
    out.append("\nnamespace doc_fragments {\n\n")
    out += [function + "\n" for function in functions]
    out.append("}  // namespace doc_fragments\n")
    return "".join(out), len(functions)


def documents(root):
    names = ["README.md"]
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        names += sorted("docs/" + n for n in os.listdir(docs) if n.endswith(".md"))
    return names


def check(root, listed):
    seen, problems = {}, []
    for name in documents(root):
        with open(os.path.join(root, name), encoding="utf-8") as f:
            found, trouble = examples(name, f.read())
        problems += trouble
        for example in found:
            if example in seen:
                problems.append(f"{name}: example '{example}' also in {seen[example]}")
            seen[example] = name
    for example in sorted(set(seen) - set(listed)):
        problems.append(f"{seen[example]}: example '{example}' is not listed in tests/docs/meson.build")
    for example in sorted(set(listed) - set(seen)):
        problems.append(f"tests/docs/meson.build lists example '{example}', which no doc has")
    return problems


def self_test():
    text = ("x\n```cpp\n// example: a\nint main() {}\n```\n"
            "```cpp\nint main() { return 1; }\n```\n"
            "```cpp\nfragment();\n```\n"
            "```sh\nint main(\n```\n")
    found, problems = examples("d.md", text)
    assert list(found) == ["a"], found
    assert found["a"] == "// example: a\nint main() {}\n", found
    assert problems == ["d.md:7: a full program without a '// example: NAME' first line"], problems
    _, twice = examples("d.md", "```cpp\n// example: a\nint main();\n```\n```cpp\n// example: a\nint main();\n```\n")
    assert twice == ["d.md:6: example 'a' named twice"], twice
    unit, count = fragments_unit("d.md", "p.h", "```cpp\n#include <x>\nf();\n```\n"
                                 "```cpp\n// not compiled: a sketch\ng();\n```\n"
                                 "```cpp\nco_await h();\n```\n```cpp\nif (x) { y(); }\n```\n" + text)
    assert count == 4, unit
    assert "#include <x>\n" in unit and "void fragment_2() {\n  f();\n}" in unit, unit
    assert "boost::asio::awaitable<void> fragment_" in unit and "g();" not in unit, unit
    print("doc_examples self-test: ok")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) == 5 and argv[1] == "extract":
        with open(argv[2], encoding="utf-8") as f:
            found, problems = examples(argv[2], f.read())
        if argv[3] not in found:
            print(f"{argv[2]}: no example '{argv[3]}'", file=sys.stderr)
            return 1
        with open(argv[4], "w", encoding="utf-8") as out:
            out.write(f"// Extracted from {os.path.basename(argv[2])} by tools/doc_examples.py: edit it there.\n")
            out.write(found[argv[3]])
        return 0
    if len(argv) == 5 and argv[1] == "fragments":
        with open(argv[2], encoding="utf-8") as f:
            unit, count = fragments_unit(os.path.basename(argv[2]), argv[3], f.read())
        if count == 0:
            print(f"{argv[2]}: no fragment to compile", file=sys.stderr)
            return 1
        with open(argv[4], "w", encoding="utf-8") as out:
            out.write(unit)
        return 0
    if len(argv) >= 3 and argv[1] == "check":
        problems = check(argv[2], argv[3:])
        for problem in problems:
            print(problem, file=sys.stderr)
        print(f"doc examples: {len(argv) - 3} listed, {len(problems)} problems")
        return 1 if problems else 0
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
