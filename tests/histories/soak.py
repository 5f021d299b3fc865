#!/usr/bin/env python3
"""Randomised real-server histories (issue #54): real `turnstile run`
processes take one lock on a real redis-server (alone, a master with a
replica under three sentinels, or a Cluster of three masters with a
replica each) while a nemesis draws faults from a seed;
every operation is recorded and history_checker.py judges the whole
history.

  soak.py --turnstile PATH [--redis-server PATH] [--minutes M | --histories N]
          [--seconds S] [--seed S] [--clients N] [--hold-ms MIN,MAX] [--keep DIR]

Each history: one redis-server on a free loopback port (persistence drawn:
appendonly no, appendfsync everysec or always), one lock name, one flavor
drawn (reentrant, fair, token: `run`'s own fencing tokens; a semaphore of 2
permits), N clients each looping `turnstile run --lease 2s -w 3s NAME --
critical_section.py` for S seconds, and a nemesis drawing from FAULTS every
0.2-1 s. Processes are stopped by the PIDs this script started, never by
name. A history with an unexpected violation is kept (with the seed and the
command that replays its draw) and the exit status is 1.
"""

import argparse
import concurrent.futures
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import history_checker  # noqa: E402
from link_proxy import LinkProxy  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CRITICAL_SECTION = os.path.join(HERE, "critical_section.py")
LEASE = "2s"
LEASE_MS = 2000
WAIT = "3s"
PERMITS = 2  # the semaphore flavor's
# (flag list, permits at once) per flavor: `run` fences reentrant and fair
# locks by itself; the token lock has no token.
FLAVORS = {
    "reentrant": ([], 1),
    "fair": (["--fair"], 1),
    "token": (["--token"], 1),
    "semaphore": (["--permits", str(PERMITS)], PERMITS),
}
PERSISTENCE = ["none", "everysec", "always"]
# Fault kinds and their weights.
FAULTS = {
    "kill-run": 3,
    "stop-run": 3,
    "stop-run-and-guardian": 1,
    "stop-command": 2,
    "server-restart": 1,
    "client-pause": 2,
    "debug-sleep": 1,
    "script-flush": 2,
    "client-kill": 2,
    "flushall": 1,
    "freeze-link": 2,
    "delay-link": 3,
    "reset-link": 1,
    "sentinel-failover": 2,
    "cluster-failover": 2,
    "cluster-failover-force": 1,
}
TOPOLOGIES = ("single", "sentinel", "cluster")
# The faults only some topologies draw (the others: every topology).
FAULT_TOPOLOGIES = {
    "freeze-link": ("single",),
    "delay-link": ("single",),
    "reset-link": ("single",),
    "sentinel-failover": ("sentinel",),
    "cluster-failover": ("cluster",),
    "cluster-failover-force": ("cluster",),
}
# One history in this many draws no fault at all: a baseline where every
# check applies in full (FIFO, judged only in waits no fault touched).
QUIET_ONE_IN = 8
SERVER_START_TIMEOUT_S = 10
START_ATTEMPTS = 3  # a first start whose port was taken tries another
# Every wait for a process this script started is bounded.
PROCESS_EXIT_TIMEOUT_S = 20


def now_ns() -> int:
    return time.monotonic_ns()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


REPLY_TAIL_S = 0.02  # a reply's later parts arrive within this of its first


def reply_bytes(port: int, *args: str, timeout_s: float = 5.0) -> bytes:
    """One command over RESP; its raw reply (up to 64 KB), for reading,
    not parsing: what arrives until the server is quiet for REPLY_TAIL_S."""
    payload = f"*{len(args)}\r\n".encode()
    for arg in args:
        data = arg.encode()
        payload += f"${len(data)}\r\n".encode() + data + b"\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as connection:
        connection.sendall(payload)
        reply = connection.recv(65536)
        connection.settimeout(REPLY_TAIL_S)
        try:
            while len(reply) < 65536:
                more = connection.recv(65536 - len(reply))
                if not more:
                    break
                reply += more
        except socket.timeout:
            pass
        return reply


