"""What a stub server wrote on the wire and when, and whether the client closed the
connection: the cancellation tests count what was sent after a pause."""

from __future__ import annotations

import select
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler

from markus.llm.base import word_chunks as words

__all__ = ["Wire", "words"]


class Wire:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.writes: list[tuple[float, int]] = []  # (monotonic time, bytes) per write
        self.closed = threading.Event()  # the client closed the connection mid-reply
        self.finished = threading.Event()  # a streamed reply was written to its end
        self.streaming = threading.Event()  # a streamed reply has begun
        self.shutdown = threading.Event()  # the server is going away: stop stalling

    @property
    def chunks_sent(self) -> int:
        with self.lock:
            return len(self.writes)

    @property
    def bytes_sent(self) -> int:
        with self.lock:
            return sum(n for _, n in self.writes)

    def send(self, handler: BaseHTTPRequestHandler, data: bytes) -> bool:
        """Write one chunk; False once the client has closed the connection."""
        if self.closed.is_set():
            return False
        try:
            handler.wfile.write(data)
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.closed.set()
            return False
        with self.lock:
            self.writes.append((time.monotonic(), len(data)))
        return True

    def wait(self, handler: BaseHTTPRequestHandler, seconds: float) -> bool:
        """Pause between chunks, watching for the client to close the connection (a
        readable socket with nothing to read); False if it did."""
        sock = handler.connection
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0 and not self.shutdown.is_set():
            readable, _, _ = select.select([sock], [], [], min(left, 0.05))
            if readable:
                try:
                    gone = sock.recv(1, socket.MSG_PEEK) == b""
                except OSError:
                    gone = True
                if gone:
                    self.closed.set()
                    return False
        return not self.closed.is_set()
