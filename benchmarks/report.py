#!/usr/bin/env python3
"""Writes benchmarks/RESULTS.md and three charts (SVG: the handoff gap,
throughput versus contenders beside the EVALSHA ceiling, and the fair
queue-length curve of issue #33's shapes) from the output
benchmarks/run collected: contention.jsonl (contention_benchmark and the
peers, one JSON object per line), read_write.jsonl (read_write_benchmark),
crowd.jsonl (crowd_benchmark) and <program>.json / <program>.txt of the
Google Benchmark programs (deployment_benchmark.txt also carries JSON
lines: the Cluster ÷ single ratio and the cost per acquisition). With
--headline, also rewrites the headline table of docs/benchmarks.md between
the markers HEADLINE_BEGIN and HEADLINE_END from the same run.

  report.py <results-dir> <RESULTS.md> <chart.svg> [--throughput-chart SVG]
            [--shapes-chart SVG] [--headline docs/benchmarks.md] [--elapsed-s N]
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import statistics
import subprocess
from pathlib import Path

GOAL_PAIR_RATIO = 0.85       # uncontended reentrant pairs / (EVALSHA -c 1 / 2)
GOAL_PEER_PAIRS = 1.3        # uncontended reentrant pairs / the better peer's
GOAL_GAP_PINGS = 3.0         # median handoff gap, 8 contenders, in ping round trips
GOAL_PEER_GAP = 5.0          # the better peer's median gap / ours
GOAL_FAIR_HANDOFFS = 0.95    # fair lock, 8 threads, one key: real handoffs
GOAL_SIM_HANDOFFS_PER_S = 100_000
GOAL_CONTENDERS = 8
# Issue #21.
GOAL21_CEILING_RATIO = 0.5       # free-for-all acquisitions/s / (EVALSHA -c 1 / 2)
GOAL21_CONTENDER_COUNTS = [2, 8, 32]
GOAL21_CPU_GROWTH = 2.0          # Redis CPU µs/acquisition at 32 contenders / uncontended
GOAL21_CPU_CONTENDERS = 32
GOAL21_GAP_PINGS = {"reentrant": 3.0, "fair": 4.0}   # forced handoff, 8 contenders
GOAL21_PEER_GAP = 30.0           # the best peer's median gap / ours, every contention level
GOAL21_REDLOCK_NODES = 5
GOAL21_REDLOCK_RATIO = 0.8       # RedLock pairs / the same scripts pipelined to N servers
GOAL21_SIM_WALL_S = {"fair": 0.5, "reentrant": 0.2}  # one virtual hour, 64 clients
GOAL21_FAKE_EVALS_PER_S = 300_000  # script evaluations through the fake's Backend
GOAL21_DEMO_S = 240              # `./dev demo` on a bare Debian 12
# Issue #33: the shapes real deployments have.
GOAL33_CALLS_ONE_PROCESS = 3.0     # script calls per acquisition, 1 process x 64 threads
GOAL33_CALLS = 3.3                 # ... at every processes x threads shape
GOAL33_READ_WRITE_CALLS = 3.5      # read-write lock, write half, 1 x 64 and 8 x 16
GOAL33_CEILING_RATIO = 0.5         # acquisitions/s / (EVALSHA 1 client / 2) at 8 x 16
GOAL33_CEILING_SHAPE = (8, 16)
GOAL33_CPU_GROWTH = 2.0            # Redis CPU per acquisition at a shape / uncontended
GOAL33_SHAPE_FLAVORS = ["token", "reentrant", "counting-semaphore", "semaphore"]
GOAL33_FAIR_FLAT = 2.0             # fair: Redis CPU per acquisition at 1,000 waiters / at 1
GOAL33_FAIR_FLAT_UP_TO = 1000
GOAL33_DRAIN_RATIO = 0.3           # fair: 1,000 and 5,000 waiters, acquisitions/s / ceiling
GOAL33_DRAIN_QUEUES = [1000, 5000]
GOAL33_GAP_FLOOR = {"reentrant": 1.3, "fair": 1.5}  # forced handoff gap / (one-way publish + script)
GOAL33_HELD_LOCKS = 100_000        # renewed on time: a tick within the renewal period
GOAL33_SIM_CPU_S = {"fair": 1.0, "reentrant": 0.3}  # one virtual hour, 64 clients, CPU seconds
# Issue #52: the uncontended floor and a Cluster that scales.
GOAL52_PAIR_RATIO = 0.85               # every flavor's uncontended pairs / (EVALSHA -c 1 / 2)
GOAL52_PAIR_RATIO_CRASH_SAFE = 0.75    # the crash-safe semaphore's
GOAL52_COMMANDS = {"reentrant": 12, "fair": 12, "token": 8}  # Redis commands per uncontended pair
GOAL52_CPU_PEER = "redis-semaphore Mutex"
GOAL52_CPU_OVER_PEER = 1.3             # reentrant Redis CPU per pair / that peer's
GOAL52_CLUSTER_HELD_LOCKS = 100_000  # on a 3-master Cluster, renewed on time
GOAL52_CLUSTER_TICK = 0.3            # tick ÷ renewal period
GOAL52_CLUSTER_RATIO = 0.95          # uncontended pairs/s, Cluster ÷ single (deployment_benchmark)
HEADLINE_BEGIN = "<!-- bench:headline:begin (written by benchmarks/report.py) -->"
HEADLINE_END = "<!-- bench:headline:end -->"
FLAVORS = ["token", "reentrant", "fair", "counting-semaphore", "semaphore"]
GOAL52_FLAVORS = FLAVORS + ["read-write"]  # every flavor with an uncontended row
def flavor_titles(header=Path(__file__).resolve().parent.parent / "include" / "turnstile" / "flavor.h"):
    """Each flavor's name -> its title, read from the flavor table
    (kFlavorTable in include/turnstile/flavor.h): the report calls a flavor
    what the library does. The read-write benchmarks time the write half."""
    text = header.read_text(encoding="utf-8")
    table = text[text.index("kFlavorTable"):]
    titles = dict(re.findall(r'\.name = "([^"]+)",\s*\.title = "([^"]+)"', table))
    if len(titles) != len(re.findall(r"\.flavor = Flavor::", table)):
        raise SystemExit(f"report.py: a row of {header}'s kFlavorTable without .name then .title")
    titles["read-write"] += ", write half"
    return titles


FLAVOR_TITLES = flavor_titles()
GOOGLE_BENCHMARK_PROGRAMS = [
    "lock_benchmark", "semaphore_benchmark", "watchdog_benchmark", "redis_backend_benchmark", "fake_benchmark",
    "sim_benchmark", "deployment_benchmark",
]


def command_output(words):
    try:
        return subprocess.run(words, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def read_lines(path):
    lines = []
    if path.exists():
        for text in path.read_text().splitlines():
            text = text.strip()
            if text.startswith("{"):
                lines.append(json.loads(text))
    return lines


def json_lines_in(path):
    """The JSON objects a program printed on lines of their own among its
    console output (lines that do not parse are skipped)."""
    lines = []
    if path.exists():
        for text in path.read_text().splitlines():
            text = text.strip()
            if text.startswith("{") and text.endswith("}"):
                try:
                    lines.append(json.loads(text))
                except json.JSONDecodeError:
                    pass
    return lines


def fmt(value, digits=0):
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def ratio(value, reference, digits=2):
    if not value or not reference:
        return "–"
    return f"{value / reference:.{digits}f}"


class Results:
    def __init__(self, directory):
        self.lines = read_lines(directory / "contention.jsonl")
        workloads = [l for l in self.lines if l.get("kind") == "workload"]
        # The rows of one process and 1..32 threads ("threads"), and issue
        # #33's shapes: processes x threads ("grid") and fair queue lengths.
        self.workloads = [l for l in workloads if l.get("series", "threads") == "threads"]
        self.grid = [l for l in workloads if l.get("series") == "grid"]
        self.fair_queue = sorted((l for l in workloads if l.get("series") == "fair_queue"),
                                 key=lambda l: l["contenders"])
        self.peers = [l for l in self.lines if l.get("kind") == "peer"]
        self.peers_skipped = next((l["reason"] for l in self.lines if l.get("kind") == "peers_skipped"), None)
        self.peers_versions = next((l for l in self.lines if l.get("kind") == "peers_versions"), {})
        self.budget = next((l for l in self.lines if l.get("kind") == "handoff_budget"), None)
        self.gap_rounds = [l for l in self.lines if l.get("kind") == "gap_round"]
        self.ceiling_rounds = [l for l in self.lines if l.get("kind") == "ceiling_round"]
        self.ping_us = next((l["median_us"] for l in self.lines if l.get("kind") == "ping_round_trip"), None)
        self.ceilings = {(l["command"].split()[0], l["clients"]): l["requests_per_s"]
                         for l in self.lines if l.get("kind") == "ceiling"}
        self.read_mostly = [l for l in read_lines(directory / "read_write.jsonl") if l.get("kind") == "read_mostly"]
        self.crowds = [l for l in read_lines(directory / "crowd.jsonl") if "crowd" in l]
        demo = directory / "demo.json"
        self.demo = json.loads(demo.read_text()) if demo.exists() else None
        # deployment_benchmark's JSON lines, printed beside its summary lines.
        deployment = json_lines_in(directory / "deployment_benchmark.txt")
        self.cluster_ratio = next((l for l in deployment if l.get("kind") == "cluster_ratio"), None)
        self.acquisition_costs = {l["deployment"]: l for l in deployment if l.get("kind") == "acquisition_cost"}
        self.google = {}
        self.console = {}
        for program in GOOGLE_BENCHMARK_PROGRAMS:
            path = directory / f"{program}.json"
            if path.exists() and path.stat().st_size > 0:
                try:
                    self.google[program] = json.loads(path.read_text()).get("benchmarks", [])
                except json.JSONDecodeError:
                    self.google[program] = []
            text = directory / f"{program}.txt"
            if text.exists():
                self.console[program] = text.read_text()

    def workload(self, backend, flavor, contenders, keys=1, forced=False, processes=1):
        for line in self.workloads:
            if (line["backend"], line["flavor"], line["contenders"], line["keys"], line["forced_handoff"],
                    line["processes"]) == (backend, flavor, contenders, keys, forced, processes):
                return line
        return None

    def grid_row(self, flavor, processes, threads, wake_scope=None):
        for line in self.grid:
            if (line["flavor"], line["processes"], line["threads"]) == (flavor, processes, threads) and \
                    (wake_scope is None or line.get("wake_scope") == wake_scope):
                return line
        return None

    def grid_shapes(self):
        return list(dict.fromkeys((l["processes"], l["threads"]) for l in self.grid))

    def watchdog_ticks(self, benchmark="BM_WatchdogTick"):
        """(held locks, run) of watchdog_benchmark's `benchmark` rows
        (BM_WatchdogTick: one server; BM_ClusterWatchdogTick: 3 masters)."""
        rows = []
        for run in self.google.get("watchdog_benchmark", []):
            match = re.match(re.escape(benchmark) + r"/(\d+)/", run.get("name", "") + "/")
            if match and run.get("run_type") != "aggregate":
                rows.append((int(match.group(1)), run))
        return sorted(rows, key=lambda row: row[0])

    def peer(self, library, workload, contenders):
        for line in self.peers:
            if (line["library"], line["workload"], line["contenders"]) == (library, workload, contenders):
                return line
        return None

    def peer_libraries(self):
        return list(dict.fromkeys(line["library"] for line in self.peers))

    def pair_ceiling(self):
        evalsha = self.ceilings.get(("EVALSHA", 1))
        return evalsha / 2 if evalsha else None

    def contention_hours(self):
        """sim_benchmark's simulated hours, the best (least CPU) of each
        label's repetitions: a slow minute on the shared VM only adds."""
        best = {}
        for run in self.google.get("sim_benchmark", []):
            if "ContentionHour" not in run.get("name", "") or run.get("run_type") == "aggregate":
                continue
            label = run.get("label", run["name"])
            if label not in best or run["cpu_time"] < best[label]["cpu_time"]:
                best[label] = run
        return best

    def row_ceiling(self, line):
        """The pair ceiling `line` is compared with: its own round's
        (contention_benchmark's ceiling rounds) where it has one, else the
        run's."""
        paired = line.get("paired_evalsha_1_per_s")
        return paired / 2 if paired else self.pair_ceiling()

    @staticmethod
    def blocking_pair_ceiling(line):
        """The pair ceiling a blocking client allows in `line`'s own rounds
        (the same EVALSHA sent synchronously over one hiredis connection),
        or None if the row has none."""
        blocking = line and line.get("paired_blocking_evalsha_1_per_s")
        return blocking / 2 if blocking else None

    def best_peer_pairs(self):
        rates = [(l["pairs_per_s"], l["library"]) for l in self.peers if l["workload"] == "uncontended"]
        return max(rates) if rates else (None, None)

    def google_run(self, program, name_prefix):
        """The first non-aggregate run of `program` whose name starts with
        `name_prefix` ("BM_RedLockUnlock/5/"), or None."""
        for run in self.google.get(program, []):
            if run.get("run_type") != "aggregate" and run.get("name", "").startswith(name_prefix):
                return run
        return None

    def best_peer_gap(self, contenders):
        gaps = [(l["gap_median_us"], l["library"]) for l in self.peers
                if l["workload"] == "forced_handoff" and l["contenders"] == contenders and l["gap_samples"]]
        return min(gaps) if gaps else (None, None)


