"""Bodies bounded at the edge (ARCHITECTURE decision 12), against a real daphne serving
``markus.asgi`` as ``manage.py up`` does: a Content-Length over the limit answers 413 at
once, before a byte of the body is read; a chunked body is counted as it streams and cut
off at the limit; a chunked body under the limit reaches the view intact; every 413 is
the API's JSON error stating the limit in bytes, and the server's memory does not grow
with what a client sends."""

from __future__ import annotations

import http.client
import json
import select
import socket
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pytest
from django.conf import settings

from mailbox.models import MailboxItem
from markus.agents.services import user_token_create
from tests.agentbus.hub_server import HubServer

MB = 1024 * 1024
LIMIT = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
assert LIMIT == MB, "these tests read the default limit (MARKUS_MAX_BODY_BYTES unset)"


@pytest.fixture(scope="module")
def server(django_db_setup):
    from django.db import connection

    hub = HubServer(connection.settings_dict["NAME"]).start()
    yield hub
    hub.stop()


@dataclass
class Answer:
    status: int
    body: bytes
    sent: int  # body bytes the client had sent when the answer arrived

    def json(self) -> dict:
        return json.loads(self.body)


def zeros(total: int, size: int = 64 * 1024) -> Iterator[bytes]:
    """``total`` bytes in chunks, generated (never held in memory)."""
    chunk = b"0" * size
    while total > 0:
        yield chunk[:total]
        total -= len(chunk)


def chunked(chunks: Iterable[bytes]) -> Iterator[bytes]:
    for chunk in chunks:
        yield b"%x\r\n%s\r\n" % (len(chunk), chunk)
    yield b"0\r\n\r\n"


def exchange(
    server: HubServer,
    path: str,
    *,
    headers: dict[str, str],
    body: Iterable[bytes] = (),
    timeout: float = 20.0,
    stop_early: bool = True,
) -> Answer:
    """POST over a raw socket, sending ``body`` until the server answers (a client like
    curl stops sending when the answer arrives; without ``stop_early``, all of it), then
    read the answer."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
    try:
        head = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", *(f"{k}: {v}" for k, v in headers.items())]
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        sent = 0
        for piece in body:
            if stop_early and select.select([sock], [], [], 0)[0]:
                break  # the answer is there: stop sending
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(piece)
        response = http.client.HTTPResponse(sock)
        response.begin()
        return Answer(response.status, response.read(), sent)
    finally:
        sock.close()


def assert_too_large(answer: Answer) -> None:
    assert answer.status == 413, answer.body[:300]
    data = answer.json()
    assert data["limit"] == LIMIT
    assert f"{LIMIT} bytes" in data["detail"]


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.fixture
def alice_token(alice):
    return user_token_create(alice)[1]


def enqueue_body(content: str) -> bytes:
    return json.dumps({"sourceType": "mention", "payload": {"summary": "s", "content": content}}).encode()


# ------------------------------------------------------------------ a real server


@pytest.mark.django_db(transaction=True)
def test_an_oversized_content_length_is_refused_before_the_body_is_sent(server):
    """No body byte is sent at all: the answer comes from the headers alone (and before
    any authentication, which would need the body read first)."""
    started = time.monotonic()
    answer = exchange(
        server,
        "/api/agents/ada/mailbox",
        headers={"Content-Type": "application/json", "Content-Length": str(300 * MB)},
        timeout=5,
    )
    assert_too_large(answer)
    assert time.monotonic() - started < 5


@pytest.mark.django_db(transaction=True)
def test_a_chunked_body_over_the_limit_is_cut_off_at_the_limit(server):
    answer = exchange(
        server,
        "/api/agents/ada/mailbox",
        headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
        body=chunked(zeros(300 * MB)),
    )
    assert_too_large(answer)
    assert answer.sent < 50 * MB, "the server answered when the limit was crossed, not at the end"


@pytest.mark.django_db(transaction=True)
def test_a_small_chunked_json_body_reaches_the_view_intact(server, agent, alice_token):
    body = enqueue_body("sent in pieces")
    answer = exchange(
        server,
        f"/api/agents/{agent.id}/mailbox",
        headers={
            "Content-Type": "application/json",
            "Transfer-Encoding": "chunked",
            "Authorization": f"Token {alice_token}",
        },
        body=chunked(body[i : i + 7] for i in range(0, len(body), 7)),
    )
    assert answer.status == 201, answer.body
    assert answer.json()["sourceType"] == "mention"
    assert MailboxItem.objects.get(id=answer.json()["id"]).payload["content"] == "sent in pieces"


@pytest.mark.django_db(transaction=True)
def test_a_chunked_body_just_under_the_limit_is_accepted(server, agent, alice_token):
    body = enqueue_body("x" * (LIMIT - 200))
    assert LIMIT - 200 < len(body) <= LIMIT
    answer = exchange(
        server,
        f"/api/agents/{agent.id}/mailbox",
        headers={
            "Content-Type": "application/json",
            "Transfer-Encoding": "chunked",
            "Authorization": f"Token {alice_token}",
        },
        body=chunked(body[i : i + 65536] for i in range(0, len(body), 65536)),
    )
    assert answer.status == 201, answer.body[:300]


@pytest.mark.django_db(transaction=True)
def test_a_content_length_body_at_the_limit_is_accepted(server, agent, alice_token):
    body = enqueue_body("x" * (LIMIT - 200))
    body += b" " * (LIMIT - len(body))
    answer = exchange(
        server,
        f"/api/agents/{agent.id}/mailbox",
        headers={
            "Content-Type": "application/json",
            "Content-Length": str(len(body)),
            "Authorization": f"Token {alice_token}",
        },
        body=[body],
    )
    assert answer.status == 201, answer.body[:300]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/api/agentbus/request", "/api/agents/ada/chat", "/api/tasks/"])
def test_a_client_that_sends_the_whole_body_first_still_reads_the_413(server, path):
    """http.client sends all of a 20 MB body before it reads: the server drops what
    follows its answer instead of resetting the connection under it."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request(
            "POST",
            path,
            body=zeros(20 * MB),
            headers={"Content-Type": "application/json", "Content-Length": str(20 * MB)},
        )
        response = conn.getresponse()
        answer = Answer(response.status, response.read(), 20 * MB)
    finally:
        conn.close()
    assert_too_large(answer)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("framing", ["content-length", "content-length, sent in full", "chunked"])
