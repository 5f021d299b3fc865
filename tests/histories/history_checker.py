#!/usr/bin/env python3
"""Judges a recorded history of real processes taking one lock (issue #54).

Independent of turnstile's code: it reads only what the processes wrote.

A history is a list of events, each a dict with at least "t" (CLOCK_MONOTONIC
nanoseconds, one clock for every process on this host) and "kind":

  invoke   a client started `turnstile run` (client, name, op)
  complete its `turnstile run` exited (client, name, status: "ok", "fail",
           "lost", "unknown"; exit: the exit status)
  act      the command under the lock acted (client, name, hold: an id of
           this critical section, token: its fencing token or None, step:
           "start", "tick" or "end")
  fault    the nemesis did something (fault: its kind, target, detail; an
           interval fault has "until", the instant it ended)

What is judged, per lock name:
  * mutual exclusion: the critical sections (first to last act of a hold)
    of two holds never overlap; for a semaphore of N permits, at most N
    overlap;
  * fencing: the tokens of holds that carry one strictly increase in the
    order the holds first acted;
  * liveness: a client that gave up waiting ("fail") waited while the lock
    was held (by a hold that acted, or by a `run` whose outcome is unknown,
    which may have held it without acting) or a fault made it unavailable,
    not while it sat free;
  * typed failures: no `turnstile run` exits 70 (an internal error: a
    failure the CLI could not name; every failure is a typed error);
  * FIFO (a fair lock): a waiter that asked well before another (its
    invoke JOIN_MARGIN_MS earlier) acquires first, when nothing could have
    dropped it from the queue: no fault in its wait but faults aimed at a
    third client, and no release in the JOIN_MARGIN_MS after it asked (a
    waiter not yet listening when a release reaches it leaves the queue
    and joins again: include/turnstile/fair_lock.h).

A violation is *expected* only where docs/safety.md names that limit for a
fault drawn in the window that could have caused it (SAFETY_ROWS below, by
fault kind), and only for as long as that limit can last: the overlap ends
within a lease and the slack after the fault ended (the old holder's next
renewal finds the lock gone, `run` stops its command), plus ROW_EXTRA_NS for
a row whose fault takes longer to play out (a failover). It then names the
row. Anything else is unexpected.
"""

import json
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional

NS_PER_MS = 1_000_000

# Fault kinds whose effect docs/safety.md names as a limit, and the row's
# title there: a violation after one of them, within the window it could
# act on, is expected.
SAFETY_ROWS = {
    "server-restart-aof-none": "A restart without persistence",
    "server-restart-aof-everysec": "A restart without persistence",
    "flushall": "A flush, or a held key deleted",
    "delete-key": "A flush, or a held key deleted",
    "stop-run-and-guardian": "A stopped `turnstile run`",
    # The library program stopped (history_client.cpp): it may act once
    # after its deadline, not running to see it pass.
    "stop-client": "A paused holder",
    "sentinel-failover": "A failover",
    "master-restart-aof-none": "A failover",
    "master-restart-aof-everysec": "A failover",
    "master-restart-aof-always": "A failover",
    # FORCE: the replica takes over without waiting for the master's last
    # writes. A plain CLUSTER FAILOVER waits for them: no row excuses it.
    "cluster-failover-force": "A failover",
}

NS_PER_S = 1_000_000_000
# How much longer than a lease and the slack after the fault an expected
# overlap may last, by row: a failover plays out over the sentinels'
# failover timeout (3 s in soak.py) before the old master is demoted.
ROW_EXTRA_NS = {"A failover": 5 * NS_PER_S}

# Faults aimed at one client (detail "client"): they cannot reorder the
# queue of the others.
TARGETED_FAULTS = {"kill-run", "stop-run", "stop-run-and-guardian", "stop-command", "stop-client", "freeze-link",
                   "delay-link", "reset-link"}
JOIN_MARGIN_MS = 300

