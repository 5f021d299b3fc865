#!/usr/bin/env python3
"""Runs benchmarks/run in its quick mode (BENCH_QUICK=1: a tiny grid of
every measurement benchmarks/report.py reads) and checks what it wrote, so
the harness of `./dev bench` is tested on every test run while its figures
are measured only for the record.

Input:  the source root and a build directory holding the benchmark
        programs (contention_benchmark, read_write_benchmark,
        watchdog_benchmark, sim_benchmark); redis-server and
        redis-benchmark on the PATH (the programs start their own server).
Output: exit status 0 if the run succeeded, its RESULTS.md holds issue
        #33's goals table and the shape sections, every series of rows is
        there with script calls per acquisition and no workload error, the
        charts were written and the committed benchmarks/RESULTS.md was
        left alone; else 1, naming what is missing.

  check_harness.py <source-root> <build-dir>
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SECTIONS = [
    "## Goals (issue #33): the shapes deployments have",
    "## Processes × threads on one key (redis-server)",
    "## Fair lock: queue length (redis-server)",
    "## Held locks: the watchdog's renewal tick (redis-server)",
    "## Crowds: acquisitions waiting at once in one process (redis-server)",
    "## Forced-handoff gap against its floor, round by round",
    "## Processes × threads against a paired ceiling, round by round",
]
# The quick grid of contention_benchmark (--grid=quick).
EXPECTED_ROWS = {
    ("grid", 1, 2, None), ("grid", 2, 2, "process"), ("grid", 2, 2, "fleet"),
    ("fair_queue", 1, 1, None), ("fair_queue", 1, 4, None),
}


def main():
    source, build = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    committed = source / "benchmarks" / "RESULTS.md"
    before = committed.read_bytes() if committed.exists() else None
    problems = []
    with tempfile.TemporaryDirectory(prefix="bench-quick-") as report_dir:
        env = dict(os.environ, BENCH_QUICK="1", BENCH_OUTPUT_DIR=report_dir)
        run = subprocess.run([str(source / "benchmarks" / "run"), str(build)], cwd=source, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=800)
        print(run.stdout[-20000:])
        if run.returncode != 0:
            print(f"check_harness: benchmarks/run exited with {run.returncode}")
            return 1
        results = Path(report_dir) / "RESULTS.md"
        text = results.read_text() if results.exists() else ""
        problems += [f"RESULTS.md lacks '{section}'" for section in SECTIONS if section not in text]
        for chart in ("handoff_gap.svg", "throughput.svg", "shapes.svg"):
            path = Path(report_dir) / chart
            if not path.exists() or "<polyline" not in path.read_text():
                problems.append(f"{chart} was not written with a curve")
        lines = [json.loads(line) for line in (build / "bench-quick-results" / "contention.jsonl").read_text().splitlines()
                 if line.strip()]
        rows = [l for l in lines if l.get("kind") == "workload" and l["backend"] == "redis"]
        seen = {(l.get("series"), l["processes"], l["threads"], l.get("wake_scope")) for l in rows}
        problems += [f"no row {row} in contention.jsonl" for row in sorted(EXPECTED_ROWS - seen, key=str)]
        for line in rows:
            what = f"{line.get('series')} {line['flavor']} {line['processes']}x{line['threads']}"
            if line.get("errors"):
                problems.append(f"{what}: {line['errors']} error(s), the first: {line.get('first_error')}")
            if line["acquisitions"] > 0 and "evalsha" not in (line.get("redis_commands_per_acquisition") or {}):
                problems.append(f"{what}: no script calls per acquisition")
            if line["acquisitions"] > 0 and line.get("redis_cpu_us_per_acquisition") is None:
                problems.append(f"{what}: no Redis CPU per acquisition")
        if not any(l.get("kind") == "ceiling" for l in lines):
            problems.append("no EVALSHA ceiling measured in the run")
        uncontended = [l for l in rows if l.get("series") == "threads" and l["processes"] * l["threads"] == 1
                       and not l.get("forced_handoff")]
        if not uncontended or any(not l.get("paired_blocking_evalsha_1_per_s") for l in uncontended):
            problems.append("an uncontended row lacks its blocking client's ceiling (blocking_client_rate)")
        if "the same EVALSHA sent from one blocking hiredis connection" not in text:
            problems.append("RESULTS.md lacks the blocking client's ceiling")
        # The flavors' titles come from the flavor table (report.flavor_titles).
        problems += [f"RESULTS.md never names the {title}" for title in ("crash-safe semaphore", "token lock")
                     if title not in text]
        if "| watchdog: 100,000 held locks" not in text:
            problems.append("the goals table lacks the held-locks goal")
    after = committed.read_bytes() if committed.exists() else None
    if before != after:
        problems.append("the quick mode rewrote the committed benchmarks/RESULTS.md")
    for problem in problems:
        print(f"check_harness: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
