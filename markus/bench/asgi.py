"""The ASGI stack's own pieces, each beside the library's piece it stands in for, in one
run (``manage.py bench asgi``). In process, no sockets: the figures are what the piece
changes, not the transport.

1. ``ParkingASGIHandler`` (``markus.core.waits``) beside Django's ``ASGIHandler``: ``n``
   bus inbox waits (``GET /api/agents/<id>/agentbus/inbox/?timeout_seconds=…``, a
   ``parks`` view) parked at once through each; the threads alive while they wait, beyond
   those alive before. (The per-caller cap of waits is lifted for the count.)
2. ``BoundedBody`` (``markus.core.limits``) around Django's handler, beside the handler
   alone: a POST over the body limit with its Content-Length; the bytes the application
   read before it answered, and the time to the answer.
3. The embedded channel layer (``markus.core.channel_layer``) beside Channels' own
   ``InMemoryChannelLayer``: ``k`` events sent to a group of ``SUBSCRIBERS`` channels, each
   received by its own reader on one event loop; events delivered per second. (Channels'
   layer cannot be what Markus runs: a Celery worker thread's send resolves a future of
   daphne's loop from another thread. On one loop it can be timed.)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any
from unittest import mock

from channels.layers import InMemoryChannelLayer
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler

from agentbus.models import AuditEvent, ConsumerCursor
from markus.agents.models import Agent
from markus.agents.services import agent_create
from markus.bench.report import Figure
from markus.core.channel_layer import ThreadSafeInMemoryChannelLayer
from markus.core.limits import BoundedBody
from markus.core.waits import WAITS, ParkingASGIHandler

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

SUITE = "asgi"
DEFAULT_WAITS = 50  # each thread the library's handler keeps also holds a database connection
WAIT_SECONDS = 4
BODY_BYTES = 64 * 1024 * 1024
CHUNK = 64 * 1024
SUBSCRIBERS = 100
DEFAULT_EVENTS = 200


async def _call(app: Any, scope: dict[str, Any], body: bytes = b"") -> int:
    """One request through ``app``; its status."""
    status = 0
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:  # the request is whole; the client stays connected
            await asyncio.Event().wait()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


def _scope(method: str, path: str, query: str = "", headers: list[tuple[bytes, bytes]] | None = None) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"testserver"), *(headers or [])],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }


def _parked_threads(app: Any, agent: Agent, token: str, n: int) -> tuple[int, list[int]]:
    """Threads alive while ``n`` inbox waits are parked through ``app``, beyond the
    threads before; and the answers' statuses."""
    scope = _scope(
        "GET",
        f"/api/agents/{agent.id}/agentbus/inbox/",
        f"timeout_seconds={WAIT_SECONDS}",
        [(b"authorization", f"Bearer {token}".encode())],
    )

    async def all_waits() -> tuple[int, list[int]]:
        before = threading.active_count()
        calls = [asyncio.ensure_future(_call(app, scope)) for _ in range(n)]
        await asyncio.sleep(WAIT_SECONDS / 2)  # every wait parked, none answered yet
        during = threading.active_count()
        return during - before, list(await asyncio.gather(*calls))

    with mock.patch.object(WAITS, "claim", lambda *waiter, **chat: contextlib.nullcontext()):
        return asyncio.run(all_waits())


def _over_the_limit(app: Any) -> tuple[int, int, float]:
    """A POST of ``BODY_BYTES`` with its Content-Length through ``app``: (the status, the
    bytes the application read before it answered, the seconds to the answer)."""
    scope = _scope(
        "POST",
        "/api/agentbus/request/",
        headers=[(b"content-type", b"application/json"), (b"content-length", str(BODY_BYTES).encode())],
    )
    chunk = b" " * CHUNK

    async def post() -> tuple[int, int, float]:
        read = 0
        answered = asyncio.Event()
        status = 0

        async def receive() -> dict[str, Any]:
            nonlocal read
            if read >= BODY_BYTES:
                await asyncio.Event().wait()
            read += CHUNK
            return {"type": "http.request", "body": chunk, "more_body": read < BODY_BYTES}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                answered.set()

        started = time.perf_counter()
        task = asyncio.ensure_future(app(scope, receive, send))
        await asyncio.wait_for(answered.wait(), 120)
        took = time.perf_counter() - started
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        return status, read, took

    return asyncio.run(post())