def resp_command(port: int, *args: str, timeout_s: float = 5.0) -> bytes:
    """One command over RESP; the raw reply's first line."""
    return reply_bytes(port, *args, timeout_s=timeout_s).split(b"\r\n", 1)[0]


class Server:
    """A redis-server this script started, stopped only by its PID."""

    def __init__(self, binary: str, directory: str, persistence: str, extra: Optional[List[str]] = None,
                 config: str = ""):
        self.binary, self.directory, self.persistence = binary, directory, persistence
        self.extra, self.config = extra or [], config
        self.port = free_port()
        self.process: Optional[subprocess.Popen] = None
        self.started = False

    def start(self) -> None:
        """Starts it and waits for its PONG. A first start whose port was
        taken meanwhile (free_port() can only pick one free at that
        instant) tries fresh ports; a restart keeps its port, which the
        clients know."""
        for attempt in range(1, START_ATTEMPTS + 1):
            if self.start_once() or self.started:
                self.started = True
                return
            self.kill()
            if attempt < START_ATTEMPTS:
                self.port = free_port()
                self.extra = [str(free_port()) if i > 0 and self.extra[i - 1] == "--cluster-port" else arg
                              for i, arg in enumerate(self.extra)]
        raise RuntimeError(f"redis-server on port {self.port} did not answer within {SERVER_START_TIMEOUT_S} s")

    def start_once(self) -> bool:
        args = [self.binary] + ([self.config] if self.config else []) + [
            "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.directory, "--daemonize", "no",
            "--loglevel", "warning"]
        if not self.config:  # a sentinel takes none of these
            args += ["--save", "", "--enable-debug-command", "yes"]
            if self.persistence == "none":
                args += ["--appendonly", "no"]
            else:
                args += ["--appendonly", "yes", "--appendfsync", self.persistence]
        args += self.extra
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                if resp_command(self.port, "PING", timeout_s=0.5) == b"+PONG":
                    return True
            except OSError:
                pass
            time.sleep(0.02)
        return False  # exited (its port taken) or silent

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=PROCESS_EXIT_TIMEOUT_S)

    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"


SENTINEL_MASTER = "mymaster"
SENTINELS = 3


class SentinelGroup:
    """A master, one replica and three sentinels (down-after 1 s), every
    process started here and stopped by its PID."""

    def __init__(self, binary: str, directory: str, persistence: str):
        self.master = Server(binary, os.path.join(directory, "a"), persistence)
        self.replica = Server(binary, os.path.join(directory, "b"), persistence)
        self.sentinels = [Server(binary, os.path.join(directory, f"s{i}"), "none",
                                 config=os.path.join(directory, f"s{i}", "sentinel.conf"), extra=["--sentinel"])
                          for i in range(SENTINELS)]
        for server in [self.master, self.replica] + self.sentinels:
            os.makedirs(server.directory, exist_ok=True)

    def start(self) -> None:
        self.master.start()
        self.replica.extra = ["--replicaof", "127.0.0.1", str(self.master.port)]
        self.replica.start()
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while b"connected_slaves:1" not in reply_bytes(self.master.port, "INFO", "replication"):
            if time.monotonic() > deadline:
                raise RuntimeError("the replica did not attach to its master")
            time.sleep(0.05)
        for sentinel in self.sentinels:
            with open(sentinel.config, "w", encoding="utf-8") as config:
                config.write(f"sentinel monitor {SENTINEL_MASTER} 127.0.0.1 {self.master.port} 2\n"
                             f"sentinel down-after-milliseconds {SENTINEL_MASTER} 1000\n"
                             f"sentinel failover-timeout {SENTINEL_MASTER} 3000\n")
            sentinel.start()
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        for sentinel in self.sentinels:
            while b"slave" not in reply_bytes(sentinel.port, "SENTINEL", "REPLICAS", SENTINEL_MASTER):
                if time.monotonic() > deadline:
                    raise RuntimeError("a sentinel did not discover the replica")
                time.sleep(0.05)

    def current_master(self) -> Server:
        reply = reply_bytes(self.sentinels[0].port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SENTINEL_MASTER)
        return self.replica if str(self.replica.port).encode() in reply else self.master

    def url(self) -> str:
        return "redis+sentinel://" + ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels) + "/" + SENTINEL_MASTER

    def kill(self) -> None:
        for server in self.sentinels + [self.replica, self.master]:
            server.kill()




