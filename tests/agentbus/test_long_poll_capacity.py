"""Long-polls under load, against the real server (``manage.py up``): a waiting bus
inbox wait parks on the event loop and holds no thread, and past the caps (per caller,
the bus's share of the server process) a wait answers 429 with ``Retry-After`` at once. Measured from
outside, in the server's ``/proc/<pid>/status``: its threads while the waits wait and
after, and its memory after.

eve and max are external agents (coding CLIs' harnesses) of alice's; the watchers w00… are
external agents with a token each, each of a person of its own (one person's agents
share WAITS_PER_PERSON).

The waits wait long (``WAIT_SECONDS``): none ends before every wait past a cap has been
answered, whatever the machine's speed; then the test ends them (a message, or the
client closing its connections) and reads what is left."""

from __future__ import annotations

import asyncio
import json
import resource
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from markus.core.limits import WAITS_CHAT_RESERVE, WAITS_PER_CALLER, WAITS_PER_SERVER
from tests.api.up_server import UpServer

pytestmark = pytest.mark.slow

MB = 1024 * 1024
WATCHERS = WAITS_PER_SERVER // WAITS_PER_CALLER + 8  # enough callers to pass the server's cap
BUS_WAITS = WAITS_PER_SERVER - WAITS_CHAT_RESERVE  # what inbox waits may take of the server
THREAD_SLACK = 16  # threads the server may add under load (not one per wait)
RSS_SLACK = 64 * MB
WAIT_SECONDS = 120  # longer than the test: the test ends the waits
PATIENCE_S = 60.0  # how long the refusals may take to arrive (not asserted)

PERSONAS = """
import json
from django.contrib.auth.models import User
from markus.agents.services import agent_create
alice = User.objects.create_user("alice")
tokens = {}
for name in ["eve", "max"]:
    tokens[name] = agent_create(name=name, role="harness", kind="external", owner=alice, agent_id=name)[1]
for name in [f"w{i:02d}" for i in range(%d)]:
    owner = User.objects.create_user(f"{name}-owner")
    tokens[name] = agent_create(name=name, role="harness", kind="external", owner=owner, agent_id=name)[1]
print(json.dumps(tokens))
"""


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict:
        return json.loads(self.body)


def open_files(needed: int) -> None:
    """Raise this process's soft limit on open files (the server inherits it): a
    thousand connections are a thousand sockets on either side."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        assert hard == resource.RLIM_INFINITY or hard >= needed, f"ulimit -Hn is {hard}: {needed} needed"
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[UpServer]:
    open_files(4096)
    up = UpServer(tmp_path_factory.mktemp("long-poll")).start()
    try:
        up.tokens = json.loads(up.manage("shell", "-c", PERSONAS % WATCHERS).strip().splitlines()[-1])
        yield up
    finally:
        up.stop()


class Poll:
    """One long-poll over a raw socket: sent when opened, its answer read to the end."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, server: UpServer, agent_id: str, timeout: float = WAIT_SECONDS) -> Poll:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(
            (
                f"GET /api/agents/{agent_id}/agentbus/inbox?timeout_seconds={timeout:g} HTTP/1.1\r\n"
                f"Host: 127.0.0.1\r\nAuthorization: Bearer {server.tokens[agent_id]}\r\nConnection: close\r\n\r\n"
            ).encode()
        )
        await writer.drain()
        return cls(reader, writer)

    async def answer(self) -> Answer:
        try:
            raw = await self.reader.read()
        finally:
            self.writer.close()
        head, _, body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
        return Answer(int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body)


@contextmanager
def peak_threads(server: UpServer) -> Iterator[list[int]]:
    """The most threads the server had while the block ran (sampled every 20 ms)."""
    peak = [server.threads()]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            peak[0] = max(peak[0], server.threads())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peak
    finally:
        done.set()
        sampler.join(5)


async def refusals_in(answers: list[asyncio.Task[Answer]], at_least: int) -> list[asyncio.Task[Answer]]:
    """Once ``at_least`` answers have come (the refusals), the waits still waiting."""
    deadline = time.monotonic() + PATIENCE_S
    while sum(task.done() for task in answers) < at_least:
        assert time.monotonic() < deadline, f"{sum(t.done() for t in answers)} answered, {at_least} expected"
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)  # and nothing more answers: the rest wait
    return [task for task in answers if not task.done()]