def test_a_300_mb_upload_does_not_grow_the_server(framing):
    """On a server of its own (memory a process once grew and kept would hide growth).
    "sent in full": the client ignores the early answer and sends all 300 MB, which the
    server reads and drops."""
    from django.db import connection

    server = HubServer(connection.settings_dict["NAME"]).start()
    try:
        measure_300_mb(server, framing)
    finally:
        server.stop()


def measure_300_mb(server: HubServer, framing: str) -> None:
    total = 300 * MB
    # warm up: the first requests import and cache what every request needs
    for _ in range(3):
        exchange(server, "/api/agents/", headers={"Content-Length": "0"})
        exchange(server, "/api/agents/ada/mailbox", headers={"Content-Length": str(2 * MB)}, body=zeros(2 * MB))
    before = rss_bytes(server.process.pid)
    if framing == "chunked":
        headers, body = {"Transfer-Encoding": "chunked"}, chunked(zeros(total, MB))
    else:
        headers, body = {"Content-Length": str(total)}, zeros(total, MB)
    answer = exchange(
        server,
        "/api/agents/ada/mailbox",
        headers={"Content-Type": "application/json", **headers},
        body=body,
        timeout=120,
        stop_early="in full" not in framing,
    )
    time.sleep(0.5)
    after = rss_bytes(server.process.pid)
    print(f"\n{framing}: server RSS {before / MB:.1f} MB -> {after / MB:.1f} MB; client sent {answer.sent / MB:.1f} MB")
    assert after - before < 50 * MB
    assert_too_large(answer)


# ------------------------------------------------------------------ the views' own check


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    ["/api/agentbus/request", "/api/agents/ada/chat", "/api/agents/ada/mailbox", "/api/tasks/"],
)
def test_every_view_answers_an_oversized_body_with_the_json_413(path, agent, alice_client, settings):
    """The test client has no ASGI edge: this is the views' own check (Django's
    RequestDataTooBig), which must answer in the same shape."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    alice_client.raise_request_exception = False
    response = alice_client.post(path, json.dumps({"text": "x" * 200}), content_type="application/json")
    assert response.status_code == 413, response.content[:300]
    assert response.json()["limit"] == 100
    assert "100 bytes" in response.json()["detail"]


# ------------------------------------------------------------------ the ASGI edge alone


def run_asgi(messages: list[dict], headers: list[tuple[bytes, bytes]], limit: int = 100):
    """Drive the edge middleware around a recording app; returns (status, body, what the
    app saw: its headers and the body it read), or the app's view as None if refused."""
    import asyncio

    from markus.core.limits import BoundedBody

    seen: dict = {}
    sent: list[dict] = []
    pending = list(messages)

    async def receive():
        if not pending:
            raise AssertionError("the edge read past the end of the request")
        return pending.pop(0)

    async def send(message):
        sent.append(message)

    async def app(scope, receive, send):
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        seen.update(headers=dict(scope["headers"]), body=body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    scope = {"type": "http", "method": "POST", "path": "/x", "headers": headers}
    from django.test import override_settings

    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=limit):
        asyncio.run(BoundedBody(app)(scope, receive, send))
    status = sent[0]["status"]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return status, body, seen or None, pending


def test_the_edge_refuses_an_oversized_content_length_without_reading_the_body():
    body = [{"type": "http.request", "body": b"x" * 50, "more_body": True}]
    status, answer, seen, unread = run_asgi(body, [(b"content-length", b"1000")])
    assert status == 413 and seen is None and unread == body
    assert json.loads(answer) == {
        "detail": "request body too large: over 100 bytes",
        "code": "payload_too_large",
        "limit": 100,
    }


def test_the_edge_counts_a_body_without_length_and_stops_at_the_limit():
    pieces = [{"type": "http.request", "body": b"x" * 60, "more_body": True} for _ in range(5)]
    status, _, seen, unread = run_asgi(pieces, [(b"transfer-encoding", b"chunked")])
    assert status == 413 and seen is None
    assert len(unread) == 3, "it read the two messages that crossed the limit, no more"


def test_the_edge_hands_a_chunked_body_under_the_limit_on_with_its_length():
    pieces = [
        {"type": "http.request", "body": b'{"a": ', "more_body": True},
        {"type": "http.request", "body": b"1}", "more_body": False},
    ]
    status, _, seen, _ = run_asgi(pieces, [(b"transfer-encoding", b"chunked"), (b"content-type", b"application/json")])
    assert status == 200
    assert seen["body"] == b'{"a": 1}'
    assert seen["headers"][b"content-length"] == b"8" and b"transfer-encoding" not in seen["headers"]


def test_the_edge_passes_a_body_within_its_content_length_through():
    pieces = [{"type": "http.request", "body": b"x" * 100, "more_body": False}]
    status, _, seen, _ = run_asgi(pieces, [(b"content-length", b"100")])
    assert status == 200 and seen["body"] == b"x" * 100
