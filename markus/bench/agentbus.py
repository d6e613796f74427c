"""AgentBus benchmark: the wake-up latency of ``wait``, from the commit of an append to
the answer, and in the same run a bare Redis BRPOP round trip on the same machine;
prints median, p99 and the ratio wait / BRPOP.

Steps:
1. Create two throwaway external agents (a writer and a watcher: no mailbox, no loop).
2. ``wait``: an event loop in a thread awaits ``inbox_wait`` (the coroutine the async
   inbox view awaits). Once it sleeps, the main thread appends one chunk and stamps
   the commit from an on-commit callback registered before the append's own
   wake-up; latency = the coroutine's return - that stamp. Measured with the
   configured channel layer and, when that is the in-memory one, with the Redis
   pub/sub layer too.
3. BRPOP: a thread blocks in BRPOP; the main thread stamps and LPUSHes; latency =
   BRPOP's return - the stamp.
4. Delete the agents and their rows, whatever happened.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar
from unittest import mock

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.db import transaction
from django.test.utils import override_settings

from agentbus import services
from agentbus.cursors import encode_cursor
from agentbus.models import AuditEvent, ConsumerCursor
from agentbus.selectors import current_clock
from agentbus.waiting import inbox_wait
from agentbus.wakeup import InboxWaiter
from markus.agents.models import Agent
from markus.agents.services import agent_create

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

_T = TypeVar("_T")

DEFAULT_N = 200
WARMUP = 10
PAUSE = 0.002  # between the waiter going to sleep and the append


def _stats(samples: list[float]) -> tuple[float, float]:
    ms = sorted(s * 1000 for s in samples)
    p99 = statistics.quantiles(ms, n=100)[98] if len(ms) >= 2 else ms[0]
    return statistics.median(ms), p99


def _stamp(into: list[float]) -> None:
    into.append(time.perf_counter())


class _Loop:
    """An event loop in a thread, like the one a daphne worker serves from."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, _T]) -> Future[_T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


def measure_wait(n: int, writer: Agent, watcher: Agent) -> list[float]:
    stream = services.stream_open(sender=writer, recipient=watcher)
    sleeping = threading.Event()
    real_wait = InboxWaiter.wait

    async def wait_and_flag(self: InboxWaiter, timeout: float) -> bool:
        sleeping.set()
        return await real_wait(self, timeout)

    async def timed_wait(cursor: str) -> tuple[dict[str, Any], float]:
        result = await inbox_wait(agent_id=watcher.id, after_cursor=cursor, timeout=10)
        return result, time.perf_counter()

    samples: list[float] = []
    runner = _Loop()
    cursor = encode_cursor(watcher.id, current_clock())  # start after earlier rounds
    try:
        with mock.patch.object(InboxWaiter, "wait", wait_and_flag):
            for i in range(n + WARMUP):
                sleeping.clear()
                future = runner.submit(timed_wait(cursor))
                while not sleeping.wait(0.05):
                    if future.done():  # it answered or failed before sleeping
                        future.result()
                        raise RuntimeError("the waiter answered before anything was appended")
                time.sleep(PAUSE)
                stamp: list[float] = []
                with transaction.atomic():
                    transaction.on_commit(partial(_stamp, stamp))
                    services.stream_append(stream_id=stream.id, sender=writer, payload={"n": i})
                result, answered = future.result(15)
                if result["timed_out"]:
                    raise RuntimeError("wait timed out: no wake-up arrived")
                cursor = result["next_cursor"]
                if i >= WARMUP:
                    samples.append(answered - stamp[0])
    finally:
        runner.stop()
    return samples


def measure_brpop(n: int, url: str) -> list[float]:
    import redis

    key = f"markus:bench:brpop:{uuid.uuid4().hex}"
    pusher, popper = redis.Redis.from_url(url), redis.Redis.from_url(url)
    samples: list[float] = []

    def pop_and_stamp(got: list[float]) -> None:
        popper.brpop([key], timeout=10)
        _stamp(got)

    try:
        for i in range(n + WARMUP):
            got: list[float] = []
            thread = threading.Thread(target=pop_and_stamp, args=(got,))
            thread.start()
            time.sleep(PAUSE)
            sent = time.perf_counter()
            pusher.lpush(key, str(i))
            thread.join(15)
            if not got:
                raise RuntimeError("BRPOP did not return")
            if i >= WARMUP:
                samples.append(got[0] - sent)
    finally:
        pusher.delete(key)
        pusher.close()
        popper.close()
    return samples


def _layer_name() -> str:
    layer = get_channel_layer()
    if type(layer) is InMemoryChannelLayer:
        return "InMemoryChannelLayer (process-local wake registry)"
    return type(layer).__name__


def _redis_layers(url: str) -> dict[str, dict[str, Any]]:
    return {"default": {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer", "CONFIG": {"hosts": [url]}}}


def run(stdout: SupportsWrite[str], options: dict[str, Any]) -> None:
    n = options.get("n") or DEFAULT_N
    url = getattr(settings, "REDIS_URL", "") or os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    tag = uuid.uuid4().hex[:8]
    writer = agent_create(name="bench writer", kind=Agent.Kind.EXTERNAL, agent_id=f"bench-bus-{tag}-w")[0]
    watcher = agent_create(name="bench watcher", kind=Agent.Kind.EXTERNAL, agent_id=f"bench-bus-{tag}-r")[0]
    Agent.objects.filter(id__in=[writer.id, watcher.id]).update(status=Agent.RunStatus.STOPPED)
    write: Callable[[str], object] = stdout.write
    try:
        engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
        write(f"agentbus bench: n={n} (after {WARMUP} warm-up rounds), database {engine}")
        brpop = _stats(measure_brpop(n, url))
        results = [(_layer_name(), _stats(measure_wait(n, writer, watcher)))]
        if isinstance(get_channel_layer(), InMemoryChannelLayer):
            with override_settings(CHANNEL_LAYERS=_redis_layers(url)):
                results.append((_layer_name(), _stats(measure_wait(n, writer, watcher))))
        write(f"  Redis BRPOP round trip ({url}): median {brpop[0]:.3f} ms, p99 {brpop[1]:.3f} ms")
        for name, (median, p99) in results:
            write(f"  wait wake-up, append commit -> answer, {name}: median {median:.3f} ms, p99 {p99:.3f} ms")
            write(f"    ratio wait / BRPOP: median {median / brpop[0]:.1f}x, p99 {p99 / brpop[1]:.1f}x")
    finally:
        ids = [writer.id, watcher.id]
        AuditEvent.objects.filter(agent_id__in=ids).delete()
        ConsumerCursor.objects.filter(agent_id__in=ids).delete()
        Agent.objects.filter(id__in=ids).delete()
