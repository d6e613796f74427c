"""An oversized request head gets an HTTP answer, not a dropped connection (which a
proxy reports as 502): a request line over the server's limit answers 414, headers over
it 431, each with the API's JSON error stating the limit. Raw sockets against the real
server (``manage.py up``)."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator

import pytest

from markus.core.limits import HEAD_MAX_BYTES
from tests.api.up_server import UpServer

KB = 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[UpServer]:
    up = UpServer(tmp_path_factory.mktemp("head")).start()
    try:
        yield up
    finally:
        up.stop()


def send_head(server: UpServer, head: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send a request head (all of it, as a client would), then read the answer."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
        try:
            sock.sendall(head)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the answer may be there already
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()


def assert_refused(answer: tuple[int, dict[str, str], bytes], status: int, code: str, what: str) -> None:
    got, headers, body = answer
    assert got == status, body[:300]
    assert headers["content-type"] == "application/json"
    data = json.loads(body)
    assert data["code"] == code
    assert what in data["detail"] and f"{HEAD_MAX_BYTES} bytes" in data["detail"], data["detail"]
    assert data["limit"] == HEAD_MAX_BYTES


def test_a_request_line_over_the_limit_answers_414(server):
    path = "/api/agents/?q=" + "a" * (20 * KB)
    answer = send_head(server, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    assert_refused(answer, 414, "uri_too_long", "request line")


def test_one_header_over_the_limit_answers_431(server):
    head = f"GET /api/agents/ HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {'c' * (20 * KB)}\r\n\r\n"
    assert_refused(send_head(server, head.encode()), 431, "headers_too_large", "headers")


def test_many_headers_over_the_limit_together_answer_431(server):
    headers = "".join(f"X-Filler-{i}: {'f' * 400}\r\n" for i in range(50))  # ~20 KiB, each line short
    head = f"GET /api/agents/ HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\n"
    assert_refused(send_head(server, head.encode()), 431, "headers_too_large", "headers")


def test_a_head_under_the_limit_is_served_as_usual(server):
    headers = "".join(f"X-Filler-{i}: {'f' * 400}\r\n" for i in range(20))  # ~8 KiB
    head = f"GET /api/agents/ HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}Connection: close\r\n\r\n"
    status, _, body = send_head(server, head.encode())
    assert status == 401, body[:300]  # the API's own answer: no credentials


def test_the_connection_serves_no_request_after_a_refused_head(server):
    """What follows a refused head is dropped, not read as another request."""
    head = f"GET /{'a' * (20 * KB)} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /api/agents/ HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
        sock.sendall(head.encode())
        response = http.client.HTTPResponse(sock)
        response.begin()
        assert response.status == 414
        response.read()
        assert sock.recv(4096) == b""  # closed, nothing more answered
