"""The wake-up itself: what it carries, when a woken wait may answer from it without
reading the database again, one subscription per inbox and event loop on Redis, and
what happens while Redis is down and after it comes back."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest
from asgiref.sync import async_to_sync
from django.db import connection

from agentbus import selectors, services, wakeup
from agentbus.waiting import inbox_wait

from .conftest import Persona, say

pytestmark = pytest.mark.django_db(transaction=True)

EMBEDDED = {"default": {"BACKEND": "markus.core.channel_layer.ThreadSafeInMemoryChannelLayer"}}


# -------------------------------------------------- a woken wait does not read again


def count_reads(monkeypatch) -> list[int]:
    reads: list[int] = []
    real = selectors.inbox_read_from

    def counted(agent_id, position, **kwargs):
        reads.append(position)
        return real(agent_id, position, **kwargs)

    monkeypatch.setattr(selectors, "inbox_read_from", counted)
    return reads


def wait_for_one_append(sender: Persona, recipient: Persona, payload: dict, cursor: str) -> dict:
    def append() -> None:
        try:
            time.sleep(0.3)
            stream = services.stream_open(sender=sender.agent, recipient=recipient.agent)
            services.stream_append(stream_id=stream.id, sender=sender.agent, payload=payload)
        finally:
            connection.close()

    thread = threading.Thread(target=append)
    thread.start()
    try:
        return async_to_sync(inbox_wait)(agent_id=recipient.id, after_cursor=cursor, timeout=10)
    finally:
        thread.join(10)


@pytest.mark.parametrize("history", [1, 30])
def test_a_woken_wait_answers_from_the_wake_up_without_reading_the_inbox_again(
    long_poll, settings, monkeypatch, eve, max_, history
):
    """One read (before it sleeps), whatever the inbox holds; the answer is what a
    read would have given."""
    settings.CHANNEL_LAYERS = EMBEDDED
    for i in range(history):
        say(max_, eve, f"old {i}")
    cursor = async_to_sync(inbox_wait)(agent_id="eve", timeout=0, limit=500)["next_cursor"]
    reads = count_reads(monkeypatch)
    result = wait_for_one_append(max_, eve, {"text": "new", "n": 1, "ok": True}, cursor)
    assert [m["payload"] for m in result["messages"]] == [{"text": "new", "n": 1, "ok": True}]
    assert len(reads) == 1
    again = selectors.inbox_read(eve.id, after_cursor=cursor)
    assert result["messages"] == again["messages"] and result["next_cursor"] == again["next_cursor"]


def test_a_message_too_large_to_carry_is_read_from_the_database(long_poll, settings, monkeypatch, eve, max_):
    settings.CHANNEL_LAYERS = EMBEDDED
    cursor = async_to_sync(inbox_wait)(agent_id="eve", timeout=0)["next_cursor"]
    reads = count_reads(monkeypatch)
    payload = {"text": "y" * (wakeup.WAKE_MESSAGE_LIMIT + 1)}
    result = wait_for_one_append(max_, eve, payload, cursor)
    assert [m["payload"] for m in result["messages"]] == [payload] and not result["timed_out"]
    assert len(reads) == 2


def test_a_group_append_wakes_every_member(long_poll, settings, eve, max_, ada):
    settings.CHANNEL_LAYERS = EMBEDDED
    stream = services.stream_open(sender=max_.agent, members=[eve.agent, ada.agent])

    async def both() -> list[dict]:
        return await asyncio.gather(inbox_wait(agent_id="eve", timeout=10), inbox_wait(agent_id="ada", timeout=10))

    def append() -> None:
        try:
            time.sleep(0.3)
            services.stream_append(stream_id=stream.id, sender=max_.agent, payload={"text": "all"})
        finally:
            connection.close()

    thread = threading.Thread(target=append)
    thread.start()
    started = time.monotonic()
    results = async_to_sync(both)()
    thread.join(10)
    assert [[m["payload"]["text"] for m in r["messages"]] for r in results] == [["all"], ["all"]]
    assert time.monotonic() - started < 5  # a wake-up, not the 30 s poll


# ------------------------------------------------------------------------ Redis


@pytest.mark.redis
def test_many_waiters_on_one_inbox_share_one_subscription(redis_layer, eve, max_):
    """A parked wait costs a registry entry, not a Redis subscription or a task."""
    import redis

    channel = wakeup._redis_target()[1] + "eve"
    client = redis.Redis.from_url(redis_layer)

    async def scenario() -> tuple[int, int, list[dict]]:
        waits = [asyncio.ensure_future(inbox_wait(agent_id="eve", timeout=10)) for _ in range(100)]
        while wakeup.registered_waiters() < 100:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)
        subscribers = dict(await asyncio.to_thread(client.pubsub_numsub, channel))[channel.encode()]
        tasks = len(asyncio.all_tasks())
        await asyncio.to_thread(say, max_, eve, "to all of you")
        return subscribers, tasks, await asyncio.gather(*waits)

    subscribers, tasks, results = async_to_sync(scenario)()
    assert not wakeup._loop_hubs  # the loop's subscriber (and connection) went with the loop
    assert subscribers == 1
    assert tasks <= 100 + 3  # the waits, the scenario, the one subscriber task
    assert all([m["payload"]["text"] for m in r["messages"]] == ["to all of you"] for r in results)


class OwnRedis:
    """A redis-server of this test's own, to stop and start (not the shared one)."""

    def __init__(self, workdir) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen(argv, cwd=self.workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None


@pytest.fixture
def own_redis(settings, tmp_path) -> Iterator[OwnRedis]:
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not installed; deselect with -m 'not redis'")
    server = OwnRedis(tmp_path)
    server.start()
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer", "CONFIG": {"hosts": [server.url]}}
    }
    yield server
    server.stop()


