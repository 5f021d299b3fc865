#!/usr/bin/env python3
"""history_checker.py judges what it should (issue #54): synthetic
histories with the bugs the checker exists for (two holders at once, a
token going back, a waiter giving up on a free lock) are caught, the same
shapes after a fault safety.md names are expected, and clean histories pass.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import history_checker  # noqa: E402

MS = 1_000_000


def act(t_ms, client, hold, step, token=None, name="n"):
    return {"t": t_ms * MS, "kind": "act", "client": client, "name": name, "hold": hold, "token": token,
            "step": step}


def section(client, hold, start_ms, end_ms, token=None, name="n"):
    """A hold's acts: start, a tick in the middle, end."""
    return [act(start_ms, client, hold, "start", token, name), act((start_ms + end_ms) // 2, client, hold, "tick",
                                                                   token, name),
            act(end_ms, client, hold, "end", token, name)]


def fault(t_ms, kind, until_ms=None):
    event = {"t": t_ms * MS, "kind": "fault", "fault": kind, "detail": {}}
    if until_ms is not None:
        event["until"] = until_ms * MS
    return event


def operation(client, invoke_ms, complete_ms, status, name="n"):
    return [{"t": invoke_ms * MS, "kind": "invoke", "client": client, "name": name, "op": "run"},
            {"t": complete_ms * MS, "kind": "complete", "client": client, "name": name, "status": status}]


def ask(client, hold, t_ms, name="n"):
    """A client's `turnstile run` for `hold` invoked at t_ms."""
    return [{"t": t_ms * MS, "kind": "invoke", "client": client, "name": name, "op": "run", "hold": hold}]


