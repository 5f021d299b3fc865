"""A TCP proxy on loopback between one history client and its redis-server
(issue #54): the nemesis freezes it (nothing passes either way for a while,
then everything held back is delivered, in order: a frozen link, a long
network pause), delays it (for a while, what is sent arrives seconds
later: a request sent on a live connection reaches the server after its
sender gave up on it) or resets it (every connection through it closed).

Bounded: each connection has two pump threads; at most MAX_CONNECTIONS
connections at once (more are refused by closing them).
"""

import socket
import threading
import time
from typing import List

MAX_CONNECTIONS = 64
CHUNK_BYTES = 65536
FROZEN_POLL_S = 0.002


class LinkProxy:
    def __init__(self, target_port: int):
        self.target_port = target_port
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(MAX_CONNECTIONS)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.frozen_until = 0.0
        self.delayed_until = 0.0  # what is read before then arrives delay_s later
        self.delay_s = 0.0
        self.connections: List[socket.socket] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def freeze(self, seconds: float) -> None:
        with self.lock:
            self.frozen_until = max(self.frozen_until, time.monotonic() + seconds)

    def delay(self, window_s: float, delay_s: float) -> None:
        with self.lock:
            self.delayed_until = time.monotonic() + window_s
            self.delay_s = delay_s

    def reset(self) -> None:
        with self.lock:
            connections, self.connections = self.connections, []
        for connection in connections:
            try:
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                connection.close()
            except OSError:
                pass

    def close(self) -> None:
        self.closed = True
        try:
            self.listener.close()
        except OSError:
            pass
        self.reset()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                if len(self.connections) >= 2 * MAX_CONNECTIONS:
                    client.close()
                    server.close()
                    continue
                self.connections += [client, server]
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(CHUNK_BYTES)
                if not data:
                    break
                read_at = time.monotonic()
                with self.lock:
                    delay_s = self.delay_s if read_at < self.delayed_until else 0.0
                while time.monotonic() < max(self.frozen_until, read_at + delay_s):
                    time.sleep(FROZEN_POLL_S)
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            try:
                end.close()
            except OSError:
                pass
        with self.lock:
            self.connections = [c for c in self.connections if c is not source and c is not sink]