# Faults that make the lock unavailable for a while without any holder:
# a waiter giving up during one (or within a lease after) is not a
# liveness violation.
UNAVAILABLE_FAULTS = {
    "server-kill", "server-restart-aof-none", "server-restart-aof-everysec",
    "server-restart-aof-always", "master-restart-aof-none", "master-restart-aof-everysec",
    "master-restart-aof-always", "client-pause", "debug-sleep", "kill-run",
    "stop-run", "stop-run-and-guardian", "client-kill", "script-flush", "freeze-link", "delay-link", "reset-link", "sentinel-failover",
    "stop-command", "stop-client", "cluster-failover", "cluster-failover-force",
}


@dataclass
class Hold:
    client: str
    name: str
    hold: str
    token: Optional[int]
    first: int
    last: int
    ended: bool = False  # its "end" act was seen


@dataclass
class Violation:
    kind: str            # mutual_exclusion, fencing, liveness, fifo, internal_error
    name: str
    detail: str
    at_ns: int
    expected_row: Optional[str] = None  # the safety.md row, when expected

    @property
    def expected(self) -> bool:
        return self.expected_row is not None


@dataclass
class Verdict:
    holds: int = 0
    operations: int = 0
    fifo_pairs: int = 0  # pairs of waiters whose order was judged
    faults: Dict[str, int] = field(default_factory=dict)
    violations: List[Violation] = field(default_factory=list)

    @property
    def unexpected(self) -> List[Violation]:
        return [v for v in self.violations if not v.expected]


def holds_of(events: List[dict]) -> Dict[str, List[Hold]]:
    """Each hold's critical section: its first and last act, by name."""
    by_id: Dict[str, Hold] = {}
    for event in events:
        if event["kind"] != "act":
            continue
        key = event["hold"]
        hold = by_id.get(key)
        if hold is None:
            hold = Hold(client=event["client"], name=event["name"], hold=key, token=event.get("token"),
                        first=event["t"], last=event["t"])
            by_id[key] = hold
        hold.first = min(hold.first, event["t"])
        hold.last = max(hold.last, event["t"])
        if event.get("step") == "end":
            hold.ended = True
    by_name: Dict[str, List[Hold]] = {}
    for hold in by_id.values():
        by_name.setdefault(hold.name, []).append(hold)
    for holds in by_name.values():
        holds.sort(key=lambda h: (h.first, h.hold))
    return by_name


def explaining_fault(faults: List[dict], start_ns: int, end_ns: int, over_ns: Optional[int] = None,
                     bound_ns: int = 0) -> Optional[str]:
    """The safety.md row of a fault drawn within [start_ns, end_ns], if
    any, whose limit lasts until `over_ns` (the violation's end): at most
    `bound_ns` (and the row's ROW_EXTRA_NS) after the fault ended."""
    for fault in faults:
        row = SAFETY_ROWS.get(fault["fault"])
        if row is None or not start_ns <= fault["t"] <= end_ns:
            continue
        if over_ns is not None and over_ns > fault.get("until", fault["t"]) + bound_ns + ROW_EXTRA_NS.get(row, 0):
            continue
        return row
    return None


def check_exclusion(name: str, holds: List[Hold], permits: int, faults: List[dict], lease_ns: int,
                    slack_ns: int, verdict: Verdict) -> None:
    """At most `permits` critical sections of `name` at once."""
    active: List[Hold] = []
    for hold in holds:
        active = [other for other in active if other.last >= hold.first]
        if len(active) >= permits:
            # The earliest of the holds still acting: the one this one ran beside.
            beside = min(active, key=lambda h: h.first)
            overlap_end = min(beside.last, hold.last)
            overlap_ms = (overlap_end - hold.first) / NS_PER_MS
            row = explaining_fault(faults, beside.first - lease_ns, hold.first, overlap_end, lease_ns + slack_ns)
            verdict.violations.append(Violation(
                kind="mutual_exclusion", name=name, at_ns=hold.first, expected_row=row,
                detail=(f"{hold.client} (hold {hold.hold}, token {hold.token}) acted while "
                        f"{len(active)} other hold(s) still did, {beside.client} (hold {beside.hold}, "
                        f"token {beside.token}) for {overlap_ms:.1f} ms")))
        active.append(hold)