def in_thread(target) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


@pytest.mark.redis
def test_while_redis_is_down_a_waiter_polls(own_redis, settings, monkeypatch, eve, max_):
    monkeypatch.setitem(settings.MARKUS, "AGENTBUS_POLL_SECONDS", 0.5)
    own_redis.stop()

    def later() -> None:
        time.sleep(0.5)
        say(max_, eve, "while down")  # its wake-up cannot be sent: logged, not raised

    thread, errors = in_thread(later)
    started = time.monotonic()
    result = async_to_sync(inbox_wait)(agent_id="eve", timeout=15)
    thread.join(10)
    assert not errors, errors
    assert [m["payload"]["text"] for m in result["messages"]] == ["while down"]
    assert time.monotonic() - started < 10


@pytest.mark.redis
def test_when_redis_comes_back_a_parked_waiter_reads_what_it_missed(own_redis, long_poll, eve, max_):
    """Subscribed, then Redis dies; an append commits (its wake-up is lost); Redis comes
    back empty: the loop's subscriber reconnects, subscribes again and wakes the waiter,
    long before its 30 s poll."""

    def outage() -> None:
        while wakeup.registered_waiters() < 1:
            time.sleep(0.02)
        time.sleep(0.2)
        own_redis.stop()
        say(max_, eve, "during the outage")
        time.sleep(0.5)
        own_redis.start()

    thread, errors = in_thread(outage)
    started = time.monotonic()
    result = async_to_sync(inbox_wait)(agent_id="eve", timeout=25)
    elapsed = time.monotonic() - started
    thread.join(20)
    assert not errors, errors
    assert [m["payload"]["text"] for m in result["messages"]] == ["during the outage"]
    assert elapsed < 15, elapsed


@pytest.mark.redis
def test_a_publisher_whose_connection_went_stale_reconnects(own_redis, long_poll, eve, max_):
    """The appending thread keeps its publishing connection; Redis restarts under it.
    Its next wake-up must still go out (on a new connection), not wait for the poll."""
    restarted, parked = threading.Event(), threading.Event()

    def appender() -> None:
        say(max_, eve, "before the restart")  # this thread's publisher connects
        own_redis.stop()
        own_redis.start()
        restarted.set()
        parked.wait(10)
        time.sleep(0.3)
        say(max_, eve, "after the restart")

    thread, errors = in_thread(appender)
    assert restarted.wait(20)
    cursor = async_to_sync(inbox_wait)(agent_id="eve", timeout=0)["next_cursor"]

    async def wait() -> dict:
        parked.set()
        return await inbox_wait(agent_id="eve", after_cursor=cursor, timeout=20)

    started = time.monotonic()
    result = async_to_sync(wait)()
    elapsed = time.monotonic() - started
    thread.join(20)
    assert not errors, errors
    assert [m["payload"]["text"] for m in result["messages"]] == ["after the restart"]
    assert elapsed < 10, elapsed


class SlowSubscribeProxy:
    """A TCP proxy to Redis that holds back every client write carrying a SUBSCRIBE for
    ``delay`` seconds, the way a loaded Redis or network can: a subscription lands late."""

    def __init__(self, target: tuple[str, int], delay: float) -> None:
        self.target = target
        self.delay = delay
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"redis://127.0.0.1:{self.server.getsockname()[1]}/0"
        self.sockets: list[socket.socket] = [self.server]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.sockets += [client, upstream]
            threading.Thread(target=self.pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self.pump, args=(upstream, client, False), daemon=True).start()

    def pump(self, source: socket.socket, sink: socket.socket, holds_back: bool) -> None:
        try:
            while data := source.recv(65536):
                if holds_back and b"SUBSCRIBE" in data.upper().replace(b"UNSUBSCRIBE", b""):
                    time.sleep(self.delay)
                sink.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


@pytest.mark.redis
def test_an_append_between_the_read_and_a_late_subscription_still_wakes_the_waiter(redis_layer, settings, eve, max_):
    """The waiter's SUBSCRIBE reaches Redis 0.6 s late; an append commits 0.2 s after the
    waiter started, after its read. The waiter must get it long before the 30 s poll:
    it may read only once its subscription is confirmed."""
    from urllib.parse import urlsplit

    parts = urlsplit(redis_layer)
    proxy = SlowSubscribeProxy((parts.hostname or "127.0.0.1", parts.port or 6379), delay=0.6)
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [proxy.url], "prefix": f"late{time.monotonic_ns()}"},
        }
    }
    try:

        def later() -> None:
            time.sleep(0.2)
            say(max_, eve, "in the gap")

        thread, errors = in_thread(later)
        started = time.monotonic()
        result = async_to_sync(inbox_wait)(agent_id="eve", timeout=8)
        elapsed = time.monotonic() - started
        thread.join(10)
    finally:
        proxy.close()
    assert not errors, errors
    assert [m["payload"]["text"] for m in result["messages"]] == ["in the gap"], "the wake-up was lost"
    assert elapsed < 6, elapsed