def say(server: UpServer, sender: str, recipient: str, text: str) -> None:
    """A message on the bus, through the server (so its waiters are woken at once)."""

    def post(path: str, body: dict) -> dict:
        request = urllib.request.Request(
            f"{server.url}{path}",
            json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {server.tokens[sender]}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    stream = post("/api/agentbus/streams", {"sender": sender, "recipient": recipient})
    post(f"/api/agentbus/streams/{stream['streamId']}/append", {"sender": sender, "payload": {"text": text}})


def settle(server: UpServer) -> tuple[int, int]:
    """Threads and memory once a few waits have come and gone (imports, pools and
    caches of the first requests are part of the baseline)."""

    async def warm() -> None:
        polls = await asyncio.gather(*(Poll.open(server, "eve", timeout=0.2) for _ in range(4)))
        await asyncio.gather(*(poll.answer() for poll in polls))

    asyncio.run(warm())
    return server.threads(), server.rss_bytes()


def assert_throttled(answer: Answer, limit: int, per: str) -> None:
    assert answer.status == 429, answer.body[:300]
    assert int(answer.headers["retry-after"]) > 0
    data = answer.json()
    assert data["code"] == "throttled"
    assert f"at most {limit} " in data["detail"] and per in data["detail"], data["detail"]


def test_a_thousand_long_polls_from_one_token_end_in_429s_and_leave_threads_and_memory_as_they_were(server):
    threads_before, rss_before = settle(server)

    async def burst() -> tuple[list[Answer], int]:
        polls = await asyncio.gather(*(Poll.open(server, "eve") for _ in range(1000)))
        answers = [asyncio.create_task(poll.answer()) for poll in polls]
        waiting = await refusals_in(answers, 1000 - WAITS_PER_CALLER)
        threads_waiting = server.threads()
        assert waiting, "no wait was admitted"
        await asyncio.to_thread(say, server, "max", "eve", "that is all")  # answers the waits
        return await asyncio.gather(*answers), threads_waiting

    with peak_threads(server) as peak:
        answers, threads_waiting = asyncio.run(burst())
    statuses = Counter(a.status for a in answers)
    assert set(statuses) == {200, 429}, statuses
    assert statuses[200] <= WAITS_PER_CALLER, statuses
    for answer in answers:
        if answer.status == 200:
            assert [m["payload"]["text"] for m in answer.json()["messages"]] == ["that is all"]
        else:
            assert_throttled(answer, WAITS_PER_CALLER, "per caller")
    assert threads_waiting <= threads_before + THREAD_SLACK, (threads_before, threads_waiting)
    assert peak[0] <= threads_before + THREAD_SLACK, (threads_before, peak[0])
    assert server.threads() <= threads_before + THREAD_SLACK
    assert server.rss_bytes() <= rss_before + RSS_SLACK, (rss_before // MB, server.rss_bytes() // MB)


def test_waits_from_many_callers_hold_no_thread_stop_short_of_the_chat_reserve_and_give_their_slots_back(server):
    """Every watcher waits as often as it may: more waits than the server admits for the
    bus (its waits less the chat reserve), each caller within its own cap. Those
    admitted wait without a thread each; when their clients go away, their slots are
    free again."""
    threads_before, rss_before = settle(server)
    watchers = [f"w{i:02d}" for i in range(WATCHERS)]
    total = WATCHERS * WAITS_PER_CALLER
    assert total > BUS_WAITS

    async def burst() -> tuple[list[Answer], int, int]:
        polls = await asyncio.gather(*(Poll.open(server, w) for w in watchers * WAITS_PER_CALLER))
        answers = [asyncio.create_task(poll.answer()) for poll in polls]
        waiting = await refusals_in(answers, total - BUS_WAITS)
        threads_waiting = server.threads()
        for task in waiting:
            task.cancel()  # the client goes away: the answer's reader closes its socket
        await asyncio.gather(*waiting, return_exceptions=True)
        return [task.result() for task in answers if not task.cancelled()], len(waiting), threads_waiting

    with peak_threads(server) as peak:
        refused, waited, threads_waiting = asyncio.run(burst())
    assert 0 < waited <= BUS_WAITS and len(refused) == total - waited
    for answer in refused:
        assert_throttled(answer, BUS_WAITS, "chat reserve")
    assert threads_waiting <= threads_before + THREAD_SLACK, (threads_before, threads_waiting)
    assert peak[0] <= threads_before + THREAD_SLACK, (threads_before, peak[0])

    async def everyone_waits_again() -> Counter[int]:
        deadline = time.monotonic() + PATIENCE_S
        while True:  # the server notices the closed connections as they come
            polls = await asyncio.gather(*(Poll.open(server, w, timeout=0.5) for w in watchers))
            statuses = Counter([(await poll.answer()).status for poll in polls])
            if statuses == {200: WATCHERS} or time.monotonic() > deadline:
                return statuses
            await asyncio.sleep(0.5)

    assert asyncio.run(everyone_waits_again()) == {200: WATCHERS}
    assert server.threads() <= threads_before + THREAD_SLACK
    assert server.rss_bytes() <= rss_before + RSS_SLACK, (rss_before // MB, server.rss_bytes() // MB)