def check_fencing(name: str, holds: List[Hold], faults: List[dict], lease_ns: int, verdict: Verdict) -> None:
    """Tokens strictly increase in the order holds first acted."""
    previous: Optional[Hold] = None
    for hold in holds:
        if hold.token is None:
            continue
        if previous is not None and hold.token <= previous.token:
            row = explaining_fault(faults, previous.first - lease_ns, hold.first)
            verdict.violations.append(Violation(
                kind="fencing", name=name, at_ns=hold.first, expected_row=row,
                detail=(f"{hold.client} acted with token {hold.token} after {previous.client} "
                        f"acted with {previous.token}")))
        previous = hold


def free_gap_ns(start: int, end: int, busy: List[tuple]) -> int:
    """The longest part of [start, end] that no interval of `busy` covers."""
    cursor, longest = start, 0
    for begin, finish in sorted(busy):
        if finish < cursor:
            continue
        if begin > end:
            break
        longest = max(longest, min(begin, end) - cursor)
        cursor = max(cursor, finish)
    return max(longest, end - cursor)


def check_liveness(name: str, events: List[dict], holds: List[Hold], faults: List[dict], lease_ns: int,
                   slack_ns: int, verdict: Verdict) -> None:
    """A client that gave up waited while the lock was busy (held, or
    unavailable after a fault), never while it sat free for over `slack_ns`."""
    # A hold is busy from a slack before its first act (acquired, its
    # command starting) to its `run`'s exit (releasing), or a slack after
    # its last act when that is later (its exit was not recorded).
    completed = {e["hold"]: e["t"] for e in events if e["kind"] == "complete" and "hold" in e}
    busy = [(h.first - slack_ns, max(h.last + slack_ns, completed.get(h.hold, 0))) for h in holds]
    # A `run` that ended in an error ("unknown": e.g. acquired on a master
    # whose replica never acknowledged it, then released) may have held
    # the lock without acting, from its start to its end.
    started = {e["hold"]: e["t"] for e in events if e["kind"] == "invoke" and e.get("name") == name and "hold" in e}
    busy += [(started[e["hold"]], e["t"]) for e in events
             if e["kind"] == "complete" and e.get("status") == "unknown" and e.get("hold") in started]
    for fault in faults:
        if fault["fault"] in UNAVAILABLE_FAULTS:
            busy.append((fault["t"] - slack_ns, fault.get("until", fault["t"]) + lease_ns + slack_ns))
    invoked: Dict[str, int] = {}
    for event in events:
        if event.get("name") != name:
            continue
        if event["kind"] == "invoke":
            invoked[event["client"]] = event["t"]
        elif event["kind"] == "complete" and event["status"] == "fail" and event["client"] in invoked:
            start, end = invoked.pop(event["client"]), event["t"]
            gap = free_gap_ns(start, end, busy)
            if gap > slack_ns:
                verdict.violations.append(Violation(
                    kind="liveness", name=name, at_ns=end,
                    detail=(f"{event['client']} gave up after waiting {(end - start) / NS_PER_MS:.0f} ms, "
                            f"{gap / NS_PER_MS:.0f} ms of which the lock sat free")))