# ---- sections --------------------------------------------------------------------------------------------

def machine_section(results, elapsed_s):
    redis_version = command_output(["redis-server", "--version"])
    gcc_version = command_output(["gcc", "--version"]).splitlines()
    commit = command_output(["git", "rev-parse", "--short", "HEAD"])
    peer_versions = sorted({f"{l['library'].split()[0]} {l['version'].lstrip('v')}" for l in results.peers})
    rows = [
        ("CPUs (nproc)", str(os.cpu_count())),
        ("CPU model", cpu_model()),
        ("kernel", platform.release()),
        ("redis-server", redis_version or "unknown"),
        ("compiler", gcc_version[0] if gcc_version else "unknown"),
        ("node / npm", f"{results.peers_versions.get('node', '–')} / {results.peers_versions.get('npm', '–')}"),
        ("peers", ", ".join(peer_versions) or f"skipped: {results.peers_skipped or 'not run'}"),
        ("turnstile", f"commit {commit}" if commit else "unknown"),
        ("run", f"{datetime.date.today().isoformat()}, `./dev bench` took {elapsed_s} s" if elapsed_s else "–"),
    ]
    out = ["## Machine and versions", "", "| | |", "|---|---|"]
    out += [f"| {name} | {value} |" for name, value in rows]
    out += ["", "This is a shared virtual machine with two cores: other engineers' builds and tests ran at the "
            "same time, the benchmark client, redis-server and (for the peers) node share those two cores, and "
            "figures move by tens of percent from one run to the next. Each ratio below is taken within one run, "
            "which is what makes it comparable.", ""]
    return out


def ceilings_section(results):
    out = ["## Ceilings (same run, same server)", "",
           "`redis-benchmark -n 100000` on loopback against the server the turnstile workloads used.", "",
           "| command | 1 client | 8 clients |", "|---|---:|---:|"]
    for command in ["PING", "EVALSHA"]:
        label = "EVALSHA of the lock-acquire script" if command == "EVALSHA" else "PING"
        out.append(f"| {label} (requests/s) | {fmt(results.ceilings.get((command, 1)))} | "
                   f"{fmt(results.ceilings.get((command, 8)))} |")
    out += ["", f"Median PING round trip through turnstile's backend: **{fmt(results.ping_us, 1)} µs**. "
            f"An uncontended lock+unlock pair is two script round trips, so its ceiling is EVALSHA(1 client) / 2 "
            f"= **{fmt(results.pair_ceiling())} pairs/s**.", ""]
    return out


def goals_section(results):
    out = ["## Goals (issue #9)", "", "| goal | measured | met |", "|---|---|---|"]
    notes = []
    ceiling = results.pair_ceiling()
    reentrant = results.workload("redis", "reentrant", 1)
    ours = reentrant["acquisitions_per_s"] if reentrant else None
    peer_pairs, peer_name = results.best_peer_pairs()

    def row(goal, measured, met, limit=None):
        out.append(f"| {goal} | {measured} | {'met' if met else '**not met**' if met is not None else 'not measured'} |")
        if met is False and limit:
            notes.append(f"- *{goal}*: {limit}")

    pair_ratio = ours / ceiling if ours and ceiling else None
    row(f"uncontended reentrant lock+unlock ≥ {GOAL_PAIR_RATIO} of the two-EVALSHA ceiling",
        f"{fmt(ours)} pairs/s = {fmt(pair_ratio, 2)} of {fmt(ceiling)}" if pair_ratio else "–",
        pair_ratio >= GOAL_PAIR_RATIO if pair_ratio else None,
        "a lock+unlock is two round trips plus turnstile's client work (owner id, reply checks, the watchdog "
        "registration and the unlock's PUBLISH inside the script); on two shared cores the client thread, "
        "redis-server and the other engineers' jobs compete for CPU, which redis-benchmark's tight C loop "
        "suffers less from. lock_benchmark's best-of-3 figure is in the appendix.")
    peer_ratio = ours / peer_pairs if ours and peer_pairs else None
    row(f"uncontended reentrant lock+unlock ≥ {GOAL_PEER_PAIRS}× the better peer",
        f"{fmt(ours)} vs {peer_name} {fmt(peer_pairs)} pairs/s = {fmt(peer_ratio, 2)}×" if peer_ratio else "–",
        peer_ratio >= GOAL_PEER_PAIRS if peer_ratio else None,
        "redis-semaphore's Mutex acquires with a plain `SET NX PX` (no script, no reentrancy count, no "
        "pub/sub channel to publish to on release), which costs Redis less than turnstile's acquire script; and "
        "the peers' uncontended figure is one run while the machine's load swings by 2× from minute to minute "
        "(compare the 1-client PING ceiling of this run with the other programs' in the appendix).")
    forced = results.workload("redis", "reentrant", GOAL_CONTENDERS, forced=True)
    gap = forced["gap_median_us"] if forced else None
    gap_pings = gap / results.ping_us if gap and results.ping_us else None
    row(f"{GOAL_CONTENDERS} contenders, forced handoff: median handoff gap ≤ {GOAL_GAP_PINGS:g} ping round trips",
        f"{fmt(gap)} µs = {fmt(gap_pings, 2)} × {fmt(results.ping_us, 1)} µs" if gap_pings else "–",
        gap_pings <= GOAL_GAP_PINGS if gap_pings else None,
        "a handoff is the releaser's script (with its PUBLISH), the message to the waiter's subscriber "
        "connection, a thread wake-up and the waiter's acquire script: three round trips plus two "
        "context switches, which a loaded two-core machine makes expensive.")
    peer_gap, peer_gap_name = results.best_peer_gap(GOAL_CONTENDERS)
    gap_ratio = peer_gap / gap if peer_gap and gap else None
    row(f"{GOAL_CONTENDERS} contenders, forced handoff: ≥ {GOAL_PEER_GAP:g}× better than the better peer",
        f"{peer_gap_name} {fmt(peer_gap)} µs / turnstile {fmt(gap)} µs = {fmt(gap_ratio, 1)}×" if gap_ratio else "–",
        gap_ratio >= GOAL_PEER_GAP if gap_ratio else None,
        "the peers poll every 1 ms here (10–200× more often than their defaults).")
    fair = results.workload("redis", "fair", GOAL_CONTENDERS)
    share = fair["handoff_share"] if fair else None
    row(f"fair lock, {GOAL_CONTENDERS} threads on one key: ≥ {GOAL_FAIR_HANDOFFS:.0%} real handoffs",
        f"{share:.1%} of {fmt(fair['acquisitions'])} acquisitions" if fair else "–",
        share >= GOAL_FAIR_HANDOFFS if share is not None else None,
        "the releaser re-enters the queue behind the waiters only if it is slower than their wake-up.")
    for label, run in results.contention_hours().items():
        handoffs_per_s = run.get("handoffs_per_s")
        wall_ms = run.get("real_time")
        if handoffs_per_s is None:
            continue
        row(f"simulation: one virtual hour, 64 clients ({label}): ≥ {GOAL_SIM_HANDOFFS_PER_S:,} handoffs per wall "
            f"second, well under 1 s",
            f"{fmt(handoffs_per_s)} handoffs/s, {fmt(wall_ms)} {run.get('time_unit', 'ms')} per virtual hour, "
            f"{fmt(run.get('events_per_s'))} events/s",
            handoffs_per_s >= GOAL_SIM_HANDOFFS_PER_S,
            "this is sim_benchmark's own yardstick (owned by the simulation work, run here unchanged): with 1 s "
            "holds and a 30 s watchdog, one virtual hour holds only a few thousand handoffs, so the per-wall-second "
            "rate is bounded by the hour's wall time (every event, watchdog renewal and Lua script of 64 clients) "
            "on one shared core, not by the handoff path alone.")
    out.append("")
    if notes:
        out += ["What limits the goals not met:", ""] + notes + [""]
    return out


def forced_gap_rows(results, limits, reference_us, reference, headline):
    """Goal rows, one per flavor of `limits`: the median gap of the forced
    handoffs at GOAL_CONTENDERS, in units of `reference_us` (what
    `reference` names), at most the flavor's limit. `headline` is formatted
    with the limit."""
    rows = []
    for flavor, limit in limits.items():
        line = results.workload("redis", flavor, GOAL_CONTENDERS, forced=True)
        gap = line and line["gap_median_us"]
        rows.append((f"{FLAVOR_TITLES[flavor]}, forced handoff, {GOAL_CONTENDERS} contenders: median gap "
                     f"≤ {limit:g} {reference}",
                     f"{fmt(gap)} µs = {gap / reference_us:.2f} × {fmt(reference_us, 1)} µs"
                     if gap and reference_us else "–",
                     gap / reference_us <= limit if gap and reference_us else None,
                     f"{FLAVOR_TITLES[flavor]}: " + headline.format(limit=limit)))
    return rows


def gap_round_ratios(results, flavor):
    """The rounds' gap ÷ floor ratios of `flavor` at GOAL_CONTENDERS (each
    round's floor measured right before its gap), in round order."""
    return [l["gap_median_us"] / l["floor_us"] for l in results.gap_rounds
            if l["flavor"] == flavor and l["contenders"] == GOAL_CONTENDERS and l["floor_us"] > 0
            and l["gap_samples"] > 0]


def gap_round_rows(results):
    """Issue #33's forced-handoff gap goals: the median over the rounds of
    gap ÷ (one-way publish + one script round trip), each round's floor
    measured right before its gap. Without rounds (an older run), the one
    floor of the run against the forced-handoff row."""
    if not results.gap_rounds:
        budget = results.budget
        floor = budget and budget["publish_to_handler_us"] + budget["acquire_script_us"]
        return forced_gap_rows(results, GOAL33_GAP_FLOOR, floor, "(one-way publish + one script round trip)",
                               "forced handoff gap ÷ (publish + script), 8 contenders (goal ≤ {limit:g}×)")
    rows = []
    for flavor, limit in GOAL33_GAP_FLOOR.items():
        ratios = gap_round_ratios(results, flavor)
        median = statistics.median(ratios) if ratios else None
        rows.append((f"{FLAVOR_TITLES[flavor]}, forced handoff, {GOAL_CONTENDERS} contenders: median gap "
                     f"≤ {limit:g} (one-way publish + one script round trip), median of {len(ratios)} round(s)",
                     f"{median:.2f}× (rounds: {', '.join(f'{r:.2f}' for r in ratios)})" if ratios else "–",
                     median <= limit if ratios else None,
                     f"{FLAVOR_TITLES[flavor]}: forced handoff gap ÷ (publish + script), 8 contenders, "
                     f"median of rounds (goal ≤ {limit:g}×)"))
    return rows


def gap_rounds_section(results):
    """The rounds behind the gap goals, one row each."""
    rounds = [l for l in results.gap_rounds if l["contenders"] == GOAL_CONTENDERS]
    if not rounds:
        return []
    out = ["## Forced-handoff gap against its floor, round by round", "",
           f"Issue #33's gap goals, {GOAL_CONTENDERS} contenders in one process, forced handoff. On this shared "
           "two-core VM the floor and the gap each swing by up to 2× from minute to minute, so each round measures "
           "the floor (medians of 2,000: PUBLISH → handler on the subscriber thread, and the acquire script's round "
           "trip) and right after it the forced handoff (one measurement window); the goal rows take the median of the "
           "rounds' ratios.",
           "", "| round | flavor | floor µs (publish + script) | median gap µs | gap ÷ floor |", "|---|---|---:|---:|---:|"]
    for l in rounds:
        out.append(f"| {l['round'] + 1} | {FLAVOR_TITLES[l['flavor']]} | {fmt(l['floor_us'], 1)} "
                   f"({fmt(l['publish_to_handler_us'], 1)} + {fmt(l['acquire_script_us'], 1)}) | "
                   f"{fmt(l['gap_median_us'], 1)} | {l['gap_median_us'] / l['floor_us']:.2f} |")
    return out + [""]


