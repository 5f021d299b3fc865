#!/usr/bin/env python3
"""The command a history's client runs under `turnstile run` (issue #54).

  critical_section.py HISTORY CLIENT HOLD HOLD_MS

Appends "act" events to HISTORY (one JSON line each, O_APPEND, so lines of
concurrent processes never interleave): a start, a tick every TICK_MS while
it holds, an end; each with its fencing token (TURNSTILE_FENCING_TOKEN, if
the lock has one) and CLOCK_MONOTONIC, one clock for every process here. A
process killed under the lock simply stops acting: its last act is the
last thing it did.
"""

import json
import os
import sys
import time

TICK_MS = 20


def main() -> int:
    history, client, hold, hold_ms = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    name = os.environ.get("TURNSTILE_LOCK_NAME", "")
    token_text = os.environ.get("TURNSTILE_FENCING_TOKEN", "")
    token = int(token_text) if token_text else None
    fd = os.open(history, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def act(step: str) -> None:
        line = json.dumps({"t": time.monotonic_ns(), "kind": "act", "client": client, "name": name,
                           "hold": hold, "token": token, "step": step, "pid": os.getpid()})
        os.write(fd, (line + "\n").encode())

    act("start")
    deadline = time.monotonic() + hold_ms / 1000
    while time.monotonic() < deadline:
        time.sleep(min(TICK_MS / 1000, max(0.0, deadline - time.monotonic())))
        act("tick")
    act("end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
