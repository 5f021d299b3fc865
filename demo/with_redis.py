#!/usr/bin/env python3
"""Runs a command against a throwaway redis-server on a free loopback port.

    with_redis.py PROGRAM [ARGS...]

Starts redis-server (no persistence) on 127.0.0.1 at a port the OS picked,
runs PROGRAM with redis://127.0.0.1:PORT as its first argument, stops the
server by its PID and exits with PROGRAM's status (77, Meson's "skipped",
if there is no redis-server).
"""

import shutil
import socket
import subprocess
import sys
import time

STARTUP_PATIENCE_S = 20  # a hang guard: the server is waited for, not timed


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_listening(port, server):
    deadline = time.monotonic() + STARTUP_PATIENCE_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 64
    redis = shutil.which("redis-server")
    if redis is None:
        print("with_redis.py: no redis-server on PATH", file=sys.stderr)
        return 77
    port = free_port()
    server = subprocess.Popen(
        [redis, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL)
    try:
        if not wait_until_listening(port, server):
            print(f"with_redis.py: redis-server did not listen on {port}", file=sys.stderr)
            return 1
        try:
            return subprocess.run([sys.argv[1], f"redis://127.0.0.1:{port}"] + sys.argv[2:]).returncode
        except OSError as error:
            print(f"with_redis.py: cannot run {sys.argv[1]}: {error.strerror}", file=sys.stderr)
            return 127
    finally:
        server.terminate()  # by the PID we started
        try:
            server.wait(timeout=STARTUP_PATIENCE_S)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


if __name__ == "__main__":
    sys.exit(main())
