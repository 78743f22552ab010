"""A socket that listens in the test's own process and keeps what it is sent: a stand-in for
another local program at a port the command line might talk to."""

from __future__ import annotations

import socket
import threading


class Listener:
    """A socket listening in this process; records what anyone sent it."""

    def __init__(self, host: str = "127.0.0.1"):
        self.sock = socket.create_server((host, 0))
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.got = b""
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    self.got += conn.recv(65536) or b"(connected)"
                except OSError:
                    self.got += b"(connected)"

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(5)
        self.sock.close()