def ceiling_rounds_section(results):
    """The rounds behind the processes × threads ceiling goal, one row each."""
    if not results.ceiling_rounds:
        return []
    out = ["## Processes × threads against a paired ceiling, round by round", "",
           "Issue #33's ceiling goal, wake scope fleet. On this shared two-core VM redis-benchmark's one-client "
           "EVALSHA rate swings by up to 2.4× from minute to minute, and the run's ceiling is measured once, at its "
           "start. So each round measures a shorter ceiling "
           f"({fmt(results.ceiling_rounds[0]['evalsha_requests'])} requests) and right after it the row (one "
           "measurement window); the row in the tables above is the round of median ratio. An uncontended row's "
           "rounds send the same EVALSHA from a blocking hiredis connection too, between the two.",
           "", "| round | flavor | processes × threads | EVALSHA 1 client /s | blocking client /s | acquisitions/s | "
           "÷ (EVALSHA ÷ 2) | errors |",
           "|---|---|---|---:|---:|---:|---:|---:|"]
    for l in results.ceiling_rounds:
        out.append(f"| {l['round'] + 1} | {FLAVOR_TITLES[l['flavor']]} | {shape_label(l['processes'], l['threads'])} | "
                   f"{fmt(l['evalsha_1_per_s'])} | {fmt(l.get('blocking_evalsha_1_per_s'))} | "
                   f"{fmt(l['acquisitions_per_s'])} | {l['ratio_to_evalsha_pair_ceiling']:.2f} | {l['errors']} |")
    return out + [""]


def goals21_rows(results):
    """Issue #21's goals as (goal, measured, met, headline) tuples; met is
    True, False or None (not measured in this run)."""
    rows = []
    ceiling = results.pair_ceiling()
    ping = results.ping_us
    for flavor in FLAVORS:
        ratios = {}
        for count in GOAL21_CONTENDER_COUNTS:
            line = results.workload("redis", flavor, count)
            if line and ceiling:
                ratios[count] = line["acquisitions_per_s"] / ceiling
        measured = ", ".join(f"{count}: {value:.2f}" for count, value in ratios.items()) or "–"
        complete = len(ratios) == len(GOAL21_CONTENDER_COUNTS)
        rows.append((f"{FLAVOR_TITLES[flavor]}, one key, free-for-all: acquisitions/s ÷ (EVALSHA 1-client ÷ 2) "
                     f"≥ {GOAL21_CEILING_RATIO} at 2, 8 and 32 contenders", measured,
                     min(ratios.values()) >= GOAL21_CEILING_RATIO if complete else None,
                     f"{FLAVOR_TITLES[flavor]}: acquisitions/s ÷ ceiling at 2 / 8 / 32 contenders (goal ≥ {GOAL21_CEILING_RATIO})"))
    for flavor in FLAVORS:
        alone = results.workload("redis", flavor, 1)
        crowd = results.workload("redis", flavor, GOAL21_CPU_CONTENDERS)
        base = alone and alone.get("redis_cpu_us_per_acquisition")
        busy = crowd and crowd.get("redis_cpu_us_per_acquisition")
        rows.append((f"{FLAVOR_TITLES[flavor]}: Redis CPU per acquisition at {GOAL21_CPU_CONTENDERS} contenders "
                     f"≤ {GOAL21_CPU_GROWTH:g}× uncontended",
                     f"{fmt(busy, 1)} µs vs {fmt(base, 1)} µs = {busy / base:.1f}×" if base and busy else "–",
                     busy / base <= GOAL21_CPU_GROWTH if base and busy else None,
                     f"{FLAVOR_TITLES[flavor]}: Redis CPU µs/acquisition, 32 contenders vs uncontended (goal ≤ {GOAL21_CPU_GROWTH:g}×)"))
    rows += forced_gap_rows(results, GOAL21_GAP_PINGS, ping, "ping round trips",
                            "forced handoff median gap, 8 contenders (goal ≤ {limit:g} pings)")
    for flavor in FLAVORS:
        factors = {}
        for count in GOAL21_CONTENDER_COUNTS:
            line = results.workload("redis", flavor, count, forced=True)
            peer_gap, _ = results.best_peer_gap(count)
            if line and line["gap_median_us"] and peer_gap:
                factors[count] = peer_gap / line["gap_median_us"]
        measured = ", ".join(f"{count}: {value:.1f}×" for count, value in factors.items()) or "–"
        complete = len(factors) == len(GOAL21_CONTENDER_COUNTS)
        rows.append((f"{FLAVOR_TITLES[flavor]}: best peer's median gap ÷ ours ≥ {GOAL21_PEER_GAP:g}× at 2, 8 and "
                     f"32 contenders", measured,
                     min(factors.values()) >= GOAL21_PEER_GAP if complete else None,
                     f"{FLAVOR_TITLES[flavor]}: best peer's gap ÷ ours at 2 / 8 / 32 (goal ≥ {GOAL21_PEER_GAP:g}×)"))
    redlock = results.google_run("lock_benchmark", f"BM_RedLockUnlock/{GOAL21_REDLOCK_NODES}/")
    pipelined = results.google_run("lock_benchmark", f"BM_PipelinedScriptPairs/{GOAL21_REDLOCK_NODES}/")
    ours = redlock and redlock.get("items_per_second")
    raw = pipelined and pipelined.get("items_per_second")
    rows.append((f"RedLock of {GOAL21_REDLOCK_NODES} ÷ the same node scripts pipelined to {GOAL21_REDLOCK_NODES} "
                 f"servers ≥ {GOAL21_REDLOCK_RATIO}",
                 f"{fmt(ours)} ÷ {fmt(raw)} pairs/s = {ours / raw:.2f}" if ours and raw else "–",
                 ours / raw >= GOAL21_REDLOCK_RATIO if ours and raw else None,
                 f"RedLock of {GOAL21_REDLOCK_NODES} ÷ pipelined ceiling (goal ≥ {GOAL21_REDLOCK_RATIO})"))
    for label, limit_s in GOAL21_SIM_WALL_S.items():
        run = results.contention_hours().get(label)
        wall_s = run["real_time"] / 1000 if run and run.get("time_unit") == "ms" else None
        rows.append((f"simulation: 1 virtual hour, 64 clients, {label}: < {limit_s:g} s wall",
                     f"{wall_s:.2f} s" if wall_s is not None else "–",
                     wall_s < limit_s if wall_s is not None else None,
                     f"simulation, 1 virtual hour, 64 clients, {label} (goal < {limit_s:g} s wall)"))
    evals = [r.get("items_per_second") for r in results.google.get("fake_benchmark", [])
             if r.get("name", "").startswith("BM_BackendEval") and r.get("items_per_second")]
    rows.append((f"fake Redis: ≥ {GOAL21_FAKE_EVALS_PER_S:,} script evaluations/s through the Backend "
                 f"(fake_benchmark BM_BackendEval*, the slower of the two)",
                 f"{fmt(min(evals))} evaluations/s" if evals else "–",
                 min(evals) >= GOAL21_FAKE_EVALS_PER_S if evals else None,
                 f"fake Redis: script evaluations/s through the Backend (goal ≥ {GOAL21_FAKE_EVALS_PER_S:,})"))
    demo = results.demo
    demo_ok = demo is not None and demo.get("status") == 0
    demo_s = demo["milliseconds"] / 1000 if demo_ok else None
    rows.append((f"`./dev demo` on a bare Debian 12 (packages + build + run) ≤ {GOAL21_DEMO_S // 60} min",
                 (f"{demo_s:.0f} s from a fresh clone, build + run (packages were installed already: their "
                  "download is not in this run)") if demo_ok
                 else "failed (benchmarks' demo.txt)" if demo is not None else "–",
                 demo_s <= GOAL21_DEMO_S if demo_ok else False if demo is not None else None,
                 f"`./dev demo` from a fresh clone, build + run (goal ≤ {GOAL21_DEMO_S // 60} min with packages)"))
    return rows


def goals21_section(results):
    out = ["## Goals (issue #21)", "",
           "Every figure from this run; ratios within the run. Peers: the best (lowest median gap) of every peer "
           "library and setting measured at that contention level.", "",
           "| goal | measured | met |", "|---|---|---|"]
    for goal, measured, met, _ in goals21_rows(results):
        out.append(f"| {goal} | {measured} | {verdict(met)} |")
    out += ["", "Measured in the same run, for reading the goals not met:", ""]
    script_calls = []
    for flavor in FLAVORS:
        alone = results.workload("redis", flavor, 1)
        crowd = results.workload("redis", flavor, GOAL21_CPU_CONTENDERS)
        calls = [l and (l.get("redis_commands_per_acquisition") or {}) for l in (alone, crowd)]
        if all(calls):
            script_calls.append(f"{FLAVOR_TITLES[flavor]} {calls[0].get('evalsha', 0):.2f} → "
                                f"{calls[1].get('evalsha', 0):.2f} ({sum(calls[0].values()):.1f} → "
                                f"{sum(calls[1].values()):.1f} commands)")
    if script_calls:
        out.append(f"- Script calls (EVALSHA) per acquisition, uncontended → {GOAL21_CPU_CONTENDERS} contenders "
                   f"free-for-all on one key: " + "; ".join(script_calls) + ". One call per acquisition would be "
                   "no wasted work; every extra call is a waiter's failed try.")
    budget, ping = results.budget, results.ping_us
    if budget and ping:
        floor = budget["publish_to_handler_us"] + budget["handler_to_waiter_us"] + budget["acquire_script_us"]
        out.append(f"- The floor of a pub/sub handoff measured part by part on the same server: "
                   f"{fmt(floor, 1)} µs = {floor / ping:.1f} ping round trips (PUBLISH → subscriber thread "
                   f"{fmt(budget['publish_to_handler_us'], 1)} µs, → waiting thread "
                   f"{fmt(budget['handler_to_waiter_us'], 1)} µs, acquire script "
                   f"{fmt(budget['acquire_script_us'], 1)} µs); see \"Where a forced handoff's time goes\".")
    for flavor, kind, parts, _, _ in handoff_part_columns(results) if ping else []:
        out.append(f"- {FLAVOR_TITLES[flavor]}, {GOAL_CONTENDERS} contenders, forced handoff, the median gap's "
                   f"parts as they happened ({kind}): " + "; ".join(
                       f"{title} {fmt(parts[key], 1)} µs ({parts[key] / ping:.1f} pings)"
                       for key, title in HANDOFF_PARTS if key in parts) + ".")
    best = []
    for count in GOAL21_CONTENDER_COUNTS:
        gap, name = results.best_peer_gap(count)
        if gap:
            best.append(f"{count}: {name} {fmt(gap)} µs")
    if best:
        out.append("- Best peer's median gap per contention level: " + "; ".join(best) + ". The peers poll, so "
                   "their gap is set by their poll interval, not by Redis.")
    out.append("")
    return out


def shape_label(processes, threads):
    return f"{processes} × {threads}"


def evalsha_of(line):
    return (line.get("redis_commands_per_acquisition") or {}).get("evalsha") if line else None


def all_met(values, test):
    """True if every value passes `test`, False if one fails, None if there is none."""
    values = [value for value in values if value is not None]
    return all(test(value) for value in values) if values else None


def per_flavor_row(goal, values, test, headline, shown="{:.2f}"):
    """A goal row whose measured cell lists one value per flavor ({flavor:
    value}), met when every value passes `test`."""
    return (goal, ", ".join(f"{FLAVOR_TITLES[f]} {shown.format(v)}" for f, v in values.items() if v is not None)
            or "–", all_met(values.values(), test), headline)


