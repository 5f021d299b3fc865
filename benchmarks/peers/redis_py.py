"""redis-py's Lock as a peer of turnstile's contention benchmark: the same
two workloads as workload.js (see there and benchmarks/workload.h).

  * uncontended: one thread, one key, acquire+release pairs per second, and
    per pair the server's own CPU (INFO cpu) and the commands it ran (INFO
    commandstats, scripts' commands included), as turnstile's rows;
  * N threads (2, 8, 32) on one key with forced handoff: the holder releases
    only once another thread waits in acquire, and competes again only once
    another thread took the key. Reported: acquisitions per second and the
    handoff gap (release call -> next holder's acquire return), median and
    p99, in microseconds.

redis-py's Lock waits by polling: it sleeps `sleep` seconds between
attempts (default 0.1 s). It is measured twice: with that default, and with
the smallest sleep it accepts, 0 (Lock does not check the value; 0 is a
busy poll that only yields the interpreter lock between attempts).

  python3 redis_py.py <port> [duration-ms]
Prints one JSON object per line on stdout, progress on stderr. Run with
Debian's /usr/bin/python3 and python3-redis (benchmarks/peers/run installs
it).
"""

import json
import sys
import threading
import time

import redis

CONTENDER_COUNTS = [2, 8, 32]
LEASE_S = 30
DEFAULT_SLEEP_S = 0.1   # redis-py's default
SMALLEST_SLEEP_S = 0.0  # the smallest value Lock accepts
# How long the holder waits for a waiter before releasing anyway.
FORCED_HANDOFF_WAIT_S = 0.5


def percentile(samples, fraction):
    if not samples:
        return 0
    ordered = sorted(samples)
    return ordered[int(fraction * (len(ordered) - 1))]


def now_us():
    return time.monotonic_ns() / 1000


def server_work(connection):
    """The server's CPU seconds (user + system) and commands run so far, the
    INFO calls themselves left out."""
    cpu = connection.info("cpu")
    stats = connection.info("commandstats")
    commands = sum(stat["calls"] for name, stat in stats.items() if name != "cmdstat_info")
    return cpu["used_cpu_user"] + cpu["used_cpu_sys"], commands


def uncontended(port, key, sleep_s, duration_s):
    connection = redis.Redis(host="127.0.0.1", port=port)
    lock = connection.lock(key, timeout=LEASE_S, sleep=sleep_s)
    pairs = 0
    cpu_before, commands_before = server_work(connection)
    start = time.monotonic()
    end = start + duration_s
    while time.monotonic() < end:
        lock.acquire()
        lock.release()
        pairs += 1
    seconds = time.monotonic() - start
    cpu_after, commands_after = server_work(connection)
    connection.close()
    return {
        "pairs_per_s": pairs / seconds,
        "pairs": pairs,
        "seconds": seconds,
        "redis_cpu_us_per_pair": (cpu_after - cpu_before) * 1e6 / pairs,
        "commands_per_pair": (commands_after - commands_before) / pairs,
    }


def forced_handoff(port, key, contenders, sleep_s, duration_s):
    state = {"holder": -1, "release_call_us": 0.0, "waiting": 0, "acquisitions": 0, "handoffs": 0}
    gaps = []
    changed = threading.Condition()
    start = time.monotonic()
    end = start + duration_s

    def run(me):
        connection = redis.Redis(host="127.0.0.1", port=port)
        lock = connection.lock(key, timeout=LEASE_S, sleep=sleep_s)
        while time.monotonic() < end:
            with changed:
                state["waiting"] += 1
                changed.notify_all()
            lock.acquire()
            acquired_us = now_us()
            with changed:
                state["waiting"] -= 1
                state["acquisitions"] += 1
                if state["holder"] >= 0 and state["holder"] != me:
                    state["handoffs"] += 1
                    gaps.append(acquired_us - state["release_call_us"])
                state["holder"] = me
                changed.notify_all()
                changed.wait_for(lambda: state["waiting"] > 0 or time.monotonic() >= end,
                                 timeout=FORCED_HANDOFF_WAIT_S)
                state["release_call_us"] = now_us()
            lock.release()
            with changed:
                changed.wait_for(lambda: state["holder"] != me or time.monotonic() >= end,
                                 timeout=FORCED_HANDOFF_WAIT_S)
        connection.close()

    threads = [threading.Thread(target=run, args=(me,)) for me in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.monotonic() - start
    acquisitions = state["acquisitions"]
    return {
        "acquisitions": acquisitions,
        "acquisitions_per_s": acquisitions / seconds,
        "handoffs": state["handoffs"],
        "handoff_share": state["handoffs"] / acquisitions if acquisitions else 0,
        "gap_median_us": percentile(gaps, 0.5),
        "gap_p99_us": percentile(gaps, 0.99),
        "gap_samples": len(gaps),
        "seconds": seconds,
    }


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: python3 redis_py.py <port> [duration-ms]")
    port = int(sys.argv[1])
    duration_s = int(sys.argv[2]) / 1000 if len(sys.argv) > 2 else 1.0
    run = 0
    for sleep_s, setting in ((DEFAULT_SLEEP_S, "default sleep 0.1 s"), (SMALLEST_SLEEP_S, "sleep 0")):
        name = f"redis-py Lock ({setting})"
        common = {"kind": "peer", "library": name, "version": redis.__version__, "sleep_s": sleep_s}
        pairs = uncontended(port, f"peers:py:{run}", sleep_s, duration_s)
        run += 1
        print(f"  peer  {name} {redis.__version__} uncontended: {pairs['pairs_per_s']:.0f} pairs/s", file=sys.stderr)
        print(json.dumps({**common, "workload": "uncontended", "contenders": 1, **pairs}), flush=True)
        for contenders in CONTENDER_COUNTS:
            result = forced_handoff(port, f"peers:py:{run}", contenders, sleep_s, duration_s)
            run += 1
            print(f"  peer  {name} {contenders} contenders, forced handoff: "
                  f"{result['acquisitions_per_s']:.0f} acq/s, gap median {result['gap_median_us']:.0f} us "
                  f"p99 {result['gap_p99_us']:.0f} us", file=sys.stderr)
            print(json.dumps({**common, "workload": "forced_handoff", "contenders": contenders, **result}),
                  flush=True)


if __name__ == "__main__":
    main()