class HistoryCheckerTest(unittest.TestCase):

    def test_holds_one_after_another_pass(self):
        events = section("a", "a.1", 0, 100, 1) + section("b", "b.1", 110, 200, 2) + section("a", "a.2", 210, 300, 3)
        verdict = history_checker.check(events)
        self.assertEqual(verdict.holds, 3)
        self.assertEqual(verdict.violations, [])

    def test_two_holders_at_once_are_caught(self):
        # A release that does not check its owner lets b in while a acts.
        events = section("a", "a.1", 0, 300, 1) + section("b", "b.1", 100, 200, 2)
        verdict = history_checker.check(events)
        self.assertEqual([v.kind for v in verdict.unexpected], ["mutual_exclusion"])
        self.assertIn("a (hold a.1", verdict.unexpected[0].detail)

    def test_a_holder_acting_after_its_lease_is_caught(self):
        # A renewal that revives a lost lock: a keeps ticking after b began.
        events = section("a", "a.1", 0, 100, 1) + [act(2500, "a", "a.1", "tick", 1)] + section("b", "b.1", 2100,
                                                                                                2200, 2)
        verdict = history_checker.check(events)
        self.assertEqual(len(verdict.unexpected), 1)
        self.assertEqual(verdict.unexpected[0].kind, "mutual_exclusion")

    def test_a_token_going_back_is_caught(self):
        events = section("a", "a.1", 0, 100, 5) + section("b", "b.1", 200, 300, 4)
        verdict = history_checker.check(events)
        self.assertEqual([v.kind for v in verdict.unexpected], ["fencing"])

    def test_a_semaphore_allows_its_permits_and_no_more(self):
        two = section("a", "a.1", 0, 300) + section("b", "b.1", 100, 200)
        self.assertEqual(history_checker.check(two, permits=2).violations, [])
        three = two + section("c", "c.1", 150, 250)
        verdict = history_checker.check(three, permits=2)
        self.assertEqual([v.kind for v in verdict.unexpected], ["mutual_exclusion"])

    def test_an_overlap_after_a_restart_without_persistence_is_expected(self):
        events = (section("a", "a.1", 0, 3000, 1) + [fault(500, "server-restart-aof-none", 600)] +
                  section("b", "b.1", 700, 800, 2))
        verdict = history_checker.check(events)
        self.assertEqual(verdict.unexpected, [])
        self.assertEqual([v.expected_row for v in verdict.violations], ["A restart without persistence"])

    def test_an_overlap_after_a_restart_with_every_write_synced_is_not_expected(self):
        events = (section("a", "a.1", 0, 3000, 1) + [fault(500, "server-restart-aof-always", 600)] +
                  section("b", "b.1", 700, 800, 2))
        self.assertEqual([v.kind for v in history_checker.check(events).unexpected], ["mutual_exclusion"])

    def test_a_fault_long_before_does_not_excuse_an_overlap(self):
        events = ([fault(0, "flushall")] + section("a", "a.1", 10_000, 13_000, 1) +
                  section("b", "b.1", 12_000, 12_100, 2))
        self.assertEqual(len(history_checker.check(events).unexpected), 1)

    def test_an_expected_overlap_lasts_no_longer_than_its_limit(self):
        # A renewal that revives a lost lock: after the flush, a's renewals
        # go on succeeding and a acts beside b for seconds, far beyond the
        # next renewal at which a should have found the lock gone.
        events = (section("a", "a.1", 0, 9000, 1) + [fault(500, "flushall")] + section("b", "b.1", 700, 8000, 2))
        self.assertEqual([v.kind for v in history_checker.check(events).unexpected], ["mutual_exclusion"])
        # The same overlap ending within a lease and the slack is the row's.
        short = (section("a", "a.1", 0, 3000, 1) + [fault(500, "flushall")] + section("b", "b.1", 700, 3500, 2))
        self.assertEqual([v.expected_row for v in history_checker.check(short).violations],
                         ["A flush, or a held key deleted"])

    def test_a_failover_may_play_out_for_longer(self):
        events = (section("a", "a.1", 0, 7000, 1) + [fault(500, "sentinel-failover")] +
                  section("b", "b.1", 700, 7500, 2))
        self.assertEqual([v.expected_row for v in history_checker.check(events).violations], ["A failover"])

    def test_a_fair_waiter_that_asked_later_acquiring_first_is_caught(self):
        # A fair release that skips the head: b, behind a, is served first.
        events = (ask("c", "c.1", 0) + section("c", "c.1", 10, 1000) + ask("a", "a.1", 100) +
                  ask("b", "b.1", 600) + section("b", "b.1", 1010, 1100) + section("a", "a.1", 1110, 1200))
        verdict = history_checker.check(events, fifo=True)
        self.assertEqual([v.kind for v in verdict.unexpected], ["fifo"])
        self.assertIn("b (hold b.1) asked 500 ms after a (hold a.1)", verdict.unexpected[0].detail)
        self.assertEqual(history_checker.check(events).violations, [], "judged for a fair lock only")

    def test_fair_waiters_served_in_order_pass(self):
        events = (ask("c", "c.1", 0) + section("c", "c.1", 10, 1000) + ask("a", "a.1", 100) +
                  ask("b", "b.1", 600) + section("a", "a.1", 1010, 1100) + section("b", "b.1", 1110, 1200))
        verdict = history_checker.check(events, fifo=True)
        self.assertEqual(verdict.violations, [])
        self.assertEqual(verdict.fifo_pairs, 2)  # (c, b) and (a, b); c and a asked too close

    def test_a_reordered_queue_after_a_fault_or_a_release_is_not_judged(self):
        base = (ask("c", "c.1", 0) + section("c", "c.1", 10, 1000) + ask("a", "a.1", 100) + ask("b", "b.1", 600) +
                section("b", "b.1", 1010, 1100) + section("a", "a.1", 1110, 1200))
        # A server-wide fault in a's wait (its queue entry may be gone).
        self.assertEqual(history_checker.check(base + [fault(700, "flushall")], fifo=True).unexpected, [])
        # A fault aimed at a itself.
        aimed = fault(700, "stop-run", 900)
        aimed["detail"] = {"client": "a"}
        self.assertEqual(history_checker.check(base + [aimed], fifo=True).unexpected, [])
        # A fault aimed at a third client leaves the order judged.
        aimed["detail"] = {"client": "c"}
        self.assertEqual(len(history_checker.check(base + [aimed], fifo=True).unexpected), 1)
        # A release right after a asked: a may not have been listening yet.
        early = (ask("c", "c.1", 0) + section("c", "c.1", 10, 150) + ask("d", "d.1", 5) +
                 section("d", "d.1", 160, 1000) + ask("a", "a.1", 100) + ask("b", "b.1", 600) +
                 section("b", "b.1", 1010, 1100) + section("a", "a.1", 1110, 1200))
        self.assertEqual(history_checker.check(early, fifo=True).unexpected, [])

    def test_giving_up_on_a_free_lock_is_caught(self):
        # A fair release that skips the head: the lock sits free while a waits.
        events = section("b", "b.1", 0, 100) + operation("a", 500, 3500, "fail")
        verdict = history_checker.check(events)
        self.assertEqual([v.kind for v in verdict.unexpected], ["liveness"])

    def test_giving_up_while_a_holder_releases_passes(self):
        # b's last act at 100, its `run` exits (releasing) at 2400.
        events = (section("b", "b.1", 0, 100) + [{"t": 2400 * MS, "kind": "complete", "client": "b", "name": "n",
                                                  "hold": "b.1", "status": "ok"}] +
                  operation("a", 500, 3500, "fail"))
        self.assertEqual(history_checker.check(events).violations, [])

    def test_giving_up_while_a_run_of_unknown_outcome_may_hold_passes(self):
        # c's `run` acquired on a master whose replica never acknowledged
        # it, held it 3 s without acting, released it and failed (69).
        events = ([{"t": 0, "kind": "invoke", "client": "c", "name": "n", "op": "run", "hold": "c.1"},
                   {"t": 3200 * MS, "kind": "complete", "client": "c", "name": "n", "hold": "c.1",
                    "status": "unknown"}] + operation("a", 10, 3100, "fail"))
        self.assertEqual(history_checker.check(events).violations, [])

    def test_giving_up_while_the_lock_is_held_passes(self):
        events = section("b", "b.1", 0, 3500) + operation("a", 50, 3050, "fail")
        self.assertEqual(history_checker.check(events).violations, [])

    def test_giving_up_while_the_server_is_paused_passes(self):
        events = (section("b", "b.1", 0, 100) + [fault(200, "client-pause", 2900)] +
                  operation("a", 50, 3050, "fail"))
        self.assertEqual(history_checker.check(events).violations, [])

    def test_an_internal_error_is_caught(self):
        events = operation("a", 0, 100, "unknown")
        events[1]["exit"] = 70
        events[1]["stderr"] = "turnstile: internal error: UNBLOCKED force unblock"
        verdict = history_checker.check(events)
        self.assertEqual([v.kind for v in verdict.unexpected], ["internal_error"])
        self.assertIn("UNBLOCKED", verdict.unexpected[0].detail)
        events[1]["exit"] = 69  # a typed failure: Redis unavailable
        self.assertEqual(history_checker.check(events).violations, [])

    def test_a_torn_last_line_is_skipped(self):
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"torn-{os.getpid()}.jsonl")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write('{"t": 1, "kind": "act", "client": "a", "name": "n", "hold": "a.1", "step": "start"}\n')
            handle.write('{"t": 2, "kind": "act", "cli')
        try:
            self.assertEqual(len(history_checker.read_history(path)), 1)
        finally:
            os.remove(path)


if __name__ == "__main__":
    unittest.main()