def goals33_rows(results):
    """Issue #33's goals as (goal, measured, met, headline) tuples; met is
    True, False or None (not measured in this run)."""
    rows = []
    ceiling = results.pair_ceiling()
    flavors = [f for f in GOAL33_SHAPE_FLAVORS if any(l["flavor"] == f for l in results.grid)]
    titles = "/".join(FLAVOR_TITLES[f].replace(" lock", "").replace("crash-safe ", "crash-safe ") for f in flavors)
    one_process = {f: evalsha_of(results.grid_row(f, 1, 64)) for f in flavors}
    rows.append(per_flavor_row(
        f"script calls per acquisition, {titles}, 1 process × 64 threads ≤ {GOAL33_CALLS_ONE_PROCESS:.1f} "
        "(to the issue's one decimal)",
        one_process, lambda v: round(v, 1) <= GOAL33_CALLS_ONE_PROCESS,
        f"script calls per acquisition, 1 × 64 (goal ≤ {GOAL33_CALLS_ONE_PROCESS:g})"))
    shapes = [shape for shape in results.grid_shapes() if shape[0] > 1]
    # The goals are the default's (fleet); wake scope process, opt-in, is
    # compared below the table (goals33_process_note).
    for scope in ("fleet",):
        worst = {}
        for f in flavors:
            calls = [evalsha_of(results.grid_row(f, p, t, scope)) for p, t in shapes]
            calls = [c for c in calls if c is not None]
            if calls:
                worst[f] = max(calls)
        rows.append(per_flavor_row(
            f"script calls per acquisition at every shape ({', '.join(shape_label(*s) for s in shapes)}), "
            f"wake scope {scope}: ≤ {GOAL33_CALLS} (worst shape per flavor)",
            worst, lambda v: v <= GOAL33_CALLS,
            f"script calls per acquisition, worst of {', '.join(shape_label(*s) for s in shapes)} "
            f"processes × threads, wake scope {scope} (goal ≤ {GOAL33_CALLS})"))
        ratios = {}
        for f in flavors:
            line = results.grid_row(f, *GOAL33_CEILING_SHAPE, scope)
            row_ceiling = line and results.row_ceiling(line)
            if row_ceiling:
                ratios[f] = line["acquisitions_per_s"] / row_ceiling
        rows.append(per_flavor_row(
            f"{shape_label(*GOAL33_CEILING_SHAPE)}, wake scope {scope}: acquisitions/s ÷ (EVALSHA 1-client ÷ 2) "
            f"≥ {GOAL33_CEILING_RATIO}",
            ratios, lambda v: v >= GOAL33_CEILING_RATIO,
            f"{shape_label(*GOAL33_CEILING_SHAPE)}, wake scope {scope}: ÷ ceiling (goal ≥ {GOAL33_CEILING_RATIO})"))
        growth = {}
        for f in flavors:
            base = (results.workload("redis", f, 1) or {}).get("redis_cpu_us_per_acquisition")
            busy = [(results.grid_row(f, p, t, scope) or {}).get("redis_cpu_us_per_acquisition") for p, t in shapes]
            busy = [b for b in busy if b]
            if base and busy:
                growth[f] = max(busy) / base
        rows.append(per_flavor_row(
            f"Redis CPU per acquisition at every shape ÷ uncontended, wake scope {scope}: "
            f"≤ {GOAL33_CPU_GROWTH:g}× (worst shape per flavor)",
            growth, lambda v: v <= GOAL33_CPU_GROWTH,
            f"Redis CPU per acquisition, worst shape ÷ uncontended, wake scope {scope} "
            f"(goal ≤ {GOAL33_CPU_GROWTH:g}×)", shown="{:.1f}×"))
    read_write = {shape: evalsha_of(results.grid_row("read-write", *shape)) for shape in ((1, 64), (8, 16))}
    read_write = {shape: calls for shape, calls in read_write.items() if calls is not None}
    rows.append((f"read-write lock, write half, 1 × 64 / 8 × 16: script calls per acquisition "
                 f"≤ {GOAL33_READ_WRITE_CALLS:g}",
                 " / ".join(f"{shape_label(*shape)}: {calls:.2f}" for shape, calls in read_write.items()) or "–",
                 all_met(read_write.values(), lambda v: v <= GOAL33_READ_WRITE_CALLS),
                 f"read-write lock, write half: script calls per acquisition, 1 × 64 / 8 × 16 "
                 f"(goal ≤ {GOAL33_READ_WRITE_CALLS:g})"))
    queue = {l["contenders"]: l for l in results.fair_queue}
    base = queue.get(min(queue)) if queue else None
    base_cpu = base and base.get("redis_cpu_us_per_acquisition")
    flat = {n: l["redis_cpu_us_per_acquisition"] / base_cpu for n, l in queue.items()
            if base_cpu and l.get("redis_cpu_us_per_acquisition") and n <= GOAL33_FAIR_FLAT_UP_TO}
    rows.append((f"fair lock: Redis CPU per acquisition from 1 to {GOAL33_FAIR_FLAT_UP_TO:,} waiters within "
                 f"{GOAL33_FAIR_FLAT:g}× of 1 waiter's",
                 ", ".join(f"{n:,}: {fmt(queue[n]['redis_cpu_us_per_acquisition'], 1)} µs ({v:.1f}×)"
                           for n, v in flat.items()) or "–",
                 all_met(flat.values(), lambda v: v <= GOAL33_FAIR_FLAT) if len(flat) > 1 else None,
                 f"fair lock: Redis CPU µs/acquisition vs queue length, 1..{GOAL33_FAIR_FLAT_UP_TO:,} "
                 f"(goal within {GOAL33_FAIR_FLAT:g}×)"))
    drains = {n: queue[n] for n in GOAL33_DRAIN_QUEUES if n in queue}
    drain_ratios = {n: l["acquisitions_per_s"] / ceiling for n, l in drains.items() if ceiling}
    errors = sum(l.get("errors", 0) for l in results.fair_queue)
    measured = ", ".join(f"{n:,}: {fmt(drains[n]['acquisitions_per_s'])}/s = {v:.2f}" for n, v in drain_ratios.items())
    measured = (measured or "–") + (f"; {errors} waiter error(s): {next(l['first_error'] for l in results.fair_queue if l.get('first_error'))}"
                                    if errors else "; no waiter error" if results.fair_queue else "")
    met = all_met(drain_ratios.values(), lambda v: v >= GOAL33_DRAIN_RATIO)
    rows.append((f"fair lock, {' and '.join(f'{n:,}' for n in GOAL33_DRAIN_QUEUES)} waiters drain at "
                 f"≥ {GOAL33_DRAIN_RATIO} of the ceiling; no waiter sees an error (pool exhaustion)",
                 measured, (met and errors == 0) if met is not None else None,
                 f"fair lock, 1,000 / 5,000 waiters: ÷ ceiling, errors (goal ≥ {GOAL33_DRAIN_RATIO}, none)"))
    rows += gap_round_rows(results)
    tick = dict(results.watchdog_ticks()).get(GOAL33_HELD_LOCKS)
    over = tick and tick.get("tick_over_period")
    rows.append((f"watchdog: {GOAL33_HELD_LOCKS:,} held locks renewed on time (a tick within the renewal period)",
                 f"tick {fmt(tick['real_time'])} {tick.get('time_unit', 'ms')} = {over:.2f} of the period"
                 if over is not None else "–",
                 over < 1 if over is not None else None,
                 f"watchdog, {GOAL33_HELD_LOCKS:,} held locks: tick ÷ renewal period (goal < 1)"))
    def sim_cpu_s(label):
        run = results.contention_hours().get(label)
        return run["cpu_time"] / 1000 if run and run.get("time_unit") == "ms" else None

    for label, limit_s in GOAL33_SIM_CPU_S.items():
        cpu_s = sim_cpu_s(label)
        process_s = sim_cpu_s(f"{label}, process")
        fleet = f" (with wake scope process, opt-in: {process_s:.2f} s)" if process_s is not None else ""
        rows.append((f"simulation: 1 virtual hour × 64 clients, {label}: ≤ {limit_s:g} s CPU (the least of "
                     "sim_benchmark's repetitions)",
                     f"{cpu_s:.2f} s CPU{fleet}" if cpu_s is not None else "–",
                     cpu_s <= limit_s if cpu_s is not None else None,
                     f"simulation, 1 virtual hour × 64 clients, {label} (goal ≤ {limit_s:g} s CPU)"))
    return rows


def tick_failure(run):
    """Why a watchdog row has no tick (its error message), or None."""
    if run and run.get("error_occurred"):
        return run.get("error_message") or "error"
    return None


def renewed_on_time(run):
    """Whether every lock of a watchdog row was renewed, none failed or lost."""
    return run.get("locks_lost", 0) == 0 and run.get("renewal_failures", 0) == 0


def rounds_text(line):
    """"3 rounds" from deployment_benchmark's cluster_ratio line."""
    rounds = line.get("rounds") if line else None
    return f"{rounds} round{'' if rounds == 1 else 's'}" if rounds is not None else "its rounds"


def goals52_rows(results):
    """Issue #52's goals measured by the watchdog and deployment benchmarks
    as (goal, measured, met, headline) tuples; met is True, False or None
    (not measured in this run)."""
    rows = []
    peer_pairs, peer_name = results.best_peer_pairs()
    for flavor in GOAL52_FLAVORS:
        line = results.workload("redis", flavor, 1)
        pairs = line and line["acquisitions_per_s"]
        ceiling = line and results.row_ceiling(line)
        goal = GOAL52_PAIR_RATIO_CRASH_SAFE if flavor == "semaphore" else GOAL52_PAIR_RATIO
        share = pairs / ceiling if pairs and ceiling else None
        beats = pairs >= peer_pairs if pairs and peer_pairs else None
        commands = commands_per_acquisition(line)
        measured = (f"{fmt(pairs)} pairs/s = {share:.2f} of {fmt(ceiling)}; best peer {peer_name} "
                    f"{fmt(peer_pairs)}; {fmt(commands, 1)} commands per pair" if share else "–")
        met = None if share is None else share >= goal and beats is not False
        most = GOAL52_COMMANDS.get(flavor)
        if most is not None and commands is not None:
            measured += f" (goal ≤ {most})"
            met = met is not False and commands <= most + 0.05
        rows.append((f"{FLAVOR_TITLES[flavor]}: uncontended pair ≥ {goal:g} of the EVALSHA/2 ceiling and ≥ the "
                     f"best peer" + (f", ≤ {most} Redis commands per pair" if most else ""),
                     measured, met, f"{FLAVOR_TITLES[flavor]}, uncontended: share of the EVALSHA/2 ceiling "
                     f"(goal ≥ {goal:g})"))
    reentrant = results.workload("redis", "reentrant", 1)
    ours_cpu = reentrant and reentrant.get("redis_cpu_us_per_acquisition")
    peer = results.peer(GOAL52_CPU_PEER, "uncontended", 1)
    peer_cpu = peer and peer.get("redis_cpu_us_per_pair")
    cpu_ratio = ours_cpu / peer_cpu if ours_cpu and peer_cpu else None
    rows.append((f"reentrant lock: Redis CPU per uncontended pair ≤ {GOAL52_CPU_OVER_PEER:g}× {GOAL52_CPU_PEER}'s",
                 f"{fmt(ours_cpu, 1)} vs {fmt(peer_cpu, 1)} µs = {cpu_ratio:.2f}×" if cpu_ratio else "–",
                 cpu_ratio <= GOAL52_CPU_OVER_PEER if cpu_ratio else None,
                 f"reentrant lock: Redis CPU per pair ÷ {GOAL52_CPU_PEER}'s (goal ≤ {GOAL52_CPU_OVER_PEER:g}×)"))
    run = dict(results.watchdog_ticks("BM_ClusterWatchdogTick")).get(GOAL52_CLUSTER_HELD_LOCKS)
    over = run and run.get("tick_over_period")
    if tick_failure(run):
        measured, met = f"no tick measured: {tick_failure(run)}", False
    elif over is not None:
        wipe = " (wipe check off)" if run.get("wipe_check_ms") == 0 else ""
        measured = (f"tick {fmt(run['real_time'])} {run.get('time_unit', 'ms')} = {over:.2f} of the "
                    f"{fmt(run.get('period_ms'))} ms period, {fmt(run.get('script_calls_per_tick'))} script calls "
                    f"per tick, {fmt(run.get('locks_lost'))} locks lost{wipe}")
        met = over <= GOAL52_CLUSTER_TICK and renewed_on_time(run)
    else:
        measured, met = "–", None
    rows.append((f"{GOAL52_CLUSTER_HELD_LOCKS:,} held locks on a 3-master Cluster: tick ≤ {GOAL52_CLUSTER_TICK:g} "
                 "of the renewal period, every lock renewed", measured, met,
                 f"3-master Cluster, {GOAL52_CLUSTER_HELD_LOCKS:,} held locks: tick ÷ renewal period "
                 f"(goal ≤ {GOAL52_CLUSTER_TICK:g})"))
    line = results.cluster_ratio
    ratio_value = line and line.get("ratio")
    rows.append((f"Cluster ÷ single ≥ {GOAL52_CLUSTER_RATIO:g} (uncontended pairs, one key, best of "
                 f"{rounds_text(line)} each)",
                 f"{fmt(line['cluster_pairs_per_s'])} ÷ {fmt(line['single_pairs_per_s'])} pairs/s = "
                 f"{ratio_value:.2f}" if ratio_value else "–",
                 ratio_value >= GOAL52_CLUSTER_RATIO if ratio_value else None,
                 f"uncontended pairs, Cluster ÷ single (goal ≥ {GOAL52_CLUSTER_RATIO:g})"))
    return rows