CLUSTER_MASTERS = 3
CLUSTER_NODE_TIMEOUT_MS = 1000


class ClusterGroup:
    """A Redis Cluster of three masters with a replica each (node timeout
    1 s), created with redis-cli --cluster create; every process started
    here and stopped by its PID."""

    def __init__(self, binary: str, directory: str, persistence: str):
        self.nodes = [Server(binary, os.path.join(directory, f"n{i}"), persistence)
                      for i in range(2 * CLUSTER_MASTERS)]
        for node in self.nodes:
            os.makedirs(node.directory, exist_ok=True)
            node.extra = ["--cluster-enabled", "yes", "--cluster-node-timeout", str(CLUSTER_NODE_TIMEOUT_MS),
                          "--cluster-port", str(free_port()), "--cluster-config-file", "nodes.conf"]

    def start(self) -> None:
        for node in self.nodes:
            node.start()
        create = subprocess.run(
            ["redis-cli", "--cluster", "create", *[f"127.0.0.1:{n.port}" for n in self.nodes],
             "--cluster-replicas", "1", "--cluster-yes"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=SERVER_START_TIMEOUT_S * 3, check=False)
        if create.returncode != 0:
            raise RuntimeError("redis-cli --cluster create failed")
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S * 3
        while not all(b"cluster_state:ok" in reply_bytes(n.port, "CLUSTER", "INFO") for n in self.nodes):
            if time.monotonic() > deadline:
                raise RuntimeError("the cluster did not reach cluster_state:ok")
            time.sleep(0.05)

    def node_lines(self) -> List[List[str]]:
        """CLUSTER NODES as seen by the first node that answers."""
        for node in self.nodes:
            try:
                text = reply_bytes(node.port, "CLUSTER", "NODES", timeout_s=1.0).decode(errors="replace")
            except OSError:
                continue
            lines = [line.split() for line in text.splitlines() if "@" in line]
            if lines:
                return lines
        return []

    def owner(self, name: str) -> Server:
        """The node serving `name`'s slot now (the first node if unknown)."""
        slot = int(resp_command(self.nodes[0].port, "CLUSTER", "KEYSLOT", name).lstrip(b":") or 0)
        for fields in self.node_lines():
            if "master" not in fields[2] or "fail" in fields[2]:
                continue
            for part in fields[8:]:
                low, _, high = part.partition("-")
                if low.isdigit() and int(low) <= slot <= int(high or low):
                    port = int(fields[1].split("@")[0].rsplit(":", 1)[1])
                    return next((n for n in self.nodes if n.port == port), self.nodes[0])
        return self.nodes[0]

    def replica_of(self, master: Server) -> Optional[Server]:
        lines = self.node_lines()
        master_id = next((f[0] for f in lines if f[1].split("@")[0].endswith(f":{master.port}")), None)
        for fields in lines:
            if fields[3] == master_id and "slave" in fields[2] and "fail" not in fields[2]:
                port = int(fields[1].split("@")[0].rsplit(":", 1)[1])
                return next((n for n in self.nodes if n.port == port), None)
        return None

    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes[:CLUSTER_MASTERS])

    def kill(self) -> None:
        for node in self.nodes:
            node.kill()


