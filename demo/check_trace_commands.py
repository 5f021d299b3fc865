#!/usr/bin/env python3
"""`turnstile sim --trace FILE --trace-commands`: the trace has the calls.

Input:  the turnstile CLI, a scratch path for the trace.
Output: exit 0 if the scenario ran, the trace parses as JSON, and it has
        command spans ('b'/'e' pairs of category "command" on the clients'
        tracks) naming lock scripts with their keys and reply kinds, and
        without --trace-commands none; else 1 with the reason.
"""
import json
import os
import subprocess
import sys


def trace_of(cli: str, path: str, commands: bool) -> dict:
    args = [cli, "sim", "--scenario", "gc-pause", "--seed", "7", "--trace", path]
    if commands:
        args.append("--trace-commands")
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    with open(path, encoding="utf-8") as handle:
        trace = json.load(handle)
    os.remove(path)
    return trace


def main() -> int:
    cli, path = sys.argv[1], sys.argv[2]
    events = trace_of(cli, path, commands=True)["traceEvents"]
    begun = {e["id"]: e for e in events if e["ph"] == "b"}
    ended = {e["id"] for e in events if e["ph"] == "e"}
    failures = []
    if not begun:
        failures.append("no command spans")
    if set(begun) != ended:
        failures.append(f"{len(set(begun) ^ ended)} spans begun and not ended (or the other way)")
    scripts = [e for e in begun.values() if e["args"].get("kind") == "script"]
    if not any(e["name"].endswith("_acquire") and e["args"].get("keys") for e in scripts):
        failures.append("no acquire script span with its keys")
    if not all(e["cat"] == "command" and e["args"].get("reply") and e["tid"] > 0 for e in begun.values()):
        failures.append("a span without its category, reply kind or client track")
    plain = trace_of(cli, path, commands=False)["traceEvents"]
    if any(e["ph"] in ("b", "e") for e in plain):
        failures.append("command spans without --trace-commands")
    for failure in failures:
        print(f"check_trace_commands: {failure}", file=sys.stderr)
    if not failures:
        print(f"check_trace_commands: {len(begun)} command spans, {len(scripts)} of scripts")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