def goals52_section(results):
    out = ["## Goals (issue #52): the uncontended floor and a Cluster that scales", "",
           "The uncontended floor from contention_benchmark's one-contender rows (the uncontended table: "
           "pairs/s against each row's own EVALSHA/2 ceiling, the median of 3 paired rounds; Redis commands from "
           "INFO commandstats; the peers' from the same INFO around their own loops; the fenced lock's 13 "
           "commands (goal ≤ 13) are pinned by "
           "tests/locks/uncontended_cost_test.cpp), the Cluster goals from watchdog_benchmark and "
           "deployment_benchmark (their sections below).", "",
           "| goal | measured | met |", "|---|---|---|"]
    for goal, measured, met, _ in goals52_rows(results):
        out.append(f"| {goal} | {measured} | {verdict(met)} |")
    out.append("")
    out += blocking_ceiling_lines(results)
    return out


def blocking_ceiling_lines(results):
    """What a synchronous client's I/O allows beside redis-benchmark's event
    loop, from the uncontended rows' rounds: the same EVALSHA sent from a
    blocking hiredis connection, and each flavor's pairs against it."""
    shares, cells = [], []
    for flavor in GOAL52_FLAVORS:
        line = results.workload("redis", flavor, 1)
        blocking = results.blocking_pair_ceiling(line)
        ceiling = line and results.row_ceiling(line)
        if not blocking or not ceiling:
            continue
        shares.append(blocking / ceiling)
        cells.append(f"{FLAVOR_TITLES[flavor]} {line['acquisitions_per_s'] / blocking:.2f}")
    if not shares:
        return []
    shares.sort()
    return [f"Beside each uncontended round's ceiling, the same EVALSHA sent from one blocking hiredis connection "
            f"(write, then a read that sleeps until the reply: a synchronous client's I/O, turnstile's too; "
            f"`blocking_client_rate`, benchmarks/ceiling.cpp) reached {shares[0]:.2f}–{shares[-1]:.2f} of "
            f"redis-benchmark's rate (an event loop over epoll) in this run. Against that ceiling the uncontended "
            f"pairs are: " + ", ".join(cells) + ".", ""]