LIVE_HISTORIES: "set" = set()  # the histories running now, for abandon()
LIVE_LOCK = threading.Lock()


def abandon(signum, _frame) -> None:
    """Stopped by a signal (Ctrl-C, `kill -TERM`): continue every process
    the nemesis stopped (a stopped process ignores SIGTERM until then), and
    stop what each history started, by its PID, before exiting."""
    with LIVE_LOCK:
        histories = list(LIVE_HISTORIES)
    for history in histories:
        history.release_processes()
    os._exit(128 + signum)


class History:
    """One history: its server, clients, nemesis and recorded events."""

    def __init__(self, args, seed: int, directory: str):
        self.args, self.seed, self.directory = args, seed, directory
        self.random = random.Random(seed)
        self.flavor = self.random.choice(sorted(args.flavors))
        self.persistence = self.random.choice(PERSISTENCE)
        self.name = f"soak:{seed}"
        self.path = os.path.join(directory, "history.jsonl")
        self.lock = threading.Lock()
        self.runs: Dict[str, subprocess.Popen] = {}  # client -> its running `turnstile run`
        self.stopped: List[int] = []  # PIDs the nemesis stopped, to continue at the end
        self.finish_at = 0.0
        self.topology = self.random.choice(sorted(args.topologies))
        self.cluster: Optional[ClusterGroup] = None
        if self.topology == "sentinel":
            self.group: Optional[SentinelGroup] = SentinelGroup(args.redis_server, directory, self.persistence)
            self.server = self.group.master
        elif self.topology == "cluster":
            self.group = None
            self.cluster = ClusterGroup(args.redis_server, directory, self.persistence)
            self.server = self.cluster.nodes[0]
        else:
            self.group = None
            self.server = Server(args.redis_server, directory, self.persistence)
        self.links: Dict[str, LinkProxy] = {}  # client -> its own link to the server
        # Clients that are the library program (history_client.cpp), drawn
        # one in two when it is given; the others run `turnstile run`.
        self.library_clients = set()
        if args.library_client:
            self.library_clients = {f"c{i}" for i in range(args.clients) if self.random.random() < 0.5}
        self.quiet = self.random.randrange(QUIET_ONE_IN) == 0
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def record(self, event: dict) -> None:
        event.setdefault("t", now_ns())
        os.write(self.fd, (json.dumps(event) + "\n").encode())

    # ---- clients ----

    def client_loop(self, client: str, seed: int) -> None:
        draw = random.Random(seed)
        flags, _ = FLAVORS[self.flavor]
        count = 0
        while time.monotonic() < self.finish_at:
            count += 1
            hold = f"{client}.{count}"
            hold_ms = draw.randint(*self.args.hold_ms)
            # Under Sentinel, clients find the master through the sentinels
            # (no link of their own: the link faults are not drawn).
            if self.group:
                url = self.group.url()
            elif self.cluster:
                url = self.cluster.url()
            else:
                url = f"redis://127.0.0.1:{self.links[client].port}"
            if client in self.library_clients:
                _, permits = FLAVORS[self.flavor]
                command = [self.args.library_client, url, self.name, self.flavor, self.path, client, hold,
                           str(hold_ms), str(permits)]
            else:
                command = [self.args.turnstile, "run", "--redis", url, "--lease", LEASE, "-w", WAIT,
                           "-q", *flags, self.name, "--", sys.executable, CRITICAL_SECTION, self.path, client, hold,
                           str(hold_ms)]
            self.record({"kind": "invoke", "client": client, "name": self.name, "op": "run", "hold": hold})
            process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            with self.lock:
                self.runs[client] = process
            try:
                _, stderr = process.communicate(timeout=PROCESS_EXIT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGCONT)
                process.kill()
                _, stderr = process.communicate()
            with self.lock:
                self.runs.pop(client, None)
            code = process.returncode
            status = {0: "ok", 1: "fail", 75: "lost"}.get(code, "unknown")
            self.record({"kind": "complete", "client": client, "name": self.name, "hold": hold, "status": status,
                         "exit": code, "stderr": stderr.decode(errors="replace")[-300:]})
            time.sleep(draw.uniform(0, 0.05))

    # ---- the nemesis ----

    def random_run(self) -> Optional[tuple]:
        """(client, its running `turnstile run`), drawn, or None."""
        with self.lock:
            running = sorted((client, p) for client, p in self.runs.items() if p.poll() is None)
        return self.random.choice(running) if running else None

    def master(self) -> Server:
        """The server that holds the lock's keys now."""
        if self.group:
            return self.group.current_master()
        if self.cluster:
            return self.cluster.owner(self.name)
        return self.server

    def random_link(self) -> str:
        return self.random.choice(sorted(self.links))

    def child_of(self, process: subprocess.Popen, guardian: bool) -> Optional[int]:
        """The guardian (the child of `run` running the same program, a
        fork) or the command (the other child)."""
        try:
            with open(f"/proc/{process.pid}/task/{process.pid}/children") as handle:
                children = [int(pid) for pid in handle.read().split()]
            with open(f"/proc/{process.pid}/cmdline", "rb") as handle:
                own = handle.read()
            for child in children:
                with open(f"/proc/{child}/cmdline", "rb") as handle:
                    if (handle.read() == own) == guardian:
                        return child
        except OSError:
            return None
        return None

    def stop_for(self, pids: List[int], seconds: float) -> None:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGSTOP)
                self.stopped.append(pid)
            except OSError:
                pass
        time.sleep(seconds)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass

    def fault(self, kind: str) -> None:
        draw = self.random
        started = now_ns()
        detail: Dict[str, object] = {}
        fault_kind = kind
        if kind == "kill-run":
            drawn = self.random_run()
            if drawn is None:
                return
            client, process = drawn
            os.kill(process.pid, signal.SIGKILL)
            detail.update(client=client, pid=process.pid)
        elif kind in ("stop-run", "stop-run-and-guardian", "stop-command"):
            drawn = self.random_run()
            if drawn is None:
                return
            client, process = drawn
            detail["client"] = client
            pids = [process.pid]
            if client in self.library_clients:
                # The library program is its own critical section: stopped,
                # it is a paused holder (no guardian, no command apart).
                if kind != "stop-run":
                    return
                fault_kind = "stop-client"
            elif kind != "stop-run":
                child = self.child_of(process, guardian=kind == "stop-run-and-guardian")
                if child is None:
                    return
                pids = [child] if kind == "stop-command" else pids + [child]
            seconds = draw.uniform(0.3, 4.0)
            detail.update(pids=pids, seconds=round(seconds, 3))
            self.record({"t": started, "kind": "fault", "fault": fault_kind, "detail": detail,
                         "until": started + int(seconds * 1e9)})
            self.stop_for(pids, seconds)
            return
        elif kind == "server-restart":
            # Under Sentinel a killed master may be failed over before it is
            # back (down-after 1 s), and it comes back as its replica.
            fault_kind = (f"master-restart-aof-{self.persistence}" if self.group or self.cluster
                          else f"server-restart-aof-{self.persistence}")
            server = self.master()
            server.kill()
            down_s = draw.uniform(0, 1.0)
            time.sleep(down_s)
            server.start()
            detail["down_s"] = round(down_s, 3)
            self.record({"t": started, "kind": "fault", "fault": fault_kind, "detail": detail, "until": now_ns()})
            return
        elif kind == "client-pause":
            ms = draw.randint(100, 3000)
            resp_command(self.master().port, "CLIENT", "PAUSE", str(ms))
            self.record({"t": started, "kind": "fault", "fault": kind, "detail": {"ms": ms},
                         "until": started + ms * 1_000_000})
            return
        elif kind == "debug-sleep":
            seconds = round(draw.uniform(0.1, 1.5), 3)
            self.record({"t": started, "kind": "fault", "fault": kind, "detail": {"seconds": seconds},
                         "until": started + int(seconds * 1e9)})
            resp_command(self.master().port, "DEBUG", "SLEEP", str(seconds), timeout_s=seconds + 5)
            return
        elif kind == "freeze-link":
            client = self.random_link()
            seconds = draw.uniform(0.2, 4.0)
            self.links[client].freeze(seconds)
            self.record({"t": started, "kind": "fault", "fault": kind,
                         "detail": {"client": client, "seconds": round(seconds, 3)},
                         "until": started + int(seconds * 1e9)})
            return
        elif kind == "delay-link":
            client = self.random_link()
            window_s, delay_s = draw.uniform(0.5, 3.0), draw.uniform(1.0, 4.0)
            self.links[client].delay(window_s, delay_s)
            self.record({"t": started, "kind": "fault", "fault": kind,
                         "detail": {"client": client, "window_s": round(window_s, 3), "delay_s": round(delay_s, 3)},
                         "until": started + int((window_s + delay_s) * 1e9)})
            return
        elif kind == "reset-link":
            client = self.random_link()
            self.links[client].reset()
            detail["client"] = client
        elif kind == "sentinel-failover":
            resp_command(self.group.sentinels[0].port, "SENTINEL", "FAILOVER", SENTINEL_MASTER)
        elif kind in ("cluster-failover", "cluster-failover-force"):
            # The lock's master's replica takes over: CLUSTER FAILOVER waits
            # until it has every write (none lost); FORCE does not.
            master = self.master()
            replica = self.cluster.replica_of(master)
            if replica is None:
                return
            words = ["CLUSTER", "FAILOVER"] + (["FORCE"] if kind == "cluster-failover-force" else [])
            detail.update(master=master.port, replica=replica.port,
                          reply=resp_command(replica.port, *words).decode(errors="replace"))
        elif kind == "script-flush":
            resp_command(self.master().port, "SCRIPT", "FLUSH")
        elif kind == "client-kill":
            resp_command(self.master().port, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        elif kind == "flushall":
            resp_command(self.master().port, "FLUSHALL")
        self.record({"t": started, "kind": "fault", "fault": fault_kind, "detail": detail})

    def nemesis_loop(self) -> None:
        kinds = [kind for kind in sorted(self.args.faults) if self.topology in FAULT_TOPOLOGIES.get(kind, TOPOLOGIES)]
        if not kinds or self.quiet:
            return
        weights = [FAULTS[k] for k in kinds]
        while time.monotonic() < self.finish_at:
            time.sleep(self.random.uniform(0.2, 1.0))
            if time.monotonic() >= self.finish_at:
                break
            kind = self.random.choices(kinds, weights)[0]
            try:
                self.fault(kind)
            except (OSError, RuntimeError) as error:  # a server restarting meanwhile, or not back
                self.record({"kind": "nemesis-error", "fault": kind, "error": str(error)})

    def deployment(self):
        return self.group or self.cluster or self.server

    def release_processes(self) -> None:
        """Continues what the nemesis stopped; kills the running clients and
        the deployment, each by its PID."""
        with self.lock:
            runs = list(self.runs.values())
        for pid in list(self.stopped) + [process.pid for process in runs]:
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
        for process in runs:
            try:
                process.kill()
            except OSError:
                pass
        self.deployment().kill()

    def run(self) -> history_checker.Verdict:
        try:
            self.deployment().start()
        except (OSError, RuntimeError, subprocess.SubprocessError):
            self.deployment().kill()  # what did start, stopped by its PID
            os.close(self.fd)
            raise
        with LIVE_LOCK:
            LIVE_HISTORIES.add(self)
        # Under Sentinel and Cluster, clients find the servers themselves:
        # the link faults (single only) need no proxies there.
        if self.topology == "single":
            self.links = {f"c{i}": LinkProxy(self.server.port) for i in range(self.args.clients)}
        self.finish_at = time.monotonic() + self.args.seconds
        clients = [threading.Thread(target=self.client_loop, args=(f"c{i}", self.seed * 1000 + i))
                   for i in range(self.args.clients)]
        nemesis = threading.Thread(target=self.nemesis_loop)
        for thread in clients + [nemesis]:
            thread.start()
        nemesis.join(timeout=self.args.seconds + 30)
        for pid in self.stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
        for thread in clients:
            thread.join(timeout=PROCESS_EXIT_TIMEOUT_S * 2)
        if self.group is not None:
            self.group.kill()
        elif self.cluster is not None:
            self.cluster.kill()
        else:
            self.server.kill()
        for link in self.links.values():
            link.close()
        os.close(self.fd)
        with LIVE_LOCK:
            LIVE_HISTORIES.discard(self)
        _, permits = FLAVORS[self.flavor]
        return history_checker.check(history_checker.read_history(self.path), permits=permits, lease_ms=LEASE_MS,
                                     fifo=self.flavor == "fair")


def run_one(args, seed: int):
    """One history from `seed`: (its History, its Verdict or None if its
    deployment could not be started, its directory)."""
    directory = tempfile.mkdtemp(prefix=f"turnstile-soak-{seed}-")
    history = History(args, seed, directory)
    try:
        return history, history.run(), directory
    except (OSError, RuntimeError, subprocess.SubprocessError) as error:
        print(f"soak: seed {seed}: the {history.topology} deployment did not start ({error}); not counted",
              flush=True)
        return history, None, directory


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turnstile", required=True)
    parser.add_argument("--library-client", default="",
                        help="tests/histories/history_client: half the clients, drawn, use the library directly")
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    parser.add_argument("--minutes", type=float, default=0)
    parser.add_argument("--histories", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=3.0, help="length of one history")
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--parallel", type=int, default=2, help="histories at once, each on its own server")
    parser.add_argument("--keep", default="", help="where failing histories are kept (default: a temporary dir)")
    parser.add_argument("--flavors", default=",".join(sorted(FLAVORS)),
                        help="the flavors drawn from, comma-separated (default: all)")
    parser.add_argument("--faults", default=",".join(sorted(FAULTS)),
                        help="the fault kinds the nemesis draws from, comma-separated, or none (default: all)")
    parser.add_argument("--topologies", default=",".join(TOPOLOGIES),
                        help="the deployments drawn from, comma-separated: single, sentinel, cluster (default: all)")
    parser.add_argument("--hold-ms", default="10,200",
                        help="MIN,MAX: how long each critical section lasts, drawn (default: 10,200)")
    parser.add_argument("--stop-at-first", action="store_true",
                        help="stop after the first history with an unexpected violation (a mutant caught)")
    args = parser.parse_args()
    args.faults = [kind for kind in args.faults.split(",") if kind and kind != "none"]
    if any(kind not in FAULTS for kind in args.faults):
        parser.error(f"--faults takes none or some of {', '.join(sorted(FAULTS))}")
    args.topologies = [topology for topology in args.topologies.split(",") if topology]
    if not args.topologies or any(topology not in TOPOLOGIES for topology in args.topologies):
        parser.error(f"--topologies takes some of {', '.join(TOPOLOGIES)}")
    args.flavors = [flavor for flavor in args.flavors.split(",") if flavor]
    unknown = [flavor for flavor in args.flavors if flavor not in FLAVORS]
    if unknown or not args.flavors:
        parser.error(f"--flavors takes some of {', '.join(sorted(FLAVORS))}")
    try:
        args.hold_ms = tuple(int(part) for part in args.hold_ms.split(","))
    except ValueError:
        args.hold_ms = ()
    if len(args.hold_ms) != 2 or not 0 < args.hold_ms[0] <= args.hold_ms[1]:
        parser.error("--hold-ms takes MIN,MAX in milliseconds, 0 < MIN <= MAX")
    if not args.minutes and not args.histories:
        args.histories = 1
    keep = args.keep or tempfile.mkdtemp(prefix="turnstile-soak-kept-")
    signal.signal(signal.SIGTERM, abandon)
    signal.signal(signal.SIGINT, abandon)
    started = time.monotonic()
    totals = {"histories": 0, "holds": 0, "operations": 0, "unexpected": 0, "fifo_pairs": 0, "not_started": 0}
    faults: Dict[str, int] = {}
    expected: Dict[str, int] = {}
    drawn: Dict[str, int] = {}
    next_index = 0

    def more() -> bool:
        if args.stop_at_first and totals["unexpected"]:
            return False
        if args.histories:
            return next_index < args.histories
        return time.monotonic() - started < args.minutes * 60

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        running = set()
        while running or more():
            while more() and len(running) < max(1, args.parallel):
                running.add(pool.submit(run_one, args, args.seed + next_index))
                next_index += 1
            done, running = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                history, verdict, directory = future.result()
                if verdict is None:
                    totals["not_started"] += 1
                    shutil.rmtree(directory, ignore_errors=True)
                    continue
                totals["histories"] += 1
                totals["holds"] += verdict.holds
                totals["operations"] += verdict.operations
                totals["fifo_pairs"] += verdict.fifo_pairs
                draw = (f"{history.topology}/{history.flavor}/aof-{history.persistence}" +
                        ("/quiet" if history.quiet else ""))
                drawn[draw] = drawn.get(draw, 0) + 1
                for kind, count in verdict.faults.items():
                    faults[kind] = faults.get(kind, 0) + count
                for violation in verdict.violations:
                    if violation.expected:
                        key = f"{violation.kind}: {violation.expected_row}"
                        expected[key] = expected.get(key, 0) + 1
                if verdict.unexpected:
                    totals["unexpected"] += len(verdict.unexpected)
                    kept = os.path.join(keep, f"seed-{history.seed}")
                    shutil.copytree(directory, kept)
                    print(f"soak: seed {history.seed} ({draw}): {len(verdict.unexpected)} unexpected "
                          f"violation(s); history kept in {kept}", flush=True)
                    for violation in verdict.unexpected[:5]:
                        print(f"  {violation.kind}: {violation.detail}", flush=True)
                    library = f"--library-client {args.library_client} " if args.library_client else ""
                    print(f"  replay the draw: {sys.argv[0]} --turnstile {args.turnstile} {library}--histories 1 "
                          f"--seed {history.seed} --seconds {args.seconds} --clients {args.clients} "
                          f"--hold-ms {args.hold_ms[0]},{args.hold_ms[1]} --flavors {','.join(args.flavors)} "
                          f"--faults {','.join(args.faults) or 'none'} --topologies {','.join(args.topologies)}",
                          flush=True)
                shutil.rmtree(directory, ignore_errors=True)
    print(f"soak: {totals['histories']} histories, {totals['operations']} operations, {totals['holds']} holds, "
          f"{time.monotonic() - started:.0f} s")
    print("soak: drawn " + ", ".join(f"{k} {v}" for k, v in sorted(drawn.items())))
    print("soak: faults " + ", ".join(f"{k} {v}" for k, v in sorted(faults.items())))
    print("soak: expected violations " + (", ".join(f"{k} {v}" for k, v in sorted(expected.items())) or "none"))
    print(f"soak: fair waiters' order judged for {totals['fifo_pairs']} pairs")
    if totals["not_started"]:
        print(f"soak: {totals['not_started']} deployment(s) did not start (not counted)")
    print(f"soak: unexpected violations {totals['unexpected']}")
    return 1 if totals["unexpected"] else 0


if __name__ == "__main__":
    sys.exit(main())