def _fan_out_rate(layer_class: type[InMemoryChannelLayer], k: int) -> float:
    """Events delivered per second: ``k`` group sends to ``SUBSCRIBERS`` readers on one loop."""

    async def fan_out() -> float:
        layer = layer_class()
        channels = [await layer.new_channel() for _ in range(SUBSCRIBERS)]
        for name in channels:
            await layer.group_add("bench", name)

        async def reader(name: str) -> None:
            for _ in range(k):
                await layer.receive(name)

        readers = [asyncio.ensure_future(reader(name)) for name in channels]
        await asyncio.sleep(0)
        started = time.perf_counter()
        for i in range(k):
            await layer.group_send("bench", {"type": "markus.event", "event": {"type": "bench", "n": i}})
            await asyncio.sleep(0)
        await asyncio.gather(*readers)
        return SUBSCRIBERS * k / (time.perf_counter() - started)

    return asyncio.run(fan_out())


def run(stdout: SupportsWrite[str], options: dict[str, Any]) -> list[Figure]:
    n = options.get("n") or DEFAULT_WAITS
    k = DEFAULT_EVENTS

    def write(line: str) -> None:
        stdout.write(line + "\n")

    tag = uuid.uuid4().hex[:8]
    agent, token = agent_create(name="bench asgi", kind=Agent.Kind.EXTERNAL, agent_id=f"bench-asgi-{tag}")
    Agent.objects.filter(id=agent.id).update(status=Agent.RunStatus.STOPPED)
    figures: list[Figure] = []
    try:
        ours, statuses = _parked_threads(ParkingASGIHandler(), agent, token, n)
        theirs, their_statuses = _parked_threads(ASGIHandler(), agent, token, n)
        write(f"asgi bench: {n} parked inbox waits hold {ours} thread(s) through ParkingASGIHandler, ")
        write(
            f"  {theirs} through Django's ASGIHandler (answers {sorted(set(statuses))} / {sorted(set(their_statuses))})"
        )
        figures.append(
            Figure(
                SUITE,
                f"threads held by {n} parked waits: ParkingASGIHandler",
                float(ours),
                "threads",
                f"Django's ASGIHandler: {theirs}",
                goal=float(n) / 1.2,
                better="lower",
            )
        )

        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        status, read, took = _over_the_limit(BoundedBody(ASGIHandler()))
        bare_status, bare_read, bare_took = _over_the_limit(ASGIHandler())
        mb = BODY_BYTES / 2**20
        write(
            f"  a {mb:.0f} MB body over the {limit:,}-byte limit: BoundedBody answers {status} after reading "
            f"{read:,} bytes in {took * 1000:.2f} ms; Django's handler alone {bare_status} after {bare_read:,} bytes "
            f"in {bare_took * 1000:.1f} ms"
        )
        figures.append(
            Figure(
                SUITE,
                f"bytes read of a {mb:.0f} MB body over the limit: BoundedBody",
                float(read),
                "bytes",
                f"Django's ASGIHandler alone: {bare_read:,} bytes, {bare_took * 1000:.1f} vs {took * 1000:.2f} ms",
                goal=float(limit),
                better="lower",
            )
        )

        stock = _fan_out_rate(InMemoryChannelLayer, k)
        embedded = _fan_out_rate(ThreadSafeInMemoryChannelLayer, k)
        write(
            f"  fan-out of {k} events to {SUBSCRIBERS} readers: {embedded:,.0f} deliveries/s through the "
            f"embedded layer, {stock:,.0f}/s through Channels' InMemoryChannelLayer ({embedded / stock:.2f}x)"
        )
        figures.append(
            Figure(
                SUITE,
                f"embedded layer fan-out / Channels' in-memory layer ({SUBSCRIBERS} readers)",
                embedded / stock,
                "x",
                f"{embedded:,.0f} vs {stock:,.0f} deliveries/s",
                goal=1.2,
            )
        )
    finally:
        AuditEvent.objects.filter(agent_id=agent.id).delete()
        ConsumerCursor.objects.filter(agent_id=agent.id).delete()
        Agent.objects.filter(id=agent.id).delete()
    return figures