def check_fifo(name: str, events: List[dict], holds: List[Hold], faults: List[dict], lease_ns: int,
               join_ns: int, verdict: Verdict) -> None:
    """A fair lock's waiters acquire in the order they asked (see the
    module comment for which pairs are judged)."""
    asked = {e["hold"]: e["t"] for e in events
             if e["kind"] == "invoke" and e.get("name") == name and "hold" in e}
    releases = sorted(h.last for h in holds)
    ordered = sorted((asked[h.hold], h) for h in holds if h.hold in asked)

    def undisturbed(client_a: str, client_b: str, start: int, end: int) -> bool:
        for fault in faults:
            if fault.get("until", fault["t"]) < start or fault["t"] > end:
                continue
            target = fault.get("detail", {}).get("client")
            if fault["fault"] not in TARGETED_FAULTS or target is None or target in (client_a, client_b):
                return False
        return True

    for index, (asked_a, a) in enumerate(ordered):
        if any(asked_a <= release <= asked_a + join_ns for release in releases):
            continue  # a release may have found `a` not yet listening
        for asked_b, b in ordered[index + 1:]:
            if asked_b <= asked_a + join_ns or b.client == a.client:
                continue
            if not undisturbed(a.client, b.client, asked_a - lease_ns, a.first):
                continue
            verdict.fifo_pairs += 1
            if b.first < a.first:
                verdict.violations.append(Violation(
                    kind="fifo", name=name, at_ns=b.first,
                    detail=(f"{b.client} (hold {b.hold}) asked {(asked_b - asked_a) / NS_PER_MS:.0f} ms after "
                            f"{a.client} (hold {a.hold}) and acquired {(a.first - b.first) / NS_PER_MS:.0f} ms "
                            f"before it, no fault or release in between")))


EXIT_INTERNAL = 70  # sysexits' EX_SOFTWARE: `turnstile run`'s internal error


def check_typed_failures(events: List[dict], verdict: Verdict) -> None:
    """No `run` ended in an internal error (exit 70)."""
    for event in events:
        if event["kind"] == "complete" and event.get("exit") == EXIT_INTERNAL:
            verdict.violations.append(Violation(
                kind="internal_error", name=event.get("name", ""), at_ns=event["t"],
                detail=f"{event['client']}'s run exited 70: {event.get('stderr', '').strip()[-200:]}"))


def check(events: List[dict], permits: int = 1, lease_ms: int = 2000, slack_ms: int = 1500,
          fifo: bool = False) -> Verdict:
    """Judges `events` (see the module comment). `permits`: how many holds
    may act at once (1: a lock); `lease_ms`: the holders' lease (how long a
    fault can act on later holds); `slack_ms`: start-up and release time
    allowed around a critical section before the lock counts as free;
    `fifo`: the lock is fair (its waiters' order is judged)."""
    events = sorted(events, key=lambda e: e["t"])
    verdict = Verdict()
    faults = [e for e in events if e["kind"] == "fault"]
    for fault in faults:
        verdict.faults[fault["fault"]] = verdict.faults.get(fault["fault"], 0) + 1
    verdict.operations = sum(1 for e in events if e["kind"] == "invoke")
    lease_ns, slack_ns = lease_ms * NS_PER_MS, slack_ms * NS_PER_MS
    check_typed_failures(events, verdict)
    for name, holds in holds_of(events).items():
        verdict.holds += len(holds)
        check_exclusion(name, holds, permits, faults, lease_ns, slack_ns, verdict)
        check_fencing(name, holds, faults, lease_ns, verdict)
        check_liveness(name, events, holds, faults, lease_ns, slack_ns, verdict)
        if fifo:
            check_fifo(name, events, holds, faults, lease_ns, JOIN_MARGIN_MS * NS_PER_MS, verdict)
    return verdict


def read_history(path: str) -> List[dict]:
    """One JSON object per line; a torn last line (a process killed while
    writing) is skipped."""
    events = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return events


def main(argv: List[str]) -> int:
    if len(argv) < 2:
        print("usage: history_checker.py HISTORY.jsonl [PERMITS [LEASE_MS [fair]]]", file=sys.stderr)
        return 64
    permits = int(argv[2]) if len(argv) > 2 else 1
    lease_ms = int(argv[3]) if len(argv) > 3 else 2000
    verdict = check(read_history(argv[1]), permits=permits, lease_ms=lease_ms, fifo=argv[4:5] == ["fair"])
    for violation in verdict.violations:
        tag = f"expected ({violation.expected_row})" if violation.expected else "UNEXPECTED"
        print(f"{tag}: {violation.kind} on {violation.name}: {violation.detail}")
    print(f"holds {verdict.holds}, operations {verdict.operations}, faults {verdict.faults}, "
          f"unexpected {len(verdict.unexpected)}")
    return 1 if verdict.unexpected else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
