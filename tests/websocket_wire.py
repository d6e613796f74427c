"""A WebSocket client by hand (RFC 6455) for tests of the real server: the handshake and
the close frame read off the wire, as a browser gets them (code and reason)."""

from __future__ import annotations

import base64
import os
import socket


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise AssertionError(f"connection closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def handshake(port: int, path: str, headers: dict[str, str] | None = None) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=15)
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [
        f"GET {path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
        *[f"{name}: {value}" for name, value in (headers or {}).items()],
    ]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            raise AssertionError(f"no handshake answer: {head!r}")
        head += chunk
    status = head.split(b"\r\n", 1)[0]
    assert b" 101 " in status, head
    return sock


def close_frame(sock: socket.socket) -> tuple[int, str]:
    """Frames until the close frame; its code and reason."""
    try:
        while True:
            first, second = _read_exactly(sock, 2)
            opcode, length = first & 0x0F, second & 0x7F
            if length == 126:
                length = int.from_bytes(_read_exactly(sock, 2), "big")
            elif length == 127:
                length = int.from_bytes(_read_exactly(sock, 8), "big")
            payload = _read_exactly(sock, length)
            if opcode == 0x8:
                return int.from_bytes(payload[:2], "big"), payload[2:].decode()
    finally:
        sock.close()