def cluster_held_locks_section(results):
    ticks = results.watchdog_ticks("BM_ClusterWatchdogTick")
    if not ticks:
        return []
    wipe_off = any(run.get("wipe_check_ms") == 0 for _, run in ticks)
    out = ["## Held locks on a 3-master Redis Cluster: the watchdog's renewal tick", "",
           "watchdog_benchmark: as on one server above, but the names spread over every slot of a 3-master Cluster, "
           "and a renewal call's keys must share a slot, so a tick makes about one script call per slot in use "
           "(planned: the locks grouped per slot, cut into batches of 100). Script calls per tick from INFO "
           "commandstats on every master (cmdstat_evalsha, summed) between the pause before the tick and the one "
           "after it, with every command Redis ran then (the scripts' own included) per held lock; Redis CPU "
           "(every master; in brackets the scripts' own time inside Redis, commandstats usec) and the client's CPU "
           "over the same interval (about one period, so both include the idle work of that period). Both sides "
           "share this machine's 2 cores: a tick whose CPU on both sides adds up to about twice its length was "
           "bound by them."
           + (" The Cluster rows run with the wipe check off (`wipe_check_period` 0): with its default, a Cluster "
              "with more than about 40 slots in use loses its locks (benchmarks/watchdog_benchmark.cpp)."
              if wipe_off else ""), "",
           "| held locks | tick | tick ÷ period | script calls per tick (planned) | commands per held lock | "
           "per held lock | Redis CPU (scripts) / client CPU in the period | renewal failures / locks lost |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for held, run in ticks:
        if tick_failure(run):
            out.append(f"| {held:,} | no tick: {tick_failure(run)} | – | – | – | – | – | – |")
            continue
        out.append(f"| {held:,} | {fmt(run.get('real_time'), 1)} {run.get('time_unit', 'ms')} | "
                   f"{fmt(run.get('tick_over_period'), 3)} | {fmt(run.get('script_calls_per_tick'))} "
                   f"({fmt(run.get('batches_per_tick'))}) | {fmt(run.get('commands_per_lock'), 2)} | "
                   f"{fmt(run.get('us_per_lock'), 1)} µs | {fmt(run.get('redis_cpu_ms'))} ms "
                   f"({fmt(run.get('script_ms'))} ms) / {fmt(run.get('client_cpu_ms'))} ms | "
                   f"{fmt(run.get('renewal_failures'))} / {fmt(run.get('locks_lost'))} |")
    out.append("")
    return out


# deployment_benchmark's cost rows, in order.
DEPLOYMENTS = {"single": "single redis-server", "cluster-1": "Cluster of 1 master", "cluster": "Cluster of 3 masters"}


def scaling_section(results):
    """deployment_benchmark's cost per uncontended acquisition, single
    server against the 3-master Cluster, and the Cluster ÷ single ratio."""
    costs = [results.acquisition_costs[d] for d in DEPLOYMENTS if d in results.acquisition_costs]
    if not costs and not results.cluster_ratio:
        return []
    out = ["## Redis Cluster scaling: what one acquisition costs (single server vs Cluster)", ""]
    if costs:
        names = costs[0].get("names")
        out += [f"deployment_benchmark: one client thread locks and unlocks {fmt(names)} distinct names round "
                "robin (reentrant lock, fixed lease), in windows alternating the deployments. "
                "Redis CPU is INFO cpu (used_cpu_user + used_cpu_sys) summed over every master, less what the "
                "masters spent idle in as long (measured right before); commands are INFO commandstats calls on "
                "every master (Redis 7 counts a script's commands too; the probes' INFO left out), refused calls "
                "are MOVED/ASK replies (rejected_calls); round trips are the client's backend calls. This machine "
                "cannot give three busy masters a core each, so the cost is measured and the capacity projected: "
                "acquisitions/s per master = 1 ÷ (Redis CPU per acquisition, every master together), assuming one "
                "core per master, the client side not the bottleneck (its CPU per acquisition is shown) and the "
                "keys spread evenly over the masters. A server answering one request at a time spends more CPU "
                "per request than a saturated one (an event-loop wake-up each), so the projection errs low. "
                "The one-master Cluster (cluster mode, every slot on one server) shows what cluster mode itself "
                "costs; the rest of the 3-master figure is three servers taking turns on two cores, each request "
                "finding its server's caches cold (the scripts' own time inside Redis, INFO commandstats usec, "
                "grows with it), which a core per master would not have.", "",
                "| deployment | masters | pairs | pairs/s (this window) | Redis CPU µs / acq (all masters) | "
                "÷ single | scripts' time in Redis µs / acq | commands / acq | script calls / acq | "
                "refused / acq | round trips / acq | client CPU µs / acq | projected acq/s per master | "
                "projected acq/s, all masters |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        single_cpu = (results.acquisition_costs.get("single") or {}).get("redis_cpu_us_per_acquisition")
        for line in costs:
            cpu = line.get("redis_cpu_us_per_acquisition")
            out.append(f"| {DEPLOYMENTS[line['deployment']]} | {line['masters']} | {fmt(line['pairs'])} | "
                       f"{fmt(line.get('pairs_per_s'))} | {fmt(cpu, 1)} | {ratio(cpu, single_cpu)} | "
                       f"{fmt(line.get('script_us_per_acquisition'), 1)} | "
                       f"{fmt(line.get('commands_per_acquisition'), 1)} | "
                       f"{fmt(line.get('script_calls_per_acquisition'), 2)} | "
                       f"{fmt(line.get('rejected_calls_per_acquisition'), 2)} | "
                       f"{fmt(line.get('round_trips_per_acquisition'), 2)} | "
                       f"{fmt(line.get('client_cpu_us_per_acquisition'), 1)} | "
                       f"{fmt(line.get('projected_acquisitions_per_s_per_master'))} | "
                       f"{fmt(line.get('projected_acquisitions_per_s'))} |")
        out.append("")
        cluster = results.acquisition_costs.get("cluster")
        if cluster and single_cpu and cluster.get("redis_cpu_us_per_acquisition"):
            out += [f"Each master added to the Cluster adds about "
                    f"**{fmt(cluster['projected_acquisitions_per_s_per_master'])} uncontended acquisitions/s** "
                    f"({cluster.get('assumptions', 'one core per master')}); one server alone: "
                    f"{fmt(results.acquisition_costs['single']['projected_acquisitions_per_s_per_master'])}/s. "
                    f"An acquisition costs the 3-master Cluster "
                    f"{cluster['redis_cpu_us_per_acquisition'] / single_cpu:.2f}× the Redis CPU it costs one server"
                    + (f", a one-master Cluster "
                       f"{results.acquisition_costs['cluster-1']['redis_cpu_us_per_acquisition'] / single_cpu:.2f}×"
                       if (results.acquisition_costs.get("cluster-1") or {}).get("redis_cpu_us_per_acquisition")
                       else "") + ".", ""]
    line = results.cluster_ratio
    if line:
        out += [f"Uncontended pairs on one key (BM_Single, BM_Cluster; best of {rounds_text(line)} each): "
                f"Cluster {fmt(line['cluster_pairs_per_s'])} pairs/s ÷ single "
                f"{fmt(line['single_pairs_per_s'])} pairs/s = **{line['ratio']:.2f}** "
                f"(goal ≥ {GOAL52_CLUSTER_RATIO:g}).", ""]
    return out


def goals33_section(results):
    out = ["## Goals (issue #33): the shapes deployments have", "",
           "Every figure from this run; ratios within the run; script calls per acquisition from INFO "
           "commandstats (`evalsha`), Redis CPU from the server's own counters, both read at the end of each "
           "measured window. The ceiling is EVALSHA of the acquire script with 1 client ÷ 2 (one key "
           "serializes).", "",
           "| goal | measured | met |", "|---|---|---|"]
    for goal, measured, met, _ in goals33_rows(results):
        out.append(f"| {goal} | {measured} | {verdict(met)} |")
    out.append("")
    out += goals33_process_note(results)
    return out


def goals33_process_note(results):
    """The cross-process shapes with the opt-in wake scope process, beside
    the default's goals: what fleet-wide wake-ups changed."""
    shapes = [shape for shape in results.grid_shapes() if shape[0] > 1]
    worst = {}
    for f in GOAL33_SHAPE_FLAVORS:
        calls = [evalsha_of(results.grid_row(f, p, t, "process")) for p, t in shapes]
        calls = [c for c in calls if c is not None]
        if calls:
            worst[f] = max(calls)
    if not worst:
        return []
    return ["With the opt-in wake scope process (every process with a waiter wakes one on each release), the "
            "worst script calls per acquisition over the same shapes are " +
            ", ".join(f"{FLAVOR_TITLES[f]} {v:.2f}" for f, v in worst.items()) + ".", ""]


SHAPE_COLUMNS = ("acquisitions/s | ratio to ceiling | Redis CPU µs/acq | ÷ {base} | script calls / acq | "
                 "commands / acq | errors |")


def commands_per_acquisition(line):
    """Every command Redis ran per acquisition (INFO commandstats, the
    scripts' own included), or None."""
    calls = line and line.get("redis_commands_per_acquisition")
    return sum(calls.values()) if calls else None


def shape_cells(line, ceiling, base_cpu):
    """The cells of SHAPE_COLUMNS for one row of issue #33's shapes."""
    calls = line.get("redis_commands_per_acquisition") or {}
    cpu = line.get("redis_cpu_us_per_acquisition")
    return (f"{fmt(line['acquisitions_per_s'])} | {ratio(line['acquisitions_per_s'], ceiling)} | {fmt(cpu, 1)} | "
            f"{ratio(cpu, base_cpu, 1)} | {calls.get('evalsha', 0):.2f} | {sum(calls.values()):.1f} | "
            f"{line.get('errors', 0)} |")


def grid_section(results):
    if not results.grid:
        return []
    out = ["## Processes × threads on one key (redis-server)", "",
           "Free-for-all on one key: each process is contention_benchmark exec'd again with its own client; "
           "the cross-process rows once per wake scope (`ClientOptions::wake_scope`: fleet, the default, "
           "and process, opt-in; the read-write lock's write half in the default only). 1 × 1 is the uncontended row of the same run. Script calls and commands per acquisition "
           "from INFO commandstats; ratio: acquisitions/s ÷ (EVALSHA 1 client ÷ 2), the run's ceiling, except "
           f"for the {shape_label(*GOAL33_CEILING_SHAPE)} fleet rows: each is the median of its ceiling rounds "
           "(below), against its own round's ceiling.", "",
           "| flavor | processes × threads | wake scope | " + SHAPE_COLUMNS.format(base="uncontended"),
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for flavor in FLAVORS + ["read-write"]:
        alone = results.workload("redis", flavor, 1)
        base = alone and alone.get("redis_cpu_us_per_acquisition")
        rows = ([alone] if alone else []) + [l for l in results.grid if l["flavor"] == flavor]
        for line in rows:
            out.append(f"| {FLAVOR_TITLES[flavor]} | {shape_label(line['processes'], line['threads'])} | "
                       f"{line.get('wake_scope', '–')} | " + shape_cells(line, results.row_ceiling(line), base))
    out.append("")
    return out


def fair_queue_warm_up_text(results):
    """How the fair queues' windows began (their warm-up), as a sentence."""
    warm_ups = {l.get("warm_up_ms", 0) for l in results.fair_queue}
    if warm_ups == {0}:
        return "Each window starts with its waiters' arrival. "
    return (f"Each window starts after a warm-up of {', '.join(f'{w / 1000:g}' for w in sorted(warm_ups))} s in "
            "which the waiters join (their first tries and subscriptions), so it measures the queue's service, "
            "not its arrival. ")


def fair_queue_section(results):
    if not results.fair_queue:
        return []
    ceiling = results.pair_ceiling()
    base = results.fair_queue[0].get("redis_cpu_us_per_acquisition")
    out = ["## Fair lock: queue length (redis-server)", "",
           "N fair waiters on one key, each looping acquire → release (one process up to 100 waiters, then 8 "
           "processes), so about N − 1 are queued at any moment; queues of 1,000 and more are measured over "
           "3× the duration. " + fair_queue_warm_up_text(results) + "The counters are read from the window's start "
           "to its end, before the waiters still queued withdraw.", "",
           "![fair lock: Redis CPU per acquisition and acquisitions/s versus queue length](shapes.svg)", "",
           "| waiters | processes × threads | " + SHAPE_COLUMNS.format(base="1 waiter"),
           "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for line in results.fair_queue:
        out.append(f"| {line['contenders']:,} | {shape_label(line['processes'], line['threads'])} | "
                   + shape_cells(line, ceiling, base))
    errors = [l for l in results.fair_queue if l.get("first_error")]
    if errors:
        out += ["", f"First error ({errors[0]['contenders']:,} waiters): `{errors[0]['first_error']}`"]
    out.append("")
    return out


def held_locks_section(results):
    ticks = results.watchdog_ticks()
    if not ticks:
        return []
    out = ["## Held locks: the watchdog's renewal tick (redis-server)", "",
           "watchdog_benchmark: one client holds N reentrant locks (watchdog lease 6 s, a tick every 1.98 s); "
           "a tick from its first to its last confirmed renewal plus one batch round trip, beside the renewal "
           "period and one batch after another (benchmarks/watchdog_benchmark.cpp).", "",
           "| held locks | tick | tick ÷ period | script calls per tick | per held lock | "
           "one batch after another (estimate) |",
           "|---:|---:|---:|---:|---:|---:|"]
    for held, run in ticks:
        if tick_failure(run):
            out.append(f"| {held:,} | no tick: {tick_failure(run)} | – | – | – | – |")
            continue
        out.append(f"| {held:,} | {fmt(run.get('real_time'), 1)} {run.get('time_unit', 'ms')} | "
                   f"{fmt(run.get('tick_over_period'), 3)} | {fmt(run.get('script_calls_per_tick'))} | "
                   f"{fmt(run.get('us_per_lock'), 1)} µs | {fmt(run.get('sequential_ms'), 1)} ms |")
    out.append("")
    return out


CROWD_MAX_THREADS = 16


def crowd_section(results):
    if not results.crowds:
        return []
    out = ["## Crowds: acquisitions waiting at once in one process (redis-server)", "",
           "crowd_benchmark: Asio coroutines on one io_context thread wait on reentrant locks held by another "
           "client (wide), on one fair lock (fair), and one client holds many locks (held); every waiter is then "
           "served. OS threads of the whole process (goal: at most "
           f"{CROWD_MAX_THREADS}, whatever the crowd) and memory per acquisition, from before the crowd to the "
           "moment every acquisition waits (or is held), divided by the acquisitions: the client's heap in use "
           "(mallinfo2), its resident memory (/proc/self/statm, after malloc_trim) and Redis's used_memory "
           "(INFO memory) (benchmarks/crowd_benchmark.cpp).", "",
           "| crowd | acquisitions | names | served | OS threads before → peak | client heap / acq "
           "| client resident / acq | Redis / acq | all waiting after | all served in | handoffs/s |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for line in results.crowds:
        serve_s = line.get("seconds_to_serve") or 0
        rate = line["served"] / serve_s if serve_s > 0 else None
        threads = f"{line['threads_before']} → {line['threads_peak']}"
        if line["threads_peak"] > CROWD_MAX_THREADS:
            threads += " (over the goal)"
        out.append(f"| {line['crowd']} | {line['acquisitions']:,} | {line['names']:,} | {line['served']:,} | "
                   f"{threads} | {fmt(line['bytes_per_acquisition'])} B | "
                   f"{bytes_cell(line.get('resident_bytes_per_acquisition'))} | "
                   f"{bytes_cell(line.get('redis_bytes_per_acquisition'))} | {fmt(line['seconds_to_wait'], 1)} s | "
                   f"{fmt(serve_s, 1) + ' s' if serve_s else '—'} | {fmt(rate) if rate else '—'} |")
    out.append("")
    out += memory_summary(results)
    return out


def bytes_cell(value):
    return f"{fmt(value)} B" if value is not None else "–"


def memory_summary(results):
    """Memory per held lock and per waiting acquisition, both sides, as a
    sentence under the crowd table."""
    crowds = {line["crowd"]: line for line in results.crowds}

    def sides(line):
        return (f"client {fmt(line['bytes_per_acquisition'])} B heap / "
                f"{bytes_cell(line.get('resident_bytes_per_acquisition'))} resident, Redis "
                f"{bytes_cell(line.get('redis_bytes_per_acquisition'))}")

    parts = []
    if "held" in crowds:
        parts.append(f"per held lock (watchdog lease): {sides(crowds['held'])}")
    for crowd, what in (("wide", "reentrant"), ("fair", "fair")):
        if crowd in crowds:
            line = crowds[crowd]
            parts.append(f"per waiting acquisition ({what}, {fmt(line['acquisitions'])} on {fmt(line['names'])} "
                         f"name{'s' if line['names'] != 1 else ''}): {sides(line)}")
    if not parts:
        return []
    return ["Memory " + "; ".join(parts) + ".", ""]


def write_shapes_chart(results, path):
    """The fair queue-length curve: Redis CPU µs per acquisition and
    acquisitions/s versus waiters (log-log), with the goals drawn in."""
    cpu = [(l["contenders"], l["redis_cpu_us_per_acquisition"]) for l in results.fair_queue
           if l.get("redis_cpu_us_per_acquisition")]
    rate = [(l["contenders"], l["acquisitions_per_s"]) for l in results.fair_queue if l["acquisitions_per_s"] > 0]
    series = [("Redis CPU µs per acquisition", cpu, False), ("acquisitions/s", rate, True)]
    guides = []
    if cpu:
        guides.append((GOAL33_FAIR_FLAT * cpu[0][1], f"goal: ≤ {GOAL33_FAIR_FLAT:g}× 1 waiter's CPU"))
    ceiling = results.pair_ceiling()
    if ceiling:
        guides.append((GOAL33_DRAIN_RATIO * ceiling, f"goal: ≥ {GOAL33_DRAIN_RATIO} × ceiling (/s)"))
    write_line_chart(path, "Fair lock vs queue length (one key, redis-server on loopback)",
                     "µs per acquisition or acquisitions/s (log)", series, guides, x_label="fair waiters")


def verdict(met):
    return "met" if met else "**not met**" if met is not None else "not measured here"


def rewrite_headline(results, path):
    """Replaces the lines between HEADLINE_BEGIN and HEADLINE_END in `path` with
    issue #52's Cluster goals and issue #33's goals measured in this run;
    leaves the file alone if either marker is missing."""
    text = path.read_text()
    begin, end = text.find(HEADLINE_BEGIN), text.find(HEADLINE_END)
    if begin < 0 or end < begin:
        print(f"report.py: {path} has no headline markers; left unchanged")
        return
    commit = command_output(["git", "rev-parse", "--short", "HEAD"])
    run = f"run of {datetime.date.today().isoformat()}, commit {commit or '?'}"
    table = ["", "", f"| issue #52 goal ({run}) | measured | met |", "|---|---|---|"]
    for goal, measured, met, headline in goals52_rows(results):
        if headline:
            table.append(f"| {headline} | {measured} | {verdict(met)} |")
    table += ["", f"| issue #33 goal ({run}) | measured | met |", "|---|---|---|"]
    for goal, measured, met, headline in goals33_rows(results):
        if headline:
            table.append(f"| {headline} | {measured} | {verdict(met)} |")
    table.append("")
    path.write_text(text[:begin + len(HEADLINE_BEGIN)] + "\n".join(table) + "\n" + text[end:])


def uncontended_section(results):
    ceiling = results.pair_ceiling()
    out = ["## Uncontended lock+release (one thread, one key)", "",
           "On redis-server, each flavor's row is the round of median ratio of 3, each round one-client EVALSHA "
           "and right after it one window of pairs, the ratio taken to that round's own ceiling (the rounds are in "
           "the paired-ceiling section); on the fake, the best of 3 windows. The peers' rows are one loop each, "
           "against the run's ceiling.", "",
           "| library | flavor | pairs/s (redis-server) | ratio to EVALSHA/2 | ratio to a blocking client's "
           "EVALSHA/2 | Redis CPU µs/pair | Redis commands/pair | pairs/s (fake) |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    for flavor in GOAL52_FLAVORS:
        line = results.workload("redis", flavor, 1)
        fake = results.workload("fake", flavor, 1)
        out.append(f"| turnstile | {FLAVOR_TITLES[flavor]} | {fmt(line and line['acquisitions_per_s'])} | "
                   f"{ratio(line and line['acquisitions_per_s'], line and results.row_ceiling(line))} | "
                   f"{ratio(line and line['acquisitions_per_s'], results.blocking_pair_ceiling(line))} | "
                   f"{fmt(line and line.get('redis_cpu_us_per_acquisition'), 1)} | "
                   f"{fmt(commands_per_acquisition(line), 1)} | "
                   f"{fmt(fake and fake['acquisitions_per_s'])} |")
    for library in results.peer_libraries():
        line = results.peer(library, "uncontended", 1)
        out.append(f"| {library} | | {fmt(line and line['pairs_per_s'])} | "
                   f"{ratio(line and line['pairs_per_s'], ceiling)} | | "
                   f"{fmt(line and line.get('redis_cpu_us_per_pair'), 1)} | "
                   f"{fmt(line and line.get('commands_per_pair'), 1)} | |")
    peer_pairs, peer_name = results.best_peer_pairs()
    reentrant = results.workload("redis", "reentrant", 1)
    if peer_pairs and reentrant:
        out += ["", f"Reentrant lock / the better peer ({peer_name}): "
                f"**{reentrant['acquisitions_per_s'] / peer_pairs:.2f}×**."]
    plain = results.google_run("lock_benchmark", "BM_ReentrantLockUnlock/")
    tls = results.google_run("lock_benchmark", "BM_TlsReentrantLockUnlock/")
    plain_rate = plain and plain.get("items_per_second")
    tls_rate = tls and tls.get("items_per_second")
    if plain_rate and tls_rate:
        out += ["", f"Over TLS (`rediss://`, lock_benchmark: the same reentrant lock+unlock loop against one "
                f"redis-server's plaintext and TLS ports): plaintext {fmt(plain_rate)} pairs/s, TLS "
                f"{fmt(tls_rate)} pairs/s = **{tls_rate / plain_rate:.2f}×**."]
    out.append("")
    return out


def forced_handoff_section(results):
    counts = sorted({l["contenders"] for l in results.workloads if l["forced_handoff"] and l["processes"] == 1})
    out = ["## Forced handoff on one key: handoff gap", "",
           "Every acquisition goes to a contender that already waits: the holder releases only once another "
           "contender is inside acquire, then competes again only once someone else took the key. The gap runs "
           "from the release call to the next holder's acquire return (median / p99, µs; in brackets: in ping "
           "round trips). The peers run the same protocol (benchmarks/peers/workload.js).", "",
           "![handoff gap versus contenders](handoff_gap.svg)", "",
           "| library | flavor | " + " | ".join(f"{n} contenders" for n in counts) + " |",
           "|---|---|" + "---:|" * len(counts)]
    ping = results.ping_us
    for flavor in FLAVORS:
        cells = []
        for count in counts:
            line = results.workload("redis", flavor, count, forced=True)
            cells.append(f"{fmt(line['gap_median_us'])} / {fmt(line['gap_p99_us'])} "
                         f"({ratio(line['gap_median_us'], ping, 1)})" if line else "–")
        out.append(f"| turnstile | {FLAVOR_TITLES[flavor]} | " + " | ".join(cells) + " |")
    for library in results.peer_libraries():
        cells = []
        for count in counts:
            line = results.peer(library, "forced_handoff", count)
            cells.append(f"{fmt(line['gap_median_us'])} / {fmt(line['gap_p99_us'])} "
                         f"({ratio(line['gap_median_us'], ping, 1)})" if line else "–")
        out.append(f"| {library} | | " + " | ".join(cells) + " |")
    out += ["", "Better peer's median gap / turnstile's (higher is better for turnstile):", "",
            "| flavor | " + " | ".join(f"{n} contenders" for n in counts) + " |", "|---|" + "---:|" * len(counts)]
    for flavor in FLAVORS:
        cells = []
        for count in counts:
            line = results.workload("redis", flavor, count, forced=True)
            peer_gap, _ = results.best_peer_gap(count)
            cells.append(f"{ratio(peer_gap, line and line['gap_median_us'], 1)}×" if line and peer_gap else "–")
        out.append(f"| {FLAVOR_TITLES[flavor]} | " + " | ".join(cells) + " |")
    out.append("")
    return out


def workload_table(results, title, intro, backend, select, rows=None):
    out = [f"## {title}", "", intro, "",
           "| flavor | contenders | keys | acquisitions/s | ratio to ceiling | real handoffs/s | handoffs | "
           "gap median µs | gap p99 µs | Redis CPU µs/acq |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for flavor in FLAVORS:
        for line in results.workloads if rows is None else rows:
            if line["backend"] != backend or line["flavor"] != flavor or not select(line):
                continue
            contenders = (f"{line['processes']}×{line['threads']}" if line["processes"] > 1
                          else str(line["contenders"]))
            if line.get("wake_scope"):
                contenders += f" ({line['wake_scope']})"
            out.append(f"| {FLAVOR_TITLES[flavor]} | {contenders} | {line['keys']} | "
                       f"{fmt(line['acquisitions_per_s'])} | {fmt(line.get('ratio_to_evalsha_pair_ceiling'), 2)} | "
                       f"{fmt(line['handoffs_per_s'])} | {line['handoff_share']:.1%} | "
                       f"{fmt(line['gap_median_us'])} | {fmt(line['gap_p99_us'])} | "
                       f"{fmt(line.get('redis_cpu_us_per_acquisition'), 1)} |")
    out.append("")
    return out


def budget_section(results):
    """The parts of a handoff measured one by one (handoff_budget.h) against
    the measured gaps of the reentrant and fair locks."""
    budget, ping = results.budget, results.ping_us
    if not budget or not ping:
        return []
    floor = budget["publish_to_handler_us"] + budget["handler_to_waiter_us"] + budget["acquire_script_us"]
    out = ["## Where a forced handoff's time goes", "",
           "contention_benchmark times the unavoidable parts of a handoff one by one on the same server (medians "
           "of 2,000; benchmarks/handoff_budget.h): a PUBLISH from one thread reaching a subscription handler on "
           "the backend's subscriber thread (a release script's PUBLISH takes the same way), that handler waking "
           "a thread blocked on a condition variable (how a waiter is woken), and the acquire script's round "
           "trip. Their sum is the floor of a handoff through pub/sub with this client on this machine: release "
           "call → the message → the waiter's thread → its acquire script.", "",
           "| part | µs | ping round trips |", "|---|---:|---:|",
           f"| PING round trip | {fmt(ping, 1)} | 1.0 |",
           f"| PUBLISH → handler on the subscriber thread | {fmt(budget['publish_to_handler_us'], 1)} | "
           f"{budget['publish_to_handler_us'] / ping:.1f} |",
           f"| (the same PUBLISH's reply to its caller) | {fmt(budget['publish_reply_us'], 1)} | "
           f"{budget['publish_reply_us'] / ping:.1f} |",
           f"| handler → the waiting thread runs | {fmt(budget['handler_to_waiter_us'], 1)} | "
           f"{budget['handler_to_waiter_us'] / ping:.1f} |",
           f"| acquire script round trip (EVALSHA) | {fmt(budget['acquire_script_us'], 1)} | "
           f"{budget['acquire_script_us'] / ping:.1f} |",
           f"| **floor: the three parts above** | **{fmt(floor, 1)}** | **{floor / ping:.1f}** |"]
    for flavor in ("reentrant", "fair"):
        line = results.workload("redis", flavor, GOAL_CONTENDERS, forced=True)
        if line and line["gap_median_us"]:
            calls = line.get("redis_commands_per_acquisition") or {}
            out.append(f"| measured: {FLAVOR_TITLES[flavor]}, {GOAL_CONTENDERS} contenders, forced handoff "
                       f"(evalsha per acquisition: {calls.get('evalsha', 0):.2f}) | {fmt(line['gap_median_us'], 1)} | "
                       f"{line['gap_median_pings'] if 'gap_median_pings' in line else line['gap_median_us'] / ping:.1f} |")
    out.append("")
    out += handoff_parts_table(results, ping)
    return out


HANDOFF_PARTS = [
    ("release_prepare", "release call → its script sent"),
    ("release_to_message", "release script sent → message at the subscriber thread"),
    ("wake_up", "message → the woken waiter sends its acquire script"),
    ("acquire_script", "that acquire script's round trip"),
    ("return", "its reply → the acquire call returns"),
    ("grant_taken", "message carrying the grant → the acquire call returns"),
]


def handoff_parts(results, flavor):
    """The in-process forced-handoff line at GOAL_CONTENDERS whose handoffs
    were split into parts (handoff_trace.h), or None."""
    line = results.workload("redis", flavor, GOAL_CONTENDERS, forced=True)
    if not line or not (line.get("handoff_parts_samples") or line.get("granted_parts_samples")):
        return None
    return line


def handoff_part_columns(results):
    """(flavor, kind, median parts, samples, line) for each kind of split handoff
    that happened: woken then acquired, or granted by the release (a fair
    lock's direct handoff)."""
    columns = []
    for flavor in ("reentrant", "fair"):
        line = handoff_parts(results, flavor)
        if not line:
            continue
        if line.get("handoff_parts_samples"):
            columns.append((flavor, "woken, then acquired", line["handoff_parts_median_us"],
                            line["handoff_parts_samples"], line))
        if line.get("granted_parts_samples"):
            columns.append((flavor, "granted by the release", line["granted_parts_median_us"],
                            line["granted_parts_samples"], line))
    return columns


def handoff_parts_table(results, ping):
    columns = handoff_part_columns(results)
    if not columns:
        return []
    out = [f"The handoffs themselves, split into their parts as they happened ({GOAL_CONTENDERS} contenders, forced "
           "handoff; benchmarks/handoff_trace.h stamps the client's backend calls and pub/sub messages; medians of "
           "each part, so they need not add up exactly to the median gap). Only handoffs to a waiter reached by the "
           "release message are split: woken, it sends its acquire script; granted (a fair lock's direct handoff), "
           "the message itself makes it the holder. The others, counted in the last row, went to a contender whose "
           "try reached the free lock before any wake-up (a newcomer, or a try that raced the message):", "",
           "| part | " + " | ".join(f"{FLAVOR_TITLES[f]}, {kind}: µs (pings)" for f, kind, _, _, _ in columns) + " |",
           "|---|" + "---:|" * len(columns)]
    for key, title in HANDOFF_PARTS:
        if not any(key in parts for _, _, parts, _, _ in columns):
            continue
        cells = [f"{fmt(parts[key], 1)} ({parts[key] / ping:.1f})" if key in parts else "–"
                 for _, _, parts, _, _ in columns]
        out.append(f"| {title} | " + " | ".join(cells) + " |")
    out.append("| sum of the medians | " + " | ".join(
        f"{fmt(sum(parts.values()), 1)} ({sum(parts.values()) / ping:.1f})" for _, _, parts, _, _ in columns) + " |")
    out.append("| median gap (every handoff) | " + " | ".join(
        f"{fmt(line['gap_median_us'], 1)} ({line['gap_median_us'] / ping:.1f})" for _, _, _, _, line in columns) + " |")
    out.append("| handoffs of this kind / taken without a wake-up | " + " | ".join(
        f"{samples:,} / {line['unwoken_handoffs']:,}" for _, _, _, samples, line in columns) + " |")
    out.append("")
    return out


def commands_section(results):
    """Redis commands per acquisition on one key (INFO commandstats deltas;
    Redis 7 counts the commands inside scripts too)."""
    lines = [l for l in results.workloads if l["backend"] == "redis" and l["keys"] == 1 and l["processes"] == 1
             and l.get("redis_commands_per_acquisition")]
    if not lines:
        return []
    out = ["## Redis commands per acquisition (one key)", "",
           "From INFO commandstats after CONFIG RESETSTAT around each measurement (Redis 7 counts the commands a "
           "script runs as well as the script call). `evalsha`: script calls the clients sent; the rest are "
           "mostly the scripts' insides. A thundering herd shows as many script calls per acquisition.", "",
           "| flavor | contenders | forced handoff | evalsha / acq | publish / acq | all commands / acq | "
           "most called |", "|---|---:|---|---:|---:|---:|---|"]
    for flavor in FLAVORS:
        for line in lines:
            if line["flavor"] != flavor:
                continue
            calls = line["redis_commands_per_acquisition"]
            top = sorted(calls.items(), key=lambda item: -item[1])[:4]
            out.append(f"| {FLAVOR_TITLES[flavor]} | {line['contenders']} | "
                       f"{'yes' if line['forced_handoff'] else 'no'} | {calls.get('evalsha', 0):.2f} | "
                       f"{calls.get('publish', 0):.2f} | {sum(calls.values()):.1f} | "
                       + ", ".join(f"{name} {value:.1f}" for name, value in top) + " |")
    out.append("")
    return out


def read_mostly_section(results):
    """read_write_benchmark: 8 readers + 1 writer on one read-write lock,
    beside the reentrant lock with the same 9 threads all exclusive."""
    shared = next((l for l in results.read_mostly if l["flavor"] == "read-write"), None)
    exclusive = next((l for l in results.read_mostly if l["flavor"] == "reentrant"), None)
    if not shared and not exclusive:
        return []
    out = ["## Read-mostly: 8 readers + 1 writer on one key (redis-server)", "",
           "read_write_benchmark: reader threads take the read half, one writer thread the write half, every "
           "thread looping acquire → release (watchdog lease) on one read-write lock; beside it the reentrant "
           "lock with the same 9 threads all exclusive. Waits run from the acquire call to its return (µs); the "
           "baseline's \"writer\" is its ninth thread. A write waits for a moment with no reader (writers do "
           "not queue ahead of readers); a wait the end of the measurement cut short is shown apart.", "",
           "| lock | threads | reads/s | writes/s | all acquisitions/s | writer wait median / p99 µs | "
           "longest writer wait µs | reader wait median / p99 µs |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    if shared:
        unfinished = shared.get("writer_unfinished_wait_us") or 0
        longest = fmt(shared["writer_wait_max_us"]) + (f" (unfinished: {fmt(unfinished)})" if unfinished else "")
        out.append(f"| read-write lock | {shared['readers']} readers + {shared['writers']} writer | "
                   f"{fmt(shared['reads_per_s'])} | {fmt(shared['writes_per_s'])} | "
                   f"{fmt(shared['reads_per_s'] + shared['writes_per_s'])} | "
                   f"{fmt(shared['writer_wait_median_us'])} / {fmt(shared['writer_wait_p99_us'])} | {longest} | "
                   f"{fmt(shared['reader_wait_median_us'])} / {fmt(shared['reader_wait_p99_us'])} |")
    if exclusive:
        out.append(f"| reentrant lock (all exclusive) | {exclusive['threads']} | – | – | "
                   f"{fmt(exclusive['acquisitions_per_s'])} | "
                   f"{fmt(exclusive['ninth_wait_median_us'])} / {fmt(exclusive['ninth_wait_p99_us'])} | – | "
                   f"{fmt(exclusive['wait_median_us'])} / {fmt(exclusive['wait_p99_us'])} (all 9) |")
    if shared and exclusive and exclusive["acquisitions_per_s"]:
        total = shared["reads_per_s"] + shared["writes_per_s"]
        out += ["", f"Read-write lock acquisitions / exclusive lock's: "
                f"**{total / exclusive['acquisitions_per_s']:.2f}×**."]
    out.append("")
    return out


def appendix_section(results):
    out = ["## The other benchmark programs (same run)", "",
           "Rates from each program's Google Benchmark JSON (items or the named counter per second), then the "
           "summary lines it prints (ratios to the ceilings it measured itself).", ""]
    for program in GOOGLE_BENCHMARK_PROGRAMS:
        runs = [r for r in results.google.get(program, []) if r.get("run_type") != "aggregate"]
        out += [f"### {program}", ""]
        if runs:
            out += ["| benchmark | real time | items/s | counters |", "|---|---:|---:|---|"]
            for run in runs:
                counters = ", ".join(f"{key} {fmt(value)}" for key, value in run.items()
                                     if key.endswith("_per_s") or key.startswith("bytes_per"))
                out.append(f"| {run['name']} | {run.get('real_time', 0):,.1f} {run.get('time_unit', '')} | "
                           f"{fmt(run.get('items_per_second'))} | {counters} |")
            out.append("")
        # The program's own summary lines: its console output without colors,
        # without Google Benchmark's rows ("BM_x   123 ns   45 ns   1000 ...",
        # already in the table) and headers. Summary lines may start with a
        # benchmark name too ("BM_RedLockUnlock/3   13819 pairs/s  ratio ...").
        console = re.sub(r"\x1b\[[0-9;]*m", "", results.console.get(program, ""))
        summary = [line for line in console.splitlines()
                   if line.strip() and not line.lstrip().startswith("{") and not re.match(r"^(BM_\S+\s+[\d.]+ (ns|us|ms|s)\s|-{5}|Benchmark|Run on|"
                                                    r"Running |CPU Caches|  L\d|Load Average|\*\*\*|"
                                                    r"\d{4}-\d\d-\d\d)", line)]
        if summary:
            out += ["```"] + summary + ["```", ""]
        if not runs and not summary:
            out += ["(no output)", ""]
    return out


# ---- chart -----------------------------------------------------------------------------------------------

CHART_COLORS = ["#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#8c564b", "#d62728", "#ff7f0e", "#e377c2"]


def write_chart(results, path):
    """Median handoff gap (log scale) versus contenders, turnstile flavors
    (solid) and peers (dashed), with the 3-ping goal line."""
    series = []
    for flavor in FLAVORS:
        points = [(l["contenders"], l["gap_median_us"]) for l in results.workloads
                  if l["backend"] == "redis" and l["flavor"] == flavor and l["forced_handoff"]
                  and l["processes"] == 1 and l["gap_median_us"] > 0]
        series.append((f"turnstile {FLAVOR_TITLES[flavor]}", sorted(points), False))
    for library in results.peer_libraries():
        points = [(l["contenders"], l["gap_median_us"]) for l in results.peers
                  if l["library"] == library and l["workload"] == "forced_handoff" and l["gap_median_us"] > 0]
        series.append((library, sorted(points), True))
    guides = [(GOAL_GAP_PINGS * results.ping_us, "goal: 3 ping round trips")] if results.ping_us else []
    write_line_chart(path, "Median handoff gap vs contenders (one key, forced handoff, redis-server on loopback)",
                     "median gap, µs (log)", series, guides)


def write_throughput_chart(results, path):
    """Acquisitions per second (log scale) versus contenders (1, 2, 8, 32),
    one key, free-for-all, per turnstile flavor, with the EVALSHA ceiling
    (1 client ÷ 2) drawn in."""
    series = []
    for flavor in FLAVORS:
        points = [(l["contenders"], l["acquisitions_per_s"]) for l in results.workloads
                  if l["backend"] == "redis" and l["flavor"] == flavor and not l["forced_handoff"]
                  and l["keys"] == 1 and l["processes"] == 1 and l["acquisitions_per_s"] > 0]
        series.append((f"turnstile {FLAVOR_TITLES[flavor]}", sorted(points), False))
    ceiling = results.pair_ceiling()
    guides = []
    if ceiling:
        guides = [(ceiling, f"ceiling: EVALSHA 1 client ÷ 2 = {fmt(ceiling)}/s"),
                  (GOAL21_CEILING_RATIO * ceiling, f"goal: {GOAL21_CEILING_RATIO} × ceiling")]
    write_line_chart(path, "Acquisitions/s vs contenders (one key, free-for-all, redis-server on loopback)",
                     "acquisitions/s (log)", series, guides)


def write_line_chart(path, title, y_label, series, guides, x_label="contenders"):
    """A hand-written SVG: `series` as (name, [(contenders, value)], dashed)
    on a log2 x axis and a log10 y axis, `guides` as (value, label)
    horizontal dotted lines."""
    counts = sorted({x for _, points, _ in series for x, _ in points}) or [2, 8, 32]
    values = [y for _, points, _ in series for _, y in points] + [value for value, _ in guides]
    low = 10 ** math.floor(math.log10(min(values))) if values else 10
    high = 10 ** math.ceil(math.log10(max(values))) if values else 10000
    width, height = 760, 440
    left, right, top, bottom = 70, 230, 40, 50
    plot_w, plot_h = width - left - right, height - top - bottom

    def x_of(count):
        if len(counts) == 1:
            return left + plot_w / 2
        span = math.log2(counts[-1]) - math.log2(counts[0])
        return left + (math.log2(count) - math.log2(counts[0])) / span * plot_w

    def y_of(value):
        return top + (math.log10(high) - math.log10(value)) / (math.log10(high) - math.log10(low)) * plot_h

    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="22" font-size="14" font-weight="bold">{title}</text>']
    decade = low
    while decade <= high:
        for step in (1, 2, 5):
            value = decade * step
            if low <= value <= high:
                y = y_of(value)
                svg.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#ddd"/>')
                svg.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{value:g}</text>')
        decade *= 10
    for count in counts:
        x = x_of(count)
        svg.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" stroke="#eee"/>')
        svg.append(f'<text x="{x:.1f}" y="{top + plot_h + 18}" text-anchor="middle">{count}</text>')
    svg.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>')
    svg.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 10}" text-anchor="middle">{x_label}</text>')
    svg.append(f'<text transform="translate(18,{top + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle">'
               f'{y_label}</text>')
    for value, label in guides:
        y = y_of(value)
        svg.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#888" '
                   f'stroke-dasharray="2,3"/>')
        svg.append(f'<text x="{left + 4}" y="{y - 4:.1f}" fill="#555">{label}</text>')
    for index, (name, points, dashed) in enumerate(series):
        if not points:
            continue
        color = CHART_COLORS[index % len(CHART_COLORS)]
        coordinates = " ".join(f"{x_of(x):.1f},{y_of(y):.1f}" for x, y in points)
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        svg.append(f'<polyline points="{coordinates}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
        for x, y in points:
            svg.append(f'<circle cx="{x_of(x):.1f}" cy="{y_of(y):.1f}" r="3" fill="{color}"/>')
        legend_y = top + 10 + index * 20
        svg.append(f'<line x1="{left + plot_w + 15}" y1="{legend_y}" x2="{left + plot_w + 40}" y2="{legend_y}" '
                   f'stroke="{color}" stroke-width="2"{dash}/>')
        svg.append(f'<text x="{left + plot_w + 46}" y="{legend_y + 4}">{name}</text>')
    svg.append("</svg>")
    path.write_text("\n".join(svg) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results_dir", type=Path)
    parser.add_argument("markdown", type=Path)
    parser.add_argument("chart", type=Path)
    parser.add_argument("--throughput-chart", type=Path, default=None,
                        help="throughput chart (default: throughput.svg beside the handoff chart)")
    parser.add_argument("--shapes-chart", type=Path, default=None,
                        help="fair queue-length chart (default: shapes.svg beside the handoff chart)")
    parser.add_argument("--headline", type=Path, default=None, help="the page (docs/benchmarks.md) whose headline table to rewrite")
    parser.add_argument("--elapsed-s", type=int, default=None)
    args = parser.parse_args()
    results = Results(args.results_dir)
    out = ["# Benchmark results", "",
           "Written by `./dev bench` (benchmarks/run → benchmarks/report.py); do not edit by hand. "
           "Every figure below comes from one run on the machine described first.", ""]
    out += machine_section(results, args.elapsed_s)
    out += goals52_section(results)
    out += goals33_section(results)
    out += grid_section(results)
    out += fair_queue_section(results)
    out += held_locks_section(results)
    out += cluster_held_locks_section(results)
    out += scaling_section(results)
    out += crowd_section(results)
    out += goals21_section(results)
    out += goals_section(results)
    out += ceilings_section(results)
    out += uncontended_section(results)
    out += forced_handoff_section(results)
    out += budget_section(results)
    out += gap_rounds_section(results)
    out += ceiling_rounds_section(results)
    out += workload_table(
        results, "Free-for-all on one key (redis-server)",
        "Contenders loop acquire → release with nothing forcing a handoff: the releaser may win again. "
        "Ratio: acquisitions/s to EVALSHA(1 client)/2 (one key serializes).\n\n"
        "![acquisitions per second versus contenders](throughput.svg)",
        "redis", lambda l: l["keys"] == 1 and l["contenders"] > 1 and not l["forced_handoff"])
    out += workload_table(
        results, "64 keys (redis-server)",
        "Each acquisition picks one of 64 keys at random. Ratio: acquisitions/s to EVALSHA(8 clients)/2. "
        "The gap here includes time the key sat free: it is not a wake-up latency.",
        "redis", lambda l: l["keys"] > 1 and l["processes"] == 1)
    out += workload_table(
        results, "Several processes (redis-server)",
        "The processes × threads rows above, with their handoff gaps (contention_benchmark exec'd again in "
        "--worker mode, one client each).",
        "redis", lambda l: l["processes"] > 1, rows=results.grid)
    out += workload_table(
        results, "The fake Redis (raw speed of the code path)",
        "FakeBackend over a standalone in-process server, real threads, virtual clock frozen: no network, "
        "no ceiling; the same workloads.",
        "fake", lambda l: True)
    out += commands_section(results)
    out += read_mostly_section(results)
    if results.peers_skipped:
        out += [f"Peers skipped: {results.peers_skipped}.", ""]
    out += appendix_section(results)
    args.markdown.write_text("\n".join(out).rstrip() + "\n")
    write_chart(results, args.chart)
    write_throughput_chart(results, args.throughput_chart or args.chart.with_name("throughput.svg"))
    write_shapes_chart(results, args.shapes_chart or args.chart.with_name("shapes.svg"))
    if args.headline:
        rewrite_headline(results, args.headline)


if __name__ == "__main__":
    main()
