#!/usr/bin/env python3
"""Measures what the fake Redis's default virtual costs are made of.

Starts a throwaway redis-server on a free loopback port (no persistence),
runs redis-benchmark (one connection, so the numbers are the server's own
service time per call, not queueing) on a plain command, on a calibration
script with 0 and 100 redis.call each, and on two of our lock scripts, then
reads `INFO commandstats` (usec_per_call). Prints:

  command_us             usec_per_call of GET (a plain command)
  script_base_us         a script that calls nothing (EVALSHA's own cost)
  script_per_call_us     (100 calls - 0 calls) / 100
  reentrant_acquire_us   lua/reentrant_lock_acquire.lua, reentrant success
  reentrant_refused_us   the same script, lock held by another owner

The fake's defaults (src/fake_redis/server.h, ServerCosts) round these;
docs/simulation.md has the numbers of the last measurement. Usage:

  python3 tools/measure_fake_cost.py [--requests N]
"""

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from embed_lua import expand_includes  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cli(port: int, *args: str) -> str:
    return subprocess.run(["redis-cli", "-p", str(port), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def script(name: str) -> str:
    path = os.path.join(ROOT, "lua", name)
    with open(path, encoding="utf-8") as handle:
        return expand_includes(path, handle.read())


def usec_per_call(port: int, requests: int, argv: list, command: str) -> float:
    cli(port, "CONFIG", "RESETSTAT")
    subprocess.run(["redis-benchmark", "-p", str(port), "-c", "1", "-n", str(requests), "-q", *argv], check=True,
                   capture_output=True)
    stats = cli(port, "INFO", "commandstats")
    found = re.search(r"^cmdstat_" + command + r":.*usec_per_call=([0-9.]+)", stats, re.MULTILINE)
    if found is None:
        raise SystemExit("no commandstats for " + command)
    return float(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=100000)
    options = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as workdir:
        server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                   "--appendonly", "no", "--dir", workdir], stdout=subprocess.DEVNULL)
        try:
            for _ in range(100):
                try:
                    if cli(port, "PING") == "PONG":
                        break
                except subprocess.CalledProcessError:
                    pass
                time.sleep(0.05)
            cli(port, "SET", "k", "v")
            loop = "for i = 1, tonumber(ARGV[1]) do redis.call('get', KEYS[1]) end return 0"
            loop_sha = cli(port, "SCRIPT", "LOAD", loop)
            acquire_sha = cli(port, "SCRIPT", "LOAD", script("reentrant_lock_acquire.lua"))
            results = {}
            requests = options.requests
            results["command_us"] = usec_per_call(port, requests, ["GET", "k"], "get")
            zero = usec_per_call(port, requests, ["EVALSHA", loop_sha, "1", "k", "0"], "evalsha")
            hundred = usec_per_call(port, requests // 10, ["EVALSHA", loop_sha, "1", "k", "100"], "evalsha")
            results["script_base_us"] = zero
            results["script_per_call_us"] = (hundred - zero) / 100
            lock = ["{l}", "{l}:identity"]
            results["reentrant_acquire_us"] = usec_per_call(
                port, requests, ["EVALSHA", acquire_sha, "2", *lock, "30000", "me:1", "1", "id"], "evalsha")
            cli(port, "DEL", "{l}")
            cli(port, "HSET", "{l}", "other:1", "1")
            cli(port, "PEXPIRE", "{l}", "100000000")
            results["reentrant_refused_us"] = usec_per_call(
                port, requests, ["EVALSHA", acquire_sha, "2", *lock, "30000", "me:1", "0", "id"], "evalsha")
        finally:
            server.terminate()
            server.wait(timeout=10)
    for name, value in results.items():
        print(f"{name} {value:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
